"""The divergence job: read two snapshots, run the pure transforms, write per-partition disagreements and
per-group summaries as Parquet plus a summary.md, and show Spark's progress on stderr while it runs.

Inputs and the output are paths or URIs (file://, hdfs://, s3a://...): the executors read and write them, so
the job runs unchanged on local[2], a standalone or YARN cluster, or a Spark Connect server (`sc://`)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from migration.divergence import transforms


class SparkProgress:
    """A background thread printing the active stages' task counts every `interval` seconds; bounded by
    the stop event, so it never outlives the job."""

    def __init__(self, spark: Any, out: TextIO = sys.stderr, interval: float = 0.5) -> None:
        from migration.spark import is_connect

        # A Spark Connect client has no SparkContext to ask: it shows the phase alone.
        self.tracker: Any = None if is_connect(spark) else spark.sparkContext.statusTracker()
        self.out = out
        self.interval = interval
        self.stop_event = threading.Event()
        self.label = "starting"
        self.thread = threading.Thread(target=self._loop, name="divergence-progress", daemon=True)
        self.started = time.monotonic()

    def __enter__(self) -> SparkProgress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)
        self.out.write(f"\r[{time.monotonic() - self.started:6.1f}s] done{' ' * 60}\n")
        self.out.flush()

    def phase(self, label: str) -> None:
        self.label = label

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            parts = []
            tracker = self.tracker
            for stage_id in sorted(tracker.getActiveStageIds()) if tracker is not None else []:
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks}")
            status = "; ".join(parts) or "preparing"
            self.out.write(f"\r[{time.monotonic() - self.started:6.1f}s] {self.label}: {status}{' ' * 20}")
            self.out.flush()


def run_divergence(
    zk_snapshot: str,
    broker_snapshot: str,
    out: str,
    *,
    master: str | None = None,
    max_lag: int = 0,
    spark: Any = None,
    progress_out: TextIO = sys.stderr,
) -> str:
    """Run the report; returns the summary text (also written to <out>/summary.md). `master` may be a
    Spark Connect URL (sc://host:port)."""
    from migration.spark import filesystem, job_uri, spark_session

    session = spark or spark_session(master, app_name="zkcoord-divergence")
    out_uri = job_uri(out)
    try:
        with SparkProgress(session, progress_out) as progress:
            progress.phase("reading snapshots")
            zk = session.read.parquet(job_uri(zk_snapshot))
            broker = session.read.parquet(job_uri(broker_snapshot))
            compared = transforms.compare(zk, broker).cache()
            progress.phase("per-partition disagreements")
            transforms.disagreements(compared, max_lag).orderBy(*transforms.KEYS).write.mode(
                "overwrite"
            ).parquet(f"{out_uri}/disagreements.parquet")
            progress.phase("per-group summary")
            groups = transforms.group_summary(compared, max_lag).cache()
            groups.orderBy("group").write.mode("overwrite").parquet(f"{out_uri}/groups.parquet")
            progress.phase("totals")
            totals = [row.asDict() for row in transforms.overall(compared).collect()]
            n_groups = groups.count()
            ready = groups.where("within_bound").count()
            worst = groups.orderBy(groups["max_lag"].desc(), "group").limit(10).collect()
            compared.unpersist()
            groups.unpersist()
    finally:
        if spark is None:
            session.stop()
    summary = format_summary(totals, n_groups, ready, worst, max_lag)
    filesys, inner = filesystem(out_uri)
    with filesys.open_output_stream(f"{inner}/summary.md") as fh:
        fh.write(summary.encode("utf-8"))
    return summary


def format_summary(
    totals: list[dict[str, Any]], n_groups: int, ready: int, worst: list[Any], max_lag: int
) -> str:
    partitions = sum(int(t["partitions"]) for t in totals)
    lines = [
        "# Offset divergence",
        "",
        f"{n_groups} group(s), {partitions} partition(s); {ready} group(s) within --max-lag {max_lag} "
        f"(ready for `migrate verify`), {n_groups - ready} not.",
        "",
        "| agreement | partitions | share | total lag |",
        "|---|---:|---:|---:|",
    ]
    for t in totals:
        share = 100.0 * int(t["partitions"]) / partitions if partitions else 0.0
        lines.append(f"| {t['agreement']} | {t['partitions']} | {share:.1f}% | {t['lag']} |")
    if worst:
        lines += [
            "",
            "Groups furthest apart:",
            "",
            "| group | partitions | max lag | missing (zk/broker) |",
            "|---|---:|---:|---|",
        ]
        for row in worst:
            lines.append(
                f"| {row['group']} | {row['partitions']} | {row['max_lag']} | "
                f"{row['missing_in_zookeeper']}/{row['missing_in_broker']} |"
            )
    return "\n".join(lines) + "\n"
