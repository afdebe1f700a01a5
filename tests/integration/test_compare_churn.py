"""The churn paths that need real infrastructure faults: a ZooKeeper session expiry, the ZooKeeper ensemble leader
killed, the coordinator node killed, and a partition increase — played by legacy-fast and kafka-python members,
side by side, each on its own 3-node ensemble. No record is lost, every churn row says whether it was applied,
and the group recovers: members rebalance after each fault and at the end every partition has exactly one owner;
two owners at once only where the protocol allows it (a classic member stalled past its session timeout, the
zombie consumer)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from plays import play_side_by_side

from migration.compare.analysis import interval_overlaps
from migration.compare.runner import PlayResult
from migration.compare.scenario import parse_scenario
from migration.compare.trace import read_events, read_meta

pytestmark = pytest.mark.integration

SCENARIO = """
name: churn-paths
seed: 5
duration_s: 30
session_timeout_ms: 3000
topics:
  - name: orders
    partitions: 4
producer:
  rate_per_s: 100
  duration_s: 27
protocols:
  legacy-fast:
    members: 2
    strategy: range
  classic-kafka-python:
    members: 2
    strategy: range
churn:
  - at_s: 1.5
    event: session-expiry
    member: 0
  - at_s: 7.5
    event: partition-increase
    topic: orders
    partitions: 6
  - at_s: 10
    event: coordinator-kill
  - at_s: 13
    event: zk-leader-kill
"""
# The coordinator kill keeps the node down for its ZooKeeper session timeout (6 s) plus a restart: ~10-12 s on a
# loaded 2-core machine; the producer runs long enough to show consumption after it. The partition increase comes
# before the kill: a partition increase after a node restart was not always served by the node (a cluster-side
# issue seen in the mixed scenario, reported, not what this test is about).


@pytest.fixture(scope="module")
def played(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, PlayResult, list[dict[str, Any]]]]:
    # Side by side (each protocol on its own ensemble and node): the two 30 s plays take the time of one.
    dirs, results = play_side_by_side(parse_scenario(SCENARIO, "test"), tmp_path_factory.mktemp("churn"))
    out = {}
    for d, r in zip(dirs, results, strict=True):
        rows = sorted(read_events(d).to_pylist(), key=lambda r: r["ts_ms"])
        out[r.protocol] = (d, r, rows)
    return out


def _churn(rows: list[dict[str, Any]]) -> list[tuple[str, bool, int]]:
    return [
        (json.loads(r["detail"])["event"], json.loads(r["detail"])["applied"], r["ts_ms"])
        for r in rows
        if r["kind"] == "churn"
    ]


def test_every_churn_row_says_whether_it_was_applied(played) -> None:
    legacy = [(e, a) for e, a, _ in _churn(played["legacy-fast"][2])]
    classic = [(e, a) for e, a, _ in _churn(played["classic-kafka-python"][2])]
    assert legacy == [
        ("session-expiry", True), ("partition-increase", True), ("coordinator-kill", False),
        ("zk-leader-kill", True),
    ]  # fmt: skip
    assert classic == [
        ("session-expiry", True), ("partition-increase", True), ("coordinator-kill", True),
        ("zk-leader-kill", True),
    ]  # fmt: skip
    reasons = [json.loads(r["detail"]) for r in played["legacy-fast"][2] if r["kind"] == "churn"]
    assert reasons[2]["reason"] == "a legacy group has no coordinator"
    restarts = read_meta(played["classic-kafka-python"][0]).extra["summary"]["coordinator_restart_ms"]  # type: ignore[index]
    assert len(restarts) == 1 and 0 < restarts[0] < 30_000


def test_no_record_lost(played) -> None:
    for protocol, (_, result, rows) in played.items():
        produced = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["kind"] == "produce"}
        consumed = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["kind"] == "consume"}
        assert len(produced) == 100 * 27, protocol
        assert produced - consumed == set(), f"{protocol}: lost {len(produced - consumed)}"
        assert result.lost == 0 and result.owner_overlaps == 0, protocol


def test_new_partitions_are_produced_to_and_owned(played) -> None:
    for protocol, (_, _, rows) in played.items():
        increase_at = next(ts for e, _, ts in _churn(rows) if e == "partition-increase")
        produced = Counter(r["partition"] for r in rows if r["kind"] == "produce")
        assert produced[4] > 0 and produced[5] > 0, (protocol, produced)
        owned_late = {r["partition"] for r in rows if r["kind"] == "own_start" and r["ts_ms"] >= increase_at}
        assert {4, 5} <= owned_late, (protocol, owned_late)


def test_group_recovers_after_every_fault(played) -> None:
    for protocol, (d, _, rows) in played.items():
        meta = read_meta(d)
        assert meta.stopping_ms is not None
        churn = _churn(rows)
        # A rebalance completes after the session expiry (legacy: the member re-registers; classic: the stalled
        # member is dropped and rejoins) and after the partition increase.
        for event in ("session-expiry", "partition-increase"):
            at = next(ts for e, _, ts in churn if e == event)
            assert any(r["kind"] == "rebalance_end" and r["ts_ms"] > at for r in rows), (protocol, event)
        # Records keep flowing after the last fault.
        last = max(ts for _, _, ts in churn)
        assert sum(1 for r in rows if r["kind"] == "consume" and r["ts_ms"] > last + 1000) > 50, protocol
        # At the orderly stop every partition has exactly one owner, and no two members ever overlapped.
        owners: dict[int, set[str]] = defaultdict(set)
        for r in rows:
            if r["ts_ms"] >= meta.stopping_ms:
                break
            if r["kind"] == "own_start":
                owners[r["partition"]].add(r["member"])
            elif r["kind"] == "own_end":
                owners[r["partition"]].discard(r["member"])
        assert {p: len(m) for p, m in owners.items()} == dict.fromkeys(range(6), 1), (protocol, dict(owners))


def test_overlaps_only_where_the_protocol_allows_them(played) -> None:
    # A legacy member fences the moment its session is lost: never two owners.
    assert interval_overlaps(played["legacy-fast"][2]) == []
    # A classic member stalled past its session timeout is evicted while frozen; it still believes it owns its
    # partitions until, awake again, it learns of the eviction (kafka-python may even hand out records it had
    # buffered first: the zombie consumer). Any overlap must have the stalled member as the old holder and end
    # by its first revoke after the stall.
    rows = played["classic-kafka-python"][2]
    stalled = next(
        r for r in rows if r["kind"] == "churn" and json.loads(r["detail"])["event"] == "session-expiry"
    )
    resumed_ms = stalled["ts_ms"] + int(json.loads(stalled["detail"])["stall_s"] * 1000)
    revoked = [r["ts_ms"] for r in rows if r["kind"] == "own_end" and r["member"] == stalled["member"]]
    first_revoke = min(ts for ts in revoked if ts >= resumed_ms - 100)
    for _topic, _p, holder, _newcomer, ts in interval_overlaps(rows):
        assert holder == stalled["member"], (holder, stalled["member"])
        assert stalled["ts_ms"] <= ts <= first_revoke


def test_legacy_members_trace_their_zookeeper_requests_and_commits(played) -> None:
    rows = played["legacy-fast"][2]
    ops = [json.loads(r["detail"]) for r in rows if r["kind"] == "zk_op"]
    assert ops and all(set(o) >= {"op", "path"} for o in ops)
    assert any(o["path"] and "/consumers/churn-paths-legacy-fast-r0/owners" in o["path"] for o in ops)
    commits = [r for r in rows if r["kind"] == "commit"]
    assert commits and all(r["offset"] >= 0 and r["topic"] == "orders" for r in commits)
    classic = played["classic-kafka-python"][2]
    assert any(r["kind"] == "commit" for r in classic)
    assert not any(r["kind"] == "zk_op" for r in classic)
