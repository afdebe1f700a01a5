"""The built-in rolling-migration played for real: four ZooKeeper members replaced one at a time by kafka-python
and confluent-kafka members and back, in one group on a node the runner starts with --bridge-zk-groups. Required:
no produced record lost, no ZooKeeper owner sample and no pair of member-reported ownerships with two owners of
one partition, and every replace applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from migration.compare.analysis import in_trace_order, interval_overlaps
from migration.compare.runner import MIXED, PlayResult, run_scenario
from migration.compare.scenario import builtin_scenario
from migration.compare.trace import read_events, read_meta

pytestmark = pytest.mark.integration


def test_rolling_migration_keeps_one_owner_per_partition_and_loses_nothing(tmp_path: Path) -> None:
    results: list[PlayResult] = []
    (run_dir,) = run_scenario(
        builtin_scenario("rolling-migration"), tmp_path, progress=False, on_result=results.append
    )
    (result,) = results
    assert result.protocol == MIXED and run_dir.parent.name == MIXED
    assert result.churn_applied == 8
    assert result.produced > 0 and result.lost == 0, result
    assert result.owner_samples > 0 and result.owner_overlaps == 0, result
    rows = read_events(run_dir).to_pylist()
    own = [r for r in in_trace_order(rows) if r["kind"] in ("own_start", "own_end")]
    assert interval_overlaps(own) == []
    meta = read_meta(run_dir)
    protocols = set((meta.extra or {})["member_protocols"].values())
    assert protocols == {"legacy-fast", "legacy-faithful", "classic-kafka-python", "classic-confluent"}
