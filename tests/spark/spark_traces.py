"""A small synthetic comparison trace (one rebalance, eager or cooperative), shared by the report tests."""

from __future__ import annotations

from pathlib import Path

from migration.compare.trace import EventKind, RunMeta, TraceWriter

PARTITIONS = 4


def write_run(root: Path, run_id: str, protocol: str, strategy: str, *, eager: bool) -> Path:
    """Members A, B own t-0,1 / t-2,3 from 0 ms; C joins at 1000; the rebalance runs 1000..1200 and ends with
    A t-0, B t-2,3, C t-1. Eager: every partition is released at 1000 and taken at 1200 (four 200 ms gaps), and
    t-0 offsets 0..1 are consumed twice. Cooperative: only t-1 moves (one 200 ms gap). The run ends at 3000."""
    run_dir = root / run_id
    w = TraceWriter(run_dir, RunMeta(run_id, "synthetic", protocol, strategy, started_ms=0), flush_rows=7)
    E = EventKind
    before = {"A": [("t", 0), ("t", 1)], "B": [("t", 2), ("t", 3)]}
    after = {"A": [("t", 0)], "B": [("t", 2), ("t", 3)], "C": [("t", 1)]}
    for m, tps in before.items():
        w.emit(0, E.REBALANCE_START, member=m, generation=1)
        w.assignment(0, m, 1, tps)
        for t, p in tps:
            w.emit(10, E.OWN_START, member=m, topic=t, partition=p)
        w.emit(10, E.REBALANCE_END, member=m, generation=1)
    w.emit(1000, E.CHURN, member="C", detail={"event": "join"})
    for m in ("A", "B", "C"):
        w.emit(1000, E.REBALANCE_START, member=m, generation=2)
        w.assignment(1150, m, 2, after[m])
    for m, tps in before.items():
        for t, p in tps:
            if eager or (t, p) not in after[m]:
                w.emit(1000, E.OWN_END, member=m, topic=t, partition=p)
                w.emit(1001, E.COMMIT, member=m, topic=t, partition=p, offset=5)
    for m, tps in after.items():
        for t, p in tps:
            if eager or (t, p) not in before.get(m, []):
                w.emit(1200, E.OWN_START, member=m, topic=t, partition=p)
        w.emit(1200, E.REBALANCE_END, member=m, generation=2)
    for p in range(PARTITIONS):
        for o in range(10):
            w.emit(20 + o, E.PRODUCE, topic="t", partition=p, offset=o)
            w.emit(30 + o, E.CONSUME, member="A", topic="t", partition=p, offset=o)
    if eager:
        for o in (0, 1):
            w.emit(1300, E.CONSUME, member="A", topic="t", partition=0, offset=o)
    for i in range(3):
        w.emit(1002 + i, E.ZK_OP, member="A", detail={"op": "getChildren", "path": "/consumers/g/ids"})
    return w.close(ended_ms=3000)
