"""The whole report job on a small synthetic trace set: tables, PNG plots that are real images, and an HTML
page that references them."""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_traces import write_run

from migration.compare.trace import EventKind, RunMeta, TraceWriter
from zkcoord.cli import main

pytestmark = pytest.mark.spark

PARTITIONS = 4
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    """One run of `zkcoord compare report` over: two identical eager runs (legacy-fast), one cooperative run
    (classic-confluent), and a run that loses a record (legacy-faithful)."""
    root = tmp_path_factory.mktemp("traces")
    write_run(root / "a", "eager-1", "legacy-fast", "range", eager=True)
    write_run(root / "a", "coop-1", "classic-confluent", "cooperative-sticky", eager=False)
    extra = write_run(root / "b", "eager-2", "legacy-fast", "range", eager=True)
    w = TraceWriter(root / "lossy", RunMeta("lossy-1", "synthetic", "legacy-faithful", "range", 0))
    w.emit(5, EventKind.PRODUCE, topic="t", partition=0, offset=0)
    w.emit(6, EventKind.OWN_START, member="A", topic="t", partition=0)
    w.close(ended_ms=100)

    class Borrowed:
        """The test session, which the job must not stop."""

        def __getattr__(self, name):
            return getattr(spark, name)

        def stop(self):
            pass

    seen = {}

    def fake_session(master=None, app_name="zkcoord", driver_memory="1g", short_job=False):
        seen["master"], seen["short_job"] = master, short_job
        return Borrowed()

    out = root / "out"
    before = spark.conf.get("spark.sql.shuffle.partitions")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("migration.spark.spark_session", fake_session)
        rc = main(["compare", "report", str(root / "a"), str(extra), str(root / "lossy"), "--out", str(out),
                   "--master", "local[1]", "--no-progress"])  # fmt: skip
    assert rc == 0
    assert seen["master"] == "local[1]"
    assert seen["short_job"] is True  # a few KB of traces: a job of seconds (SHORT_JOB_JAVA_OPTIONS)
    # run_report sizes shuffles to the data and restores the setting (report.py, `finally:` of run_report).
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    return out


def test_plots_are_real_images_referenced_by_the_page(report):
    names = ("latency", "moved", "timeline", "records", "ownership")
    page = (report / "report.html").read_text(encoding="utf-8")
    for name in names:
        path = report / "plots" / f"{name}.png"
        width, height = png_size(path)
        assert width >= 500 and height >= 300, (name, width, height)
        assert f"src='plots/{name}.png'" in page
    # One timeline panel per protocol of the scenario (three protocols, four partitions each at most).
    assert png_size(report / "plots" / "timeline.png")[1] >= 700
    for table in (
        "summary",
        "rebalances",
        "churn_to_stable",
        "partitions_moved",
        "ownership_anomalies",
        "records",
    ):
        assert (report / "tables" / f"{table}.csv").is_file()
        assert (report / "tables" / f"{table}.parquet").stat().st_size > 0
        assert f"tables/{table}.csv" in page
    assert "Lost records or ownership overlaps found in: synthetic/legacy-faithful" in page


def test_summary_json_follows_its_schema(report):
    import jsonschema

    from migration.compare.report import SUMMARY_SCHEMA

    doc = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, SUMMARY_SCHEMA)
    eager = next(r for r in doc["summary"] if r["protocol"] == "legacy-fast")
    # 4 rebalances: the median is shown, the p95 and p99 are not (too few samples)
    assert (eager["rebalances"], eager["rebalance_p50_ms"], eager["rebalance_p95_ms"]) == (4, 105.0, None)
    assert doc["runs"] == 4 and any("no record lost" in t or "LOST" in t for t in doc["takeaway"])


def test_summary_numbers(report):
    with open(report / "tables" / "summary.csv", encoding="utf-8") as fh:
        summary = {r["protocol"]: r for r in csv.DictReader(fh)}
    eager, coop, lossy = summary["legacy-fast"], summary["classic-confluent"], summary["legacy-faithful"]
    assert (eager["runs"], coop["runs"], lossy["runs"]) == ("2", "1", "1")
    # Eager: 4 partitions x 200 ms without an owner per run (two runs); cooperative: only t-1, 200 ms.
    assert (eager["gaps"], eager["gap_ms_total"], coop["gaps"], coop["gap_ms_total"]) == (
        "8",
        "1600",
        "1",
        "200",
    )
    # Generation 2 moves only t-1 (A -> C) in both protocols.
    assert (eager["moved_per_rebalance_mean"], coop["moved_per_rebalance_mean"]) == ("1.0", "1.0")
    # Rebalance durations 10, 200 per run: sorted 10 10 200 200 -> p50 at 1.5 = 105.
    assert (eager["rebalances"], eager["rebalance_max_ms"], eager["rebalance_p50_ms"]) == (
        "4",
        "200.0",
        "105.0",
    )
    # Churn at 1000, last rebalance_end before the run's end at 1200.
    assert coop["churn_to_stable_p50_ms"] == "200.0"
    assert (eager["duplicates"], eager["lost"], coop["duplicates"], coop["lost"]) == ("4", "0", "0", "0")
    assert (lossy["lost"], lossy["rebalances"]) == ("1", "")
    # Commits inside the gen-2 window: eager 4, cooperative 1; two rebalances per run.
    assert (eager["commits_per_rebalance"], coop["commits_per_rebalance"]) == ("2.0", "0.5")
    # Three zk ops at 1002..1004, inside generation 2 of every run.
    assert (eager["zk_ops_per_rebalance"], coop["zk_ops_per_rebalance"]) == ("1.5", "1.5")


def test_cli_report_names_a_bad_trace_path(tmp_path, capsys):
    rc = main(["compare", "report", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 2
    assert f"{tmp_path / 'nope'}: no such file or directory" in capsys.readouterr().err


def test_hand_overs_per_membership_change_are_a_table_and_a_plot_per_protocol(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    assert "<h2>Hand-overs per membership change</h2>" in page and "src='plots/handovers.png'" in page
    width, height = png_size(report / "plots" / "handovers.png")
    assert width >= 500 and height >= 300
    rows = pq.read_table(report / "tables" / "handovers.parquet").to_pylist()
    assert rows and {"released_per_change", "released_kept_per_change", "unowned_s_per_change"} <= set(
        rows[0]
    )
    changes = pq.read_table(report / "tables" / "membership_changes.parquet").to_pylist()
    assert sum(r["changes"] for r in rows) == len(changes) > 0
