"""A cooperative protocol played for real beside its eager twin, in one comparison run on the test kit's ZooKeeper
and one real zkcoord node: at the same join, eager kafka-python members release every partition they hold
(and take most of them back), cooperative ones (KIP-429, CooperativeStickyAssignor) release only what moves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from migration.compare.analysis import interval_overlaps
from migration.compare.runner import PlayResult, run_scenario
from migration.compare.scenario import parse_scenario
from migration.compare.trace import read_events, read_meta

pytestmark = pytest.mark.integration

# Two members settle on 6 partitions before the third joins at 5 s (a kafka-python join takes 1-3 s here).
SCENARIO = """
name: cooperative-join
seed: 1
duration_s: 9
session_timeout_ms: 3000
topics: [{name: orders, partitions: 6}]
producer: {rate_per_s: 60, duration_s: 8}
protocols:
  classic-kafka-python: {members: 2, strategy: sticky}
  classic-kafka-python-cooperative: {members: 2, strategy: cooperative-sticky}
churn:
  - {at_s: 5, event: join}
"""


def released_after_join(run_dir: Path) -> tuple[int, int, int]:
    """(partitions owned just before the join, own_end rows from the join to the orderly stop, of which released
    although the same member owned them again before the stop)."""
    rows = sorted(read_events(run_dir).to_pylist(), key=lambda r: r["ts_ms"])
    (join,) = [r["ts_ms"] for r in rows if r["kind"] == "churn"]
    stop = read_meta(run_dir).stopping_ms
    assert stop is not None
    held: set[tuple[str, int]] = set()
    for r in rows:
        if r["ts_ms"] >= join:
            break
        if r["kind"] == "own_start":
            held.add((r["topic"], r["partition"]))
        elif r["kind"] == "own_end":
            held.discard((r["topic"], r["partition"]))
    window = [r for r in rows if join <= r["ts_ms"] < stop]
    ends = [r for r in window if r["kind"] == "own_end"]
    kept = sum(
        1
        for e in ends
        if any(s["kind"] == "own_start" and (s["member"], s["topic"], s["partition"]) ==
               (e["member"], e["topic"], e["partition"]) and s["ts_ms"] >= e["ts_ms"] for s in window)
    )  # fmt: skip
    return len(held), len(ends), kept


def test_a_cooperative_join_releases_only_what_moves(zk_connect: str, zk: Any, tmp_path: Path) -> None:
    from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess

    results: list[PlayResult] = []
    with NodeProcess(tmp_path / "node", ("--zk", zk_connect, "--node-id", "1", *FAST_GROUP_FLAGS)) as node:
        dirs = run_scenario(
            parse_scenario(SCENARIO, "test"),
            tmp_path / "traces",
            zk_connect=zk_connect,
            bootstrap=node.bootstrap,
            progress=False,
            on_result=results.append,
        )
    assert [r.protocol for r in results] == ["classic-kafka-python", "classic-kafka-python-cooperative"]
    assert all(r.lost == 0 and r.churn_applied == 1 for r in results), results
    eager, coop = (released_after_join(d) for d in dirs)
    assert eager[0] == coop[0] == 6, (eager, coop)  # the group was settled when the third member joined
    # eager: both members revoke all 6 and take most back; cooperative: only the 2 moving to the newcomer
    assert coop[1] < eager[1], (eager, coop)
    assert eager[2] > 0 and coop[2] == 0, (eager, coop)
    for d in dirs:
        rows = sorted(read_events(d).to_pylist(), key=lambda r: r["ts_ms"])
        assert interval_overlaps(rows) == [], d
        joined = [json.loads(r["detail"]) for r in rows if r["kind"] == "churn"]
        assert joined[0]["applied"] is True
