"""Live comparison run of the consumer rebalance protocol (KIP-848): `consumer-confluent` members (librdkafka,
`group.protocol=consumer`, the coordinator's `uniform` assignor) play a scenario with a join, a leave, a crash and a
partition increase against a real ZooKeeper and zkcoord node; the trace shows no lost record and no partition
owned by two members at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migration.compare.analysis import interval_overlaps
from migration.compare.runner import PlayResult, run_scenario
from migration.compare.scenario import parse_scenario
from migration.compare.trace import read_events, read_meta

pytestmark = pytest.mark.integration

SCENARIO = """
name: consumer-short
seed: 5
duration_s: 14
session_timeout_ms: 3000
topics:
  - name: orders
    partitions: 4
producer:
  rate_per_s: 100
  duration_s: 9
protocols:
  consumer-confluent:
    members: 2
    strategy: uniform
churn:  # the increase comes early: the producer uses a new partition only once its metadata (1 s) shows it
  - at_s: 2
    event: join
  - at_s: 3
    event: partition-increase
    topic: orders
    partitions: 6
  - at_s: 4
    event: leave
    member: 0
  - at_s: 6
    event: crash
    member: random
"""


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, PlayResult]:
    results: list[PlayResult] = []
    dirs = run_scenario(
        parse_scenario(SCENARIO, "test"), tmp_path_factory.mktemp("traces"), progress=False,
        on_result=results.append,
    )  # fmt: skip
    assert len(dirs) == len(results) == 1
    return dirs[0], results[0]


def test_the_play_completes_with_every_churn_event(played: tuple[Path, PlayResult]) -> None:
    d, result = played
    meta = read_meta(d)
    assert meta.protocol == "consumer-confluent" and meta.complete
    assert result.churn_applied == 4
    rows = read_events(d).to_pylist()
    churn = [json.loads(r["detail"])["event"] for r in rows if r["kind"] == "churn"]
    assert churn == ["join", "partition-increase", "leave", "crash"]
    members = read_meta(d).extra["summary"]["members"]  # type: ignore[index]
    assert len(members) == 3 and list(members.values()).count("leave") == 1
    assert list(members.values()).count("crash") == 1


def test_nothing_lost_and_no_partition_owned_twice(played: tuple[Path, PlayResult]) -> None:
    d, result = played
    rows = read_events(d).to_pylist()
    produced = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["kind"] == "produce"}
    consumed = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["kind"] == "consume"}
    assert len(produced) == 100 * 9 and result.lost == 0
    assert {p for _, p, _ in produced} == set(range(6))  # the new partitions got records too
    assert produced - consumed == set(), f"lost {len(produced - consumed)} records"
    assert any(r["kind"] == "own_start" for r in rows)
    assert interval_overlaps(rows) == []
