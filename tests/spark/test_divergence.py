"""Divergence transforms on tiny hand-written frames, checked against the pure bridge policy; the job end
to end on a small synthetic snapshot, with counts checked against a plain-Python computation."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from migration.divergence import transforms
from migration.divergence.job import run_divergence
from migration.divergence.synth import write_synthetic
from zkcoord.bridge import divergence_report

pytestmark = pytest.mark.spark
SCHEMA = "group string, topic string, partition int, offset long"

ZK = [
    ("g", "t", 0, 10),
    ("g", "t", 1, 20),
    ("g", "t", 2, 30),
    ("g", "t", 3, 5),
    ("h", "t", 0, 7),
    ("h", "t", 1, -1),
]
BR = [("g", "t", 0, 10), ("g", "t", 1, 25), ("g", "t", 2, 28), ("g", "t", 4, 1), ("h", "t", 0, 7)]


def frames(spark: Any) -> tuple[Any, Any]:
    return spark.createDataFrame(ZK, SCHEMA), spark.createDataFrame(BR, SCHEMA)


def test_compare_matches_the_pure_policy(spark: Any) -> None:
    rows = transforms.compare(*frames(spark)).orderBy(*transforms.KEYS).collect()
    got = [(r.group, r.partition, r.zk_offset, r.broker_offset, r.agreement, r.lag) for r in rows]
    assert got == [
        ("g", 0, 10, 10, "agree", 0),
        ("g", 1, 20, 25, "broker-ahead", 5),
        ("g", 2, 30, 28, "zookeeper-ahead", 2),
        ("g", 3, 5, None, "missing-in-broker", 0),
        ("g", 4, None, 1, "missing-in-zookeeper", 0),
        ("h", 0, 7, 7, "agree", 0),
    ]
    for group in ("g", "h"):
        pure = divergence_report(
            {(t, p): o for g, t, p, o in ZK if g == group}, {(t, p): o for g, t, p, o in BR if g == group}
        )
        spark_rows = [r for r in rows if r.group == group]
        assert [(r.tp.partition, r.agreement.value, r.lag) for r in pure] == [
            (r.partition, r.agreement, r.lag) for r in spark_rows
        ]


def test_disagreements_and_group_summary(spark: Any) -> None:
    compared = transforms.compare(*frames(spark))
    bad = transforms.disagreements(compared, max_lag=2).orderBy(*transforms.KEYS).collect()
    assert [(r.group, r.partition) for r in bad] == [("g", 1), ("g", 3), ("g", 4)]
    summary = {r.group: r.asDict() for r in transforms.group_summary(compared, max_lag=5).collect()}
    assert summary["g"] == {
        "group": "g",
        "partitions": 5,
        "agree": 1,
        "zookeeper_ahead": 1,
        "broker_ahead": 1,
        "missing_in_zookeeper": 1,
        "missing_in_broker": 1,
        "max_lag": 5,
        "total_lag": 7,
        "regress_if_broker_only": 2,
        "regress_if_zookeeper_only": 5,
        "within_bound": False,
    }
    assert summary["h"]["within_bound"] is True and summary["h"]["partitions"] == 1
    with pytest.raises(ValueError, match="max_lag"):
        transforms.disagreements(compared, -1)


def test_overall_lists_every_agreement_in_order(spark: Any) -> None:
    empty_br = spark.createDataFrame([], SCHEMA)
    rows = transforms.overall(transforms.compare(spark.createDataFrame(ZK[:1], SCHEMA), empty_br)).collect()
    assert [(r.agreement, r.partitions) for r in rows] == [
        ("agree", 0),
        ("zookeeper-ahead", 0),
        ("broker-ahead", 0),
        ("missing-in-zookeeper", 0),
        ("missing-in-broker", 1),
    ]


def test_job_on_a_synthetic_snapshot_matches_plain_python(spark: Any, tmp_path: Path) -> None:
    counts = write_synthetic(tmp_path / "snap", groups=40, partitions=25, seed=7)
    assert counts["zookeeper"] < 1000 and counts["broker"] < 1000
    progress = io.StringIO()
    summary = run_divergence(
        str(tmp_path / "snap" / "zookeeper.parquet"),
        str(tmp_path / "snap" / "broker.parquet"),
        str(tmp_path / "out"),
        spark=spark,
        max_lag=0,
        progress_out=progress,
    )
    assert "done" in progress.getvalue()
    zk = pq.read_table(tmp_path / "snap" / "zookeeper.parquet").to_pylist()
    br = pq.read_table(tmp_path / "snap" / "broker.parquet").to_pylist()
    pure = divergence_report(
        {(f"{r['group']}/{r['topic']}", r["partition"]): r["offset"] for r in zk},
        {(f"{r['group']}/{r['topic']}", r["partition"]): r["offset"] for r in br},
    )
    expected: dict[str, int] = {}
    for row in pure:
        expected[row.agreement.value] = expected.get(row.agreement.value, 0) + 1
    for agreement, n in expected.items():
        assert f"| {agreement} | {n} |" in summary
    assert sum(expected.values()) == 40 * 25
    bad = pq.read_table(tmp_path / "out" / "disagreements.parquet").num_rows
    assert bad == 40 * 25 - expected.get("agree", 0)
    groups = pq.read_table(tmp_path / "out" / "groups.parquet").to_pylist()
    assert len(groups) == 40 and [g["group"] for g in groups] == sorted(g["group"] for g in groups)
    assert (tmp_path / "out" / "summary.md").read_text() == summary
