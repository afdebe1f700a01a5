"""`zkcoord compare report`: reads many trace runs into Spark, computes the metrics (migration.compare.transforms),
and writes tables (CSV + Parquet), PNG plots and one report.html that references them.

Only this module does I/O for the report; the metric logic lives in the pure transforms. Trace directories are
paths or URIs (file://, hdfs://, s3a://...) that the executors read, so the job runs unchanged on local[2], a
cluster (`--master spark://...`) or Spark Connect (`--remote sc://...`). Aggregated tables are small: they are
collected to the driver and written there, into the output directory, or staged locally and uploaded when the
output is a URI of another filesystem.
"""

from __future__ import annotations

import csv
import html
import json
import math
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from migration.compare.trace import (
    EVENTS_DIR,
    META_FILE,
    RunMeta,
    TraceError,
    event_parts,
    find_runs,
    read_meta,
)
from migration.spark import filesystem, has_scheme, job_uri

STAGES = (
    "find traces",
    "start Spark",
    "load events",
    "rebalances and latency",
    "partition movement",
    "ownership gaps and overlaps",
    "records and work per rebalance",
    "summary",
    "write tables",
    "plots",
    "report.html",
)

TIMELINE_MAX_PARTITIONS = 32
# The fewest samples a percentile is shown from: below it the p95 (p99) is the 2nd-largest (largest) value or an
# interpolation between the top two, a number that says nothing about a tail. The table shows "n<20" instead.
MIN_SAMPLES = {"p95": 20, "p99": 100}
SMALL_TRACES_BYTES = 64 << 20


@dataclass
class ReportResult:
    out_dir: Path
    runs: list[RunMeta]
    tables: dict[str, Path] = field(default_factory=dict)
    plots: dict[str, Path] = field(default_factory=dict)
    html: Path | None = None
    summary: list[dict[str, Any]] = field(default_factory=list)
    churn_events: dict[tuple[str, str], int] = field(default_factory=dict)  # (scenario, protocol) -> count
    handovers: list[dict[str, Any]] = field(default_factory=list)  # per (scenario, protocol), per change
    generated: dict[str, Any] = field(
        default_factory=dict
    )  # when, by which version, on which machine and load


# --------------------------------------------------------------------------------------------------------------
# Loading


def events_spark_schema() -> Any:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("run_id", StringType(), False),
            StructField("scenario", StringType(), False),
            StructField("protocol", StringType(), False),
            StructField("ts_ms", LongType(), False),
            StructField("kind", StringType(), False),
            StructField("member", StringType(), True),
            StructField("topic", StringType(), True),
            StructField("partition", IntegerType(), True),
            StructField("offset", LongType(), True),
            StructField("generation", IntegerType(), True),
            StructField("detail", StringType(), True),
        ]
    )


def runs_frame(spark: Any, metas: Sequence[RunMeta]) -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("run_id", StringType(), False),
            StructField("scenario", StringType(), False),
            StructField("protocol", StringType(), False),
            StructField("strategy", StringType(), False),
            StructField("started_ms", LongType(), False),
            StructField("ended_ms", LongType(), True),
            StructField("stopping_ms", LongType(), True),
        ]
    )
    rows = [
        (m.run_id, m.scenario, m.protocol, m.strategy, m.started_ms, m.ended_ms, m.stopping_ms) for m in metas
    ]
    return spark.createDataFrame(rows, schema)


@dataclass(frozen=True, slots=True)
class FoundRun:
    """One run directory as the executors will read it (`uri`), its metadata, its events' size in bytes."""

    uri: str
    meta: RunMeta
    size: int


def load_runs(paths: Sequence[str | Path]) -> list[FoundRun]:
    """Every run beneath `paths` (local paths or URIs), checked: run ids are unique and every run has at least
    one events part."""
    runs = sorted(_find_local(paths) + _find_remote(paths), key=lambda r: r.uri)
    seen: dict[str, str] = {}
    for run in runs:
        if run.meta.run_id in seen:
            raise TraceError(f"{run.uri}: run_id {run.meta.run_id!r} also used by {seen[run.meta.run_id]}")
        seen[run.meta.run_id] = run.uri
    return runs


def _find_local(paths: Sequence[str | Path]) -> list[FoundRun]:
    local = [p for p in (_local_path(raw) for raw in paths) if p is not None]
    found = []
    for run_dir in find_runs(local) if local else []:
        meta = read_meta(run_dir)
        parts = event_parts(run_dir)
        if not parts:
            raise TraceError(f"{run_dir / EVENTS_DIR}: no part-*.parquet files")
        found.append(FoundRun(job_uri(run_dir), meta, sum(p.stat().st_size for p in parts)))
    return found


def _local_path(path: str | Path) -> Path | None:
    """The local path behind `path` ('file:///x' included), or None for another filesystem's URI."""
    text = str(path)
    if not has_scheme(text):
        return Path(text)
    if text.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(text).path))
    return None


def _find_remote(paths: Sequence[str | Path]) -> list[FoundRun]:
    """Runs beneath URIs of other filesystems (hdfs, s3...), listed and read through pyarrow's filesystems."""
    from pyarrow import fs as pafs

    found = []
    for raw in (str(p) for p in paths if _local_path(p) is None):
        filesys, root = filesystem(raw)
        scheme = raw.split("://", 1)[0]
        infos = filesys.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        metas = sorted(i.path for i in infos if i.base_name == META_FILE)
        if not metas:
            raise TraceError(f"{raw}: holds no trace run (no {META_FILE} found beneath it)")
        for meta_path in metas:
            run_root = meta_path.rsplit("/", 1)[0]
            with filesys.open_input_stream(meta_path) as fh:
                meta = RunMeta.from_json(json.loads(fh.read().decode("utf-8")), f"{scheme}://{meta_path}")
            parts = [
                i
                for i in infos
                if i.path.startswith(f"{run_root}/{EVENTS_DIR}/part-") and i.path.endswith(".parquet")
            ]
            if not parts:
                raise TraceError(f"{scheme}://{run_root}/{EVENTS_DIR}: no part-*.parquet files")
            found.append(FoundRun(f"{scheme}://{run_root}", meta, sum(i.size or 0 for i in parts)))
    return found


def load_events(spark: Any, run_uris: Sequence[str]) -> Any:
    return spark.read.schema(events_spark_schema()).parquet(*[f"{u}/{EVENTS_DIR}" for u in run_uris])


# --------------------------------------------------------------------------------------------------------------
# Writing tables


def _arrow_type(spark_type: Any) -> pa.DataType:
    name = type(spark_type).__name__
    return {
        "LongType": pa.int64(),
        "IntegerType": pa.int32(),
        "DoubleType": pa.float64(),
        "StringType": pa.string(),
        "BooleanType": pa.bool_(),
    }.get(name, pa.string())


def write_table(df: Any, out_dir: Path, name: str) -> tuple[Path, list[dict[str, Any]]]:
    """Collect `df` and write `<name>.csv` and `<name>.parquet`; returns the CSV path and the rows."""
    rows = [r.asDict() for r in df.collect()]
    schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in df.schema.fields])
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, out_dir / f"{name}.parquet")
    csv_path = out_dir / f"{name}.csv"
    with open(csv_path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(schema.names)
        for r in rows:
            w.writerow(["" if r[c] is None else r[c] for c in schema.names])
    return csv_path, rows


# --------------------------------------------------------------------------------------------------------------
# Plots


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(scenario: str, protocol: str, scenarios: int) -> str:
    return protocol if scenarios <= 1 else f"{scenario}\n{protocol}"


def _box_axes(
    ax: Any,
    keys: Sequence[tuple[str, str]],
    data: Sequence[Sequence[float]],
    scenarios: int,
    empty_note: str,
    tick_size: float | None = None,
) -> None:
    """One box (5th-95th percentile whiskers) per key with every value drawn as a dot, y from 0."""
    if any(data):
        ax.boxplot(data, showfliers=False, whis=(5, 95))
        for i, vals in enumerate(data, start=1):
            xs = [i + 0.18 * ((j % 7) - 3) / 3 for j in range(len(vals))]
            ax.scatter(xs, vals, s=12, alpha=0.6, color="tab:blue", zorder=3)
        ax.set_xticks(
            range(1, len(keys) + 1),
            [f"{_label(s, p, scenarios)}\n(n={len(d)})" for (s, p), d in zip(keys, data, strict=True)],
            fontsize=tick_size,
        )
    else:
        ax.text(0.5, 0.5, empty_note, ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)


def plot_distribution(
    values: Mapping[tuple[str, str], Sequence[float]], title: str, ylabel: str, path: Path, empty_note: str
) -> Path:
    """Box plot (with every value drawn as a dot) per (scenario, protocol)."""
    plt = _plt()
    keys = sorted(values)
    scenarios = len({k[0] for k in keys})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.8 * len(keys) + 2), 4.5), dpi=100)
    _box_axes(ax, keys, [list(values[k]) for k in keys], scenarios, empty_note)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_bars(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[tuple[str, str]], title: str, ylabel: str, path: Path
) -> Path:
    """Grouped bars: one group per (scenario, protocol), one bar per metric (column, legend label)."""
    plt = _plt()
    keys = sorted({(r["scenario"], r["protocol"]) for r in rows})
    scenarios = len({k[0] for k in keys})
    totals = {
        (k, col): sum(float(r[col] or 0) for r in rows if (r["scenario"], r["protocol"]) == k)
        for k in keys
        for col, _ in metrics
    }
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(keys) + 2), 4.5), dpi=100)
    width = 0.8 / max(len(metrics), 1)
    colors = ["tab:orange", "tab:red", "tab:purple", "tab:green"]
    for j, (col, label) in enumerate(metrics):
        xs = [i + (j - (len(metrics) - 1) / 2) * width for i in range(len(keys))]
        ys = [totals[(k, col)] for k in keys]
        bars = ax.bar(xs, ys, width=width, label=label, color=colors[j % len(colors)])
        ax.bar_label(bars, labels=[f"{y:g}" for y in ys], padding=2, fontsize=8)
    ax.set_xticks(range(len(keys)), [_label(s, p, scenarios) for s, p in keys])
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylim(bottom=0, top=max([1.0, *totals.values()]) * 1.15)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_timeline(
    panels: Sequence[
        tuple[RunMeta, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]
    ],
    path: Path,
) -> Path:
    """One panel per run: a row per partition, a bar per ownership interval colored by member, red hatched
    boxes for overlaps, grey hatched boxes for gaps, dotted vertical lines at churn events."""
    plt = _plt()
    from matplotlib.patches import Patch

    heights = []
    for _, intervals, _, _ in panels:
        distinct = {(r["topic"], r["partition"]) for r in intervals}
        heights.append(max(2, min(len(distinct), TIMELINE_MAX_PARTITIONS)))
    fig, axes = plt.subplots(
        len(panels) or 1,
        1,
        figsize=(11, 1.2 + sum(0.32 * h + 0.9 for h in heights)),
        dpi=100,
        squeeze=False,
        gridspec_kw={"height_ratios": heights or [1]},
        layout="constrained",  # keeps the suptitle and the outside legends clear of the panels
    )
    for ax, (meta, intervals, anomalies, churn) in zip(axes[:, 0], panels, strict=False):
        t0 = meta.started_ms
        tps = sorted({(r["topic"], r["partition"]) for r in intervals})[:TIMELINE_MAX_PARTITIONS]
        row = {tp: i for i, tp in enumerate(tps)}
        members = sorted({r["member"] for r in intervals}, key=_natural)
        protocols = _member_protocols(meta)
        # One hue per protocol kind in every panel (blues: ZooKeeper members, oranges: broker protocol), a shade
        # per member: a mixed group's hand-overs show, and no panel reuses the other kind's hue for its members.
        color = _protocol_colours(plt, members, protocols or dict.fromkeys(members, meta.protocol))
        for r in intervals:
            tp = (r["topic"], r["partition"])
            if tp in row:
                ax.broken_barh(
                    [((r["start_ms"] - t0) / 1000, (r["end_ms"] - r["start_ms"]) / 1000)],
                    (row[tp] - 0.35, 0.7),
                    facecolors=color[r["member"]],
                )
        for a in anomalies:
            tp = (a["topic"], a["partition"])
            if tp in row:
                overlap = a["kind"] == "overlap"
                ax.broken_barh(
                    [((a["start_ms"] - t0) / 1000, max(a["duration_ms"], 1) / 1000)],
                    (row[tp] - 0.45, 0.9),
                    facecolors="none",
                    edgecolors="red" if overlap else "dimgrey",
                    hatch="xxx" if overlap else "///",
                    linewidth=1.0,
                )
        for c in churn:
            x = (c["churn_ms"] - t0) / 1000
            ax.axvline(x, color="black", linestyle=":", linewidth=1)
            ax.text(x, len(tps) - 0.4, f" {c['event'] or 'churn'}", fontsize=7, va="bottom", rotation=0)
        ax.set_yticks(range(len(tps)), [f"{t}-{p}" for t, p in tps], fontsize=7)
        ax.set_ylim(-0.7, len(tps) + 0.3)
        kind = (
            "one group of both kinds, blues: ZooKeeper members, oranges: broker protocol" if protocols else ""
        )
        ax.set_title(
            f"{meta.protocol} ({meta.strategy}) — run {meta.run_id}, scenario {meta.scenario}"
            + (f"\n{kind}" if kind else ""),
            fontsize=10,
        )
        ax.set_xlabel("time since run start (s)")
        ax.set_ylabel("partition")
        handles = [
            Patch(facecolor=color[m], label=f"{m} ({protocols[m]})" if m in protocols else m)
            for m in members[:12]
        ]
        handles += [
            Patch(facecolor="none", edgecolor="dimgrey", hatch="///", label="gap (no owner)"),
            Patch(facecolor="none", edgecolor="red", hatch="xxx", label="overlap (2+ owners)"),
        ]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, title="owner")
        if meta.ended_ms is not None:
            ax.set_xlim(0, (meta.ended_ms - t0) / 1000)
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no ownership intervals in the traces", ha="center", va="center")
    fig.suptitle("Partition ownership over time (one run per protocol)")
    fig.savefig(path)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------------------------
# HTML


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.1f}" if abs(v) >= 10 or v == int(v) else f"{v:,.2f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return html.escape(str(v))


def _html_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in columns)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(r.get(c))}</td>" for c, _ in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


HANDOVER_COLUMNS = (
    ("scenario", "scenario"),
    ("protocol", "protocol"),
    ("changes", "churn events"),
    ("released_per_change", "released / change"),
    ("released_kept_per_change", "released, holder stayed / change"),
    ("unowned_s_per_change", "unowned partition-s / change"),
)

SUMMARY_COLUMNS = (
    ("scenario", "scenario"),
    ("protocol", "protocol"),
    ("strategy", "strategy"),
    ("runs", "runs"),
    ("run_minutes", "run time (min)"),
    ("rebalances", "rebalances (n)"),
    ("rebalance_p50_ms", "rebalance p50 (ms)"),
    ("rebalance_p95_ms", "p95 (ms, n≥20)"),
    ("rebalance_p99_ms", "p99 (ms, n≥100)"),
    ("rebalance_max_ms", "max (ms)"),
    ("churn_events", "churn events (n)"),
    ("churn_to_stable_p50_ms", "churn→stable p50 (ms)"),
    ("churn_to_stable_p95_ms", "churn→stable p95 (ms, n≥20)"),
    ("moved_per_rebalance_mean", "partitions moved / rebalance"),
    ("gaps_per_churn", "gaps / churn event"),
    ("gap_ms_per_minute", "gap time (ms) / run-minute"),
    ("overlaps", "overlaps"),
    ("duplicates", "duplicate records"),
    ("duplicates_per_churn", "duplicates / churn event"),
    ("lost", "lost records"),
    ("commits_per_rebalance", "commits / rebalance"),
    ("zk_ops_per_rebalance", "ZooKeeper ops / rebalance"),
)


def run_minutes(runs: Sequence[RunMeta]) -> dict[tuple[str, str], float]:
    """Total played time per (scenario, protocol), in minutes: what rates are normalised by (runs differ in
    length: a run with a slow rebalance lasts longer and has more time to lose)."""
    out: dict[tuple[str, str], float] = {}
    for m in runs:
        if m.ended_ms is not None and m.ended_ms > m.started_ms:
            key = (m.scenario, m.protocol)
            out[key] = out.get(key, 0.0) + (m.ended_ms - m.started_ms) / 60_000
    return out


def presentable(
    summary: Sequence[Mapping[str, Any]], churn_events: Mapping[tuple[str, str], int], runs: Sequence[RunMeta]
) -> list[dict[str, Any]]:
    """The summary as the report shows it: every percentile beside its sample count and hidden below
    MIN_SAMPLES, counts normalised per run-minute and per churn event."""
    minutes = run_minutes(runs)
    rows = []
    for r in summary:
        key = (r["scenario"], r["protocol"])
        row = dict(r)
        n_reb, n_churn, mins = r.get("rebalances") or 0, churn_events.get(key, 0), minutes.get(key)
        row["churn_events"] = n_churn
        row["run_minutes"] = None if mins is None else round(mins, 2)
        for prefix, n in (("rebalance", n_reb), ("churn_to_stable", n_churn)):
            for pct, least in MIN_SAMPLES.items():
                col = f"{prefix}_{pct}_ms"
                if col in row and n < least:
                    row[col] = f"n<{least}"
        gaps, gap_ms, dups = r.get("gaps"), r.get("gap_ms_total"), r.get("duplicates")
        row["gap_ms_per_minute"] = None if gap_ms is None or not mins else gap_ms / mins
        row["gaps_per_churn"] = None if gaps is None or not n_churn else gaps / n_churn
        row["duplicates_per_churn"] = None if dups is None or not n_churn else dups / n_churn
        rows.append(row)
    return rows


def takeaway(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A few sentences written from the figures: per scenario, which protocol rebalanced fastest (medians with
    their sample counts), which left partitions without an owner longest (per run-minute), and what the
    duplicates and losses were."""
    out: list[str] = []
    for scenario in sorted({r["scenario"] for r in rows}):
        mine = [r for r in rows if r["scenario"] == scenario]
        timed = sorted(
            (r for r in mine if isinstance(r.get("rebalance_p50_ms"), (int, float))),
            key=lambda r: float(r["rebalance_p50_ms"]),
        )
        if len(timed) >= 2:
            fast, slow = timed[0], timed[-1]
            ratio = float(slow["rebalance_p50_ms"]) / max(float(fast["rebalance_p50_ms"]), 1.0)
            out.append(
                f"{scenario}: {fast['protocol']} rebalanced fastest, median {_fmt(fast['rebalance_p50_ms'])} ms over "
                f"{fast['rebalances']} rebalances; {slow['protocol']} slowest, {_fmt(slow['rebalance_p50_ms'])} ms "
                f"over {slow['rebalances']} ({ratio:.1f}x)"
                + (
                    f"; fewer than {MIN_SAMPLES['p95']} rebalances each: a ranking a second run may reverse, "
                    "play more runs (--runs N) before relying on it."
                    if min(int(fast["rebalances"] or 0), int(slow["rebalances"] or 0)) < MIN_SAMPLES["p95"]
                    else "."
                )
            )
        gapped = sorted(
            (r for r in mine if r.get("gap_ms_per_minute") is not None), key=lambda r: r["gap_ms_per_minute"]
        )
        if len(gapped) >= 2:
            out.append(
                f"{scenario}: partitions went unconsumed least with {gapped[0]['protocol']} "
                f"({_fmt(gapped[0]['gap_ms_per_minute'])} ms per run-minute) and most with {gapped[-1]['protocol']} "
                f"({_fmt(gapped[-1]['gap_ms_per_minute'])} ms per run-minute)."
            )
        dups = [r for r in mine if (r.get("duplicates") or 0) > 0]
        if dups:
            out.append(
                f"{scenario}: duplicates "
                + ", ".join(
                    f"{r['protocol']} {_fmt(r['duplicates'])}"
                    + (
                        f" ({_fmt(r['duplicates_per_churn'])} per churn event)"
                        if r.get("duplicates_per_churn")
                        else ""
                    )
                    for r in dups
                )
                + ": records consumed after a member's last commit and before it gave its partitions up are "
                "delivered again to the next owner (at-least-once; fewer with a shorter commit interval)."
            )
        lost = [r for r in mine if (r.get("lost") or 0) > 0]
        out.append(
            f"{scenario}: no record lost."
            if not lost
            else f"{scenario}: records LOST in "
            + ", ".join(f"{r['protocol']} ({_fmt(r['lost'])})" for r in lost)
            + "."
        )
    return out


SUMMARY_VERSION = 1
_TEXT_COLUMNS = ("scenario", "protocol", "strategy")
# The JSON Schema of summary.json and `zkcoord compare report --json`: the stable contract (fields only added).
SUMMARY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "generated", "runs", "takeaway", "min_samples", "summary"],
    "properties": {
        "version": {"const": SUMMARY_VERSION},
        "generated": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        "runs": {"type": "integer", "minimum": 0},
        "takeaway": {"type": "array", "items": {"type": "string"}},
        "min_samples": {"type": "object", "additionalProperties": {"type": "integer"}},
        "summary": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [key for key, _ in SUMMARY_COLUMNS],
                "properties": {
                    key: {"type": "string"} if key in _TEXT_COLUMNS else {"type": ["number", "null"]}
                    for key, _ in SUMMARY_COLUMNS
                },
                "additionalProperties": False,
            },
            "description": "one row per (scenario, protocol); a percentile from fewer than min_samples is null",
        },
    },
    "additionalProperties": False,
}


def summary_document(result: ReportResult) -> dict[str, Any]:
    """The report's summary as data (SUMMARY_SCHEMA): the rows the HTML table shows, with a percentile from too
    few samples as null instead of "n<20", the takeaway and the run metadata."""
    rows = presentable(result.summary, result.churn_events, result.runs)
    out_rows = []
    for r in rows:
        row: dict[str, Any] = {}
        for key, _ in SUMMARY_COLUMNS:
            value = r.get(key)
            if key in _TEXT_COLUMNS:
                row[key] = "" if value is None else str(value)
            else:
                row[key] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
                if isinstance(row[key], float) and math.isnan(row[key]):
                    row[key] = None
        out_rows.append(row)
    return {
        "version": SUMMARY_VERSION,
        "generated": {k: (None if v is None else str(v)) for k, v in result.generated.items()},
        "runs": len(result.runs),
        "takeaway": takeaway(rows),
        "min_samples": dict(MIN_SAMPLES),
        "summary": out_rows,
    }


def run_metadata(runs: Sequence[RunMeta], now_s: float) -> dict[str, Any]:
    """When and where the report was made, and when its runs were played: a figure is read against these."""
    import os
    import platform
    import socket
    import time

    from zkcoord import __version__

    starts = [m.started_ms for m in runs if m.started_ms is not None]
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now_s)),
        "zkcoord": __version__,
        "machine": f"{socket.gethostname()}, {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "load": None if load is None else f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)",
        "runs_from": None
        if not starts
        else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(min(starts) / 1000)),
        "runs_to": None
        if not starts
        else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(max(starts) / 1000)),
    }


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2em}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,td:nth-child(2),td:nth-child(3){text-align:left}
figure{margin:1.5em 0}figcaption{color:#444;font-size:14px;max-width:900px}img{max-width:100%;border:1px solid #eee}
.bad{color:#b00;font-weight:bold}
"""


def write_html(result: ReportResult, out_dir: Path, captions: Mapping[str, tuple[str, str]]) -> Path:
    runs_rows = [
        {
            "run_id": m.run_id,
            "scenario": m.scenario,
            "protocol": m.protocol,
            "strategy": m.strategy,
            "duration_s": None if m.ended_ms is None else (m.ended_ms - m.started_ms) / 1000,
            "complete": "yes" if m.complete else "NO",
        }
        for m in sorted(result.runs, key=lambda m: (m.scenario, m.protocol, m.run_id))
    ]
    trouble = [r for r in result.summary if (r.get("lost") or 0) > 0 or (r.get("overlaps") or 0) > 0]
    verdict = (
        "<p class='bad'>Lost records or ownership overlaps found in: "
        + ", ".join(html.escape(f"{r['scenario']}/{r['protocol']}") for r in trouble)
        + "</p>"
        if trouble
        else "<p>No lost records and no ownership overlaps in any run.</p>"
    )
    figures = []
    for name, path in result.plots.items():
        title, caption = captions.get(name, (name, ""))
        figures.append(
            f"<figure><h3>{html.escape(title)}</h3><img src='plots/{html.escape(path.name)}' alt='{html.escape(title)}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    links = " · ".join(
        f"<a href='tables/{html.escape(p.name)}'>{html.escape(n)}</a>"
        for n, p in sorted(result.tables.items())
    )
    rows = presentable(result.summary, result.churn_events, result.runs)
    meta = result.generated
    about = " · ".join(
        f"{label}: {html.escape(str(meta[k]))}"
        for k, label in (("generated", "generated"), ("zkcoord", "zkcoord"), ("machine", "machine"),
                         ("load", "load average at report time"), ("runs_from", "runs played from"),
                         ("runs_to", "to"))
        if meta.get(k) is not None
    )  # fmt: skip
    points = "".join(f"<li>{html.escape(t)}</li>" for t in takeaway(rows))
    doc = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>zkcoord comparison report</title><style>{_CSS}</style></head>
<body>
<h1>zkcoord comparison report</h1>
<p class="sub">{len(result.runs)} runs, {len({m.scenario for m in result.runs})} scenario(s),
protocols: {html.escape(", ".join(sorted({m.protocol for m in result.runs})))}.
Metric definitions: docs/comparison.md.</p>
<p class="sub">{about}</p>
{verdict}
<h2>Takeaway</h2>
<ul>{points}</ul>
<h2>Summary per scenario and protocol</h2>
<p class="sub">Percentiles are shown only from enough samples (p95 from 20, p99 from 100; otherwise "n&lt;20"),
next to their counts. Rates are per minute of played time or per churn event, so runs of different lengths
compare. Duplicates: records a member consumed after its last commit, delivered again to the next owner of the
partition after a rebalance (at-least-once); lost records are never acceptable.</p>
{_html_table(rows, SUMMARY_COLUMNS)}
<h2>Hand-overs per membership change</h2>
<p class="sub">Per churn event, until the next one: partitions some member released, those released although
the same member owned them again (an eager hand-over; an incremental one releases only what moves), and the
partition-seconds without an owner. Means over every churn event of every run; docs/comparison.md.</p>
{_html_table(result.handovers, HANDOVER_COLUMNS)}
<h2>Plots</h2>
{"".join(figures)}
<h2>Runs</h2>
{_html_table(runs_rows, [(k, k.replace("_", " ")) for k in ("run_id", "scenario", "protocol", "strategy", "duration_s", "complete")])}
<h2>Tables</h2>
<p>CSV (Parquet alongside): {links}</p>
</body></html>
"""
    path = out_dir / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path


CAPTIONS: dict[str, tuple[str, str]] = {
    "latency": (
        "Rebalance latency per protocol",
        "Left: each rebalance's duration, from the first member's rebalance_start to the last member's "
        "rebalance_end of the same generation. Right: from each churn event to the last rebalance_end before "
        "the next churn event (the group is stable again). Boxes: quartiles, whiskers 5th-95th percentile, dots: "
        "every value. Lower is better.",
    ),
    "moved": (
        "Partitions moved per rebalance",
        "For every rebalance after a run's first assignment: partitions whose owner differs from their previous "
        "owner. Lower means less state thrown away and fewer partitions paused.",
    ),
    "timeline": (
        "Ownership timeline",
        "Who owned each partition over time. Grey hatching: no owner (a gap: the partition is not consumed). "
        "Red cross-hatching: two or more owners at once (an overlap: records may be processed twice). "
        "Dotted lines: churn events.",
    ),
    "handovers": (
        "Hand-overs per membership change",
        "Per churn event (a join, leave, crash, replace, ...) until the next: partitions some member released; "
        "of them, those the same member owned again (released although the holder stayed: an eager hand-over; "
        "an incremental one, cooperative or legacy-fast, releases only what moves); and partition-seconds "
        "without an owner. Means per event; lower is better.",
    ),
    "records": (
        "Duplicate and lost records",
        "Duplicates: deliveries beyond the first of the same topic/partition/offset. They come from "
        "at-least-once hand-overs: a member consumed records after its last offset commit, then gave the "
        "partition up in a rebalance, and the next owner starts from that commit; a shorter commit interval "
        "(or a commit on revoke) makes them fewer. Lost: produced offsets that were never consumed; never "
        "acceptable. The summary table has duplicates per churn event.",
    ),
    "ownership": (
        "Time without an owner, time with two owners",
        "Total milliseconds, summed over all partitions and runs, of gaps (no owner) and overlaps (2+ owners). "
        "Runs differ in length: the summary table gives gap time per run-minute to compare them.",
    ),
}


# --------------------------------------------------------------------------------------------------------------
# The job


@contextmanager
def _stages(console: Any, enabled: bool) -> Iterator[Callable[[str], None]]:
    """Yield `advance(stage)`; with `enabled`, shows a rich progress bar over STAGES."""
    if not enabled:
        yield lambda _stage: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]compare report[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task(STAGES[0], total=len(STAGES))
        started = [False]

        def advance(stage: str) -> None:
            if started[0]:
                progress.advance(task)
            started[0] = True
            progress.update(task, description=stage)

        yield advance
        progress.update(task, completed=len(STAGES), description="done")


def run_report(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    master: str | None = None,
    spark: Any = None,
    timeline_run: str | None = None,
    console: Any = None,
    progress: bool = True,
    shuffle_partitions: int | None = None,
) -> ReportResult:
    """The whole job. Pass `spark` to reuse a session (tests); otherwise one is started on `master`
    (local[2] by default, or a Spark Connect URL sc://host:port) and stopped at the end. `out_dir` is a local
    path or a URI; for another filesystem the report is staged in a local temporary directory (the paths in
    the result) and uploaded there at the end. `shuffle_partitions` defaults to one per 64 MiB of trace
    Parquet (at least 1, at most 200): traces are small, and every extra empty partition costs a task per stage."""
    from migration.compare import transforms as T

    target = _local_path(out_dir)
    out = target if target is not None else Path(tempfile.mkdtemp(prefix="zkcoord-report-"))
    own_session = spark is None
    with _stages(console, progress) as stage:
        stage("find traces")
        found = load_runs(paths)
        metas = [r.meta for r in found]
        if timeline_run is not None and timeline_run not in {m.run_id for m in metas}:
            raise TraceError(f"--timeline-run {timeline_run!r}: no such run among {len(metas)} runs")
        (out / "tables").mkdir(parents=True, exist_ok=True)
        (out / "plots").mkdir(parents=True, exist_ok=True)
        result = ReportResult(out_dir=out, runs=metas)
        stage("start Spark")
        size = sum(r.size for r in found)
        if spark is None:
            from migration.spark import spark_session

            spark = spark_session(
                master, app_name="zkcoord-compare-report", short_job=size < SMALL_TRACES_BYTES
            )
        if shuffle_partitions is None:
            shuffle_partitions = max(1, min(200, size // (64 << 20)))
        settings = {"spark.sql.shuffle.partitions": str(shuffle_partitions)}
        if size < SMALL_TRACES_BYTES:
            # Small traces: compiling whole-stage code and re-planning adaptively cost more than they save
            # (the demo's report takes ~30 s instead of ~45 s); results are the same either way.
            settings |= {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false"}
        previous = {k: spark.conf.get(k, None) for k in settings}
        for k, v in settings.items():
            spark.conf.set(k, v)
        try:
            stage("load events")
            events = load_events(spark, [r.uri for r in found]).cache()
            runs = runs_frame(spark, metas).cache()
            stage("rebalances and latency")
            episodes = T.rebalance_episodes(events).cache()
            churn = T.churn_to_stable(events, runs).cache()
            stage("partition movement")
            moved = T.partitions_moved(events).cache()
            stage("ownership gaps and overlaps")
            intervals = T.ownership_intervals(events, runs).cache()
            anomalies = T.ownership_anomalies(intervals, runs).cache()
            per_run = T.anomaly_totals(anomalies, runs)
            changes = T.handovers_per_change(events, runs, anomalies).cache()
            stage("records and work per rebalance")
            delivery = T.record_delivery(events, runs).cache()
            ops = T.ops_per_episode(events, episodes)
            stage("summary")
            summary_df = T.summary(runs, episodes, churn, moved, per_run, delivery, ops)
            stage("write tables")
            tables = {
                "summary": summary_df,
                "rebalances": ops.join(episodes, [*T.RUN_KEYS, "generation", "start_ms", "end_ms"]).orderBy(
                    "run_id", "generation"
                ),
                "churn_to_stable": churn.orderBy("run_id", "seq"),
                "partitions_moved": moved.orderBy("run_id", "generation"),
                "ownership_anomalies": anomalies.orderBy("run_id", "topic", "partition", "start_ms"),
                "ownership_per_run": per_run.orderBy("run_id"),
                "records": delivery.orderBy("run_id"),
                "membership_changes": changes.orderBy("run_id", "seq"),
                "handovers": T.handovers_by_protocol(changes),
            }
            collected: dict[str, list[dict[str, Any]]] = {}
            for name, df in tables.items():
                path, rows = write_table(df, out / "tables", name)
                result.tables[name] = path
                collected[name] = rows
            result.summary = collected["summary"]
            result.handovers = collected["handovers"]
            for r in collected["churn_to_stable"]:
                key = (r["scenario"], r["protocol"])
                result.churn_events[key] = result.churn_events.get(key, 0) + 1
            import time as _time

            result.generated = run_metadata(metas, _time.time())
            stage("plots")
            plots = out / "plots"
            scen = len({m.scenario for m in metas})

            def by_key(
                rows: list[dict[str, Any]], col: str, where: Callable[[dict[str, Any]], bool]
            ) -> dict[tuple[str, str], list[float]]:
                keys = {(m.scenario, m.protocol) for m in metas}
                out_: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
                for r in rows:
                    if r[col] is not None and where(r):
                        out_[(r["scenario"], r["protocol"])].append(float(r[col]))
                return out_

            result.plots["latency"] = _latency_plot(
                by_key(collected["rebalances"], "duration_ms", lambda r: True),
                by_key(collected["churn_to_stable"], "latency_ms", lambda r: True),
                plots / "latency.png",
                scen,
            )
            result.plots["moved"] = plot_distribution(
                by_key(collected["partitions_moved"], "moved", lambda r: not r["first"]),
                "Partitions moved per rebalance",
                "partitions moved (count)",
                plots / "moved.png",
                "no rebalance after the first assignment",
            )
            result.plots["timeline"] = plot_timeline(
                _timeline_panels(
                    metas,
                    intervals,
                    collected["ownership_anomalies"],
                    collected["churn_to_stable"],
                    timeline_run,
                ),
                plots / "timeline.png",
            )
            result.plots["records"] = plot_bars(
                collected["records"],
                [("duplicates", "duplicate deliveries"), ("lost", "lost records")],
                "Duplicate and lost records per protocol",
                "records (count, all runs)",
                plots / "records.png",
            )
            result.plots["ownership"] = plot_bars(
                collected["ownership_per_run"],
                [("gap_ms_total", "gap time (no owner)"), ("overlap_ms_total", "overlap time (2+ owners)")],
                "Partition time without an owner / with two owners",
                "milliseconds (sum over partitions and runs)",
                plots / "ownership.png",
            )
            result.plots["handovers"] = plot_bars(
                collected["handovers"],
                [("released_per_change", "partitions released"),
                 ("released_kept_per_change", "released though the holder stayed"),
                 ("unowned_s_per_change", "unowned partition-seconds")],
                "Hand-overs per membership change",
                "mean per churn event (count / partition-seconds)",
                plots / "handovers.png",
            )  # fmt: skip
            stage("report.html")
            result.html = write_html(result, out, CAPTIONS)
            (out / "summary.json").write_text(
                json.dumps(summary_document(result), indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
            (out / "runs.json").write_text(
                json.dumps([m.to_json() for m in metas], indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        finally:
            for k, v in previous.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)
            if own_session:
                spark.stop()
    if target is None:
        _upload(out, str(out_dir))
    return result


def _upload(staged: Path, uri: str) -> None:
    from pyarrow import fs as pafs

    filesys, inner = filesystem(uri)
    filesys.create_dir(inner, recursive=True)
    pafs.copy_files(
        str(staged), inner, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=filesys
    )


def _latency_plot(
    rebalances: Mapping[tuple[str, str], Sequence[float]],
    churn: Mapping[tuple[str, str], Sequence[float]],
    path: Path,
    scenarios: int,
) -> Path:
    plt = _plt()
    keys = sorted(set(rebalances) | set(churn))
    fig, axes = plt.subplots(1, 2, figsize=(max(10.0, 2.6 * len(keys) + 3), 4.8), dpi=100)
    for ax, values, title in (
        (axes[0], rebalances, "Rebalance duration (start → end of a generation)"),
        (axes[1], churn, "Churn event → group stable again"),
    ):
        _box_axes(ax, keys, [list(values.get(k, ())) for k in keys], scenarios, "no data", tick_size=8)
        ax.set_title(title, fontsize=11)
        ax.set_ylabel("milliseconds")
    fig.suptitle("Rebalance latency per protocol (lower is better)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _member_protocols(meta: RunMeta) -> dict[str, str]:
    """member -> protocol of a mixed-group run (the runner writes it in run.json's extra); empty otherwise."""
    found = (meta.extra or {}).get("member_protocols") if meta.protocol == "mixed" else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _protocol_colours(plt: Any, members: Sequence[str], protocols: Mapping[str, str]) -> dict[str, Any]:
    """Blues for ZooKeeper (legacy) members, oranges for broker-protocol members; shades tell members apart."""
    legacy = [m for m in members if protocols.get(m, "").startswith("legacy")]
    broker = [m for m in members if m not in legacy]
    out: dict[str, Any] = {}
    for names, cmap in ((legacy, plt.get_cmap("Blues")), (broker, plt.get_cmap("Oranges"))):
        for m, shade in zip(names, _shades(len(names)), strict=True):
            out[m] = cmap(shade)
    return out


def _natural(name: str) -> tuple[str, int, str]:
    """m2 before m10: members in the order they were started."""
    head = name.rstrip("0123456789")
    digits = name[len(head) :]
    return (head, int(digits) if digits else -1, name)


def _shades(n: int) -> list[float]:
    """n shades of one colour map, as far apart as the map allows (0.3 .. 1.0), alternating light and dark so
    that members next to each other in the legend (and usually on the chart) never get neighbouring shades."""
    if n <= 1:
        return [0.65][:n]
    even = [0.3 + 0.7 * i / (n - 1) for i in range(n)]
    half = (n + 1) // 2
    return [even[i // 2] if i % 2 == 0 else even[half + i // 2] for i in range(n)]


def _timeline_panels(
    metas: Sequence[RunMeta],
    intervals: Any,
    anomalies: Sequence[dict[str, Any]],
    churn: Sequence[dict[str, Any]],
    run_id: str | None,
) -> list[Any]:
    """The runs to draw: `run_id` alone, or the first run (by id) of each protocol in the first scenario, then the
    first mixed-group run of every scenario (a rolling migration is shown whatever its scenario's name). Intervals
    are collected for the chosen runs only, in one job."""
    from pyspark.sql import functions as F

    if run_id is not None:
        chosen = [m for m in metas if m.run_id == run_id]
    else:
        first_scenario = min(m.scenario for m in metas)
        by_protocol: dict[str, RunMeta] = {}
        for m in sorted(metas, key=lambda m: m.run_id):
            if m.scenario == first_scenario:
                by_protocol.setdefault(m.protocol, m)
        chosen = [by_protocol[p] for p in sorted(by_protocol)]
        mixed: dict[str, RunMeta] = {}
        for m in sorted(metas, key=lambda m: m.run_id):
            if m.protocol == "mixed" and m not in chosen:
                mixed.setdefault(m.scenario, m)
        chosen += [mixed[s] for s in sorted(mixed)]
    ids = [m.run_id for m in chosen]
    rows = [r.asDict() for r in intervals.where(F.col("run_id").isin(ids)).collect()]
    panels = []
    for m in chosen:
        mine = sorted(
            (r for r in rows if r["run_id"] == m.run_id),
            key=lambda r: (r["topic"], r["partition"], r["start_ms"], r["member"]),
        )
        if mine:
            panels.append(
                (
                    m,
                    mine,
                    [a for a in anomalies if a["run_id"] == m.run_id],
                    [c for c in churn if c["run_id"] == m.run_id],
                )
            )
    return panels
