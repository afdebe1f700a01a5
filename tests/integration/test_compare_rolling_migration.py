"""The built-in rolling-migration played for real: four ZooKeeper members replaced one at a time by kafka-python
and confluent-kafka members and back, in one group on a node the runner starts with --bridge-zk-groups. Required:
no produced record lost, no ZooKeeper owner sample and no pair of member-reported ownerships with two owners of
one partition, and every replace applied.

The play checked is the one `zkcoord demo` makes (the session's `demo_run`): the demo plays exactly
`run_scenario(builtin_scenario("rolling-migration"), OUT)` after its three protocol plays, and the runner's
counts (PlayResult) are the summary it writes into the run's run.json."""

from __future__ import annotations

import pytest
from demo_run import DemoRun

from migration.compare.analysis import in_trace_order, interval_overlaps
from migration.compare.runner import MIXED
from migration.compare.trace import find_runs, read_events, read_meta

pytestmark = pytest.mark.integration


def test_rolling_migration_keeps_one_owner_per_partition_and_loses_nothing(demo_run: DemoRun) -> None:
    (run_dir,) = find_runs([demo_run.out / "traces" / "rolling-migration"])
    meta = read_meta(run_dir)
    assert meta.complete, demo_run.result.stderr[-3000:]
    result = (meta.extra or {})["summary"]
    assert meta.protocol == MIXED and run_dir.parent.name == MIXED
    assert result["churn_applied"] == 8
    assert result["produced"] > 0 and result["lost"] == 0, result
    assert result["owner_samples"] > 0 and result["owner_overlaps"] == 0, result
    rows = read_events(run_dir).to_pylist()
    own = [r for r in in_trace_order(rows) if r["kind"] in ("own_start", "own_end")]
    assert interval_overlaps(own) == []
    protocols = set((meta.extra or {})["member_protocols"].values())
    assert protocols == {"legacy-fast", "legacy-faithful", "classic-kafka-python", "classic-confluent"}
