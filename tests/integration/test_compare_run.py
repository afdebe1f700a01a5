"""Live comparison run: a short scenario with join, leave and crash, played by legacy-fast and kafka-python
members against a real ZooKeeper and zkcoord node; the traces show no lost record and no ownership overlap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from plays import play_side_by_side

from migration.compare.analysis import in_trace_order, interval_overlaps, number_rounds, owner_overlaps
from migration.compare.runner import OWNERS_FILE, PlayResult
from migration.compare.scenario import parse_scenario
from migration.compare.trace import read_events, read_meta

pytestmark = pytest.mark.integration

SCENARIO = """
name: live-short
seed: 3
duration_s: 12
session_timeout_ms: 3000
topics:
  - name: orders
    partitions: 4
  - name: audit
    partitions: 2
producer:
  rate_per_s: 120
  duration_s: 8
protocols:
  legacy-fast:
    members: 2
    strategy: range
  classic-kafka-python:
    members: 2
    strategy: roundrobin
churn:
  - at_s: 2
    event: join
  - at_s: 4
    event: leave
    member: 0
  - at_s: 6
    event: crash
    member: random
"""


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[PlayResult]]:
    # Side by side (each protocol on its own ZooKeeper and node): the two 12 s plays take the time of one.
    return play_side_by_side(parse_scenario(SCENARIO, "test"), tmp_path_factory.mktemp("traces"))


def test_one_complete_run_per_protocol(played: tuple[list[Path], list[PlayResult]]) -> None:
    dirs, results = played
    metas = [read_meta(d) for d in dirs]
    assert [m.protocol for m in metas] == ["legacy-fast", "classic-kafka-python"]
    assert all(m.complete and m.ended_ms is not None and m.ended_ms > m.started_ms for m in metas)
    assert [r.churn_applied for r in results] == [3, 3]


def test_no_record_lost_by_any_protocol(played: tuple[list[Path], list[PlayResult]]) -> None:
    dirs, _ = played
    for d in dirs:
        rows = read_events(d).to_pylist()
        produced = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["kind"] == "produce"}
        consumed = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["kind"] == "consume"}
        assert len(produced) == 120 * 8, d
        assert {t for t, _, _ in produced} == {"orders", "audit"}
        assert produced - consumed == set(), f"{d}: lost {len(produced - consumed)} records"


def test_churn_recorded_and_members_ended_as_scheduled(played: tuple[list[Path], list[PlayResult]]) -> None:
    dirs, _ = played
    for d in dirs:
        rows = read_events(d).to_pylist()
        churn = [json.loads(r["detail"])["event"] for r in rows if r["kind"] == "churn"]
        assert churn == ["join", "leave", "crash"]
        members = read_meta(d).extra["summary"]["members"]  # type: ignore[index]
        assert sorted(members.values(), key=str).count("crash") == 1
        assert list(members.values()).count("leave") == 1
        assert len(members) == 3  # two initial members + one join


def test_no_ownership_overlap(played: tuple[list[Path], list[PlayResult]]) -> None:
    dirs, _ = played
    legacy = dirs[0]
    samples = pq.read_table(legacy / OWNERS_FILE).to_pylist()
    assert len(samples) > 20  # sampled through the whole play
    assert {s["topic"] for s in samples} == {"orders", "audit"}
    tuples = [(s["ts_ms"], s["topic"], s["partition"], s["owner"]) for s in samples]
    assert owner_overlaps(tuples) == 0
    for d in dirs:
        rows = read_events(d).to_pylist()
        assert any(r["kind"] == "own_start" for r in rows)
        assert interval_overlaps(rows) == [], d


def test_every_member_rebalance_is_numbered_into_a_group_round(
    played: tuple[list[Path], list[PlayResult]],
) -> None:
    for d in played[0]:
        rows = read_events(d).to_pylist()
        ends = [r for r in rows if r["kind"] == "rebalance_end"]
        assert ends and all(r["generation"] is not None and r["generation"] >= 1 for r in ends)


def test_overlap_checks_detect_what_they_claim() -> None:
    assert owner_overlaps([(1, "t", 0, "a-0"), (1, "t", 0, "b-0"), (2, "t", 0, "a-0")]) == 1
    rows = [
        {"ts_ms": 1, "kind": "own_start", "member": "a", "topic": "t", "partition": 0},
        {"ts_ms": 2, "kind": "own_start", "member": "b", "topic": "t", "partition": 0},
        {"ts_ms": 3, "kind": "own_end", "member": "a", "topic": "t", "partition": 0},
        {"ts_ms": 4, "kind": "own_start", "member": "a", "topic": "t", "partition": 1},
    ]
    assert interval_overlaps(rows) == [("t", 0, "a", "b", 2)]


def test_rounds_group_concurrent_member_rebalances() -> None:
    def row(ts: int, kind: str, member: str, gen: int) -> dict[str, object]:
        return {"ts_ms": ts, "kind": kind, "member": member, "generation": gen, "detail": None}

    rows = [
        row(1, "rebalance_start", "a", 1),
        row(2, "rebalance_start", "b", 4),
        row(3, "rebalance_end", "a", 1),
        row(4, "rebalance_end", "b", 4),
        row(9, "rebalance_start", "a", 2),
        row(10, "rebalance_end", "a", 2),
    ]
    out = number_rounds(rows)
    assert [r["generation"] for r in out] == [1, 1, 1, 1, 2, 2]
    assert out[1]["detail"] == {"member_generation": 4}


def test_a_rebalance_that_starts_and_ends_in_one_ms_stays_in_its_round() -> None:
    def row(ts: int, kind: str, member: str | None, gen: int | None) -> dict[str, object]:
        return {"ts_ms": ts, "kind": kind, "member": member, "generation": gen, "detail": None}

    # as written: b's start and end share ms 5, and the runner's own row sits at the same ms
    rows = [row(5, "rebalance_start", "b", 1), row(5, "rebalance_end", "b", 1), row(5, "produce", None, None),
            row(3, "rebalance_start", "a", 1), row(7, "rebalance_end", "a", 1)]  # fmt: skip
    ordered = in_trace_order(rows)
    assert [(r["ts_ms"], r["member"], r["kind"]) for r in ordered] == [
        (3, "a", "rebalance_start"), (5, None, "produce"), (5, "b", "rebalance_start"),
        (5, "b", "rebalance_end"), (7, "a", "rebalance_end"),
    ]  # fmt: skip
    out = number_rounds(ordered)
    assert [r["generation"] for r in out if r["member"]] == [1, 1, 1, 1]


GIVEN_NODE_SCENARIO = """
name: given-node
duration_s: 4
session_timeout_ms: 3000
topics: [{name: events, partitions: 3}]
producer: {rate_per_s: 50, duration_s: 3}
protocols:
  legacy-fast: {members: 1, strategy: range}
  classic-kafka-python: {members: 1, strategy: range}
"""


def test_plays_on_a_given_zookeeper_and_node(zk_connect: str, zk: Any, tmp_path: Path) -> None:
    """--zk/--bootstrap: legacy members find the node's topics in the given ZooKeeper; plays share nothing there,
    each gets its own group and its own topic (a second run of the same scenario too), and the traces keep the
    scenario's topic name."""
    from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess

    with NodeProcess(tmp_path / "node", ("--zk", zk_connect, "--node-id", "1", *FAST_GROUP_FLAGS)) as node:
        # Each protocol's two runs in turn, the two protocols side by side: four 4 s plays in the time of two.
        dirs, results = play_side_by_side(
            parse_scenario(GIVEN_NODE_SCENARIO, "test"),
            tmp_path / "traces",
            runs=2,
            zk_connect=zk_connect,
            bootstrap=node.bootstrap,
        )
    assert [r.protocol for r in results] == ["legacy-fast", "classic-kafka-python"] * 2
    assert all(r.produced == 150 and r.lost == 0 for r in results), results
    groups = [read_meta(d).extra["group"] for d in dirs]  # type: ignore[index]
    assert len(set(groups)) == 4
    # Legacy groups live in the given ZooKeeper itself (no per-play chroot), next to the node's /brokers.
    assert set(zk.get_children("/consumers")) == {groups[0], groups[2]}
    run_ids = [read_meta(d).run_id for d in dirs]
    assert {t for t in zk.get_children("/brokers/topics") if t.startswith("events")} == {
        f"events-{run_id}" for run_id in run_ids
    }
    for d in dirs:
        assert set(read_events(d).column("topic").to_pylist()) - {None} == {"events"}
