"""Coordinator load after kill -9: a standalone `zkcoord serve` holding 10,000 groups x 100 partitions (1M live
offsets, committed over the wire), killed -9 and restarted on its data dir; time from the kill to the first
OffsetFetch answer with offsets, and the node's RSS before the kill and after the load.

Commits are simple-consumer OffsetCommits (generation -1) sent by the raw load generator, 32 in flight. RSS is
read from /proc/PID/statm. Then the same live set in cluster mode (`cluster_run`: a coordinator move between two
`serve --zk` nodes). Ends with one RESULT line (targets met or not, the load average).
Run: python -m benchmarks.bench_load [--groups 10000] [--partitions 100] [--runs 3] [--cluster-runs 1]
(or `bash scripts/bench.sh bench_load`, which waits for a quiet machine first)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import loadgen as lg
from benchmarks.report import write_section
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.server import kafka_protocol as kp
from zkcoord.testing import wait_for
from zkcoord.zk import registry
from zkcoord.zk.session import connect

TOPIC = "bench-load"


def rss_mib(node: NodeProcess) -> float:
    assert node.proc is not None
    pages = int(Path(f"/proc/{node.proc.pid}/statm").read_text().split()[1])
    return pages * 4096 / 2**20


def cpu_s(node: NodeProcess) -> float:
    """User + system CPU seconds the node's process has used (less sensitive than wall time to a busy machine)."""
    assert node.proc is not None
    fields = Path(f"/proc/{node.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def records_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / "group-records").iterdir() if p.is_file())


async def commit_all(port: int, groups: int, partitions: int) -> None:
    conn = await lg.connect("127.0.0.1", port)
    try:
        await lg.create_topic(conn, TOPIC, partitions)  # a node takes commits only for partitions it has
        frames = [
            lg.commit_frame(
                lg.Member(f"group-{g:05d}", conn), TOPIC, [(p, 1000 + p) for p in range(partitions)]
            )
            for g in range(groups)
        ]
        result = await lg.stream(conn, frames, lg.commit_check(), 32, groups, time.perf_counter() + 600)
        if result.errors:
            raise lg.LoadError(result.first_error)
    finally:
        conn.close()


def fetch_frame(group: str, partitions: int) -> bytes:
    OF: Any = kp._CLASSES[kp.OFFSET_FETCH][0]
    return lg.frame(
        kp.OFFSET_FETCH,
        1,
        group_id=group,
        topics=[OF.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(partitions)))],
    )


async def first_answer(port: int, group: str, partitions: int, deadline: float) -> list[int]:
    """OffsetFetch until the answer carries offsets (not COORDINATOR_LOAD_IN_PROGRESS); bounded by `deadline`."""
    conn = await lg.connect("127.0.0.1", port)
    try:
        while time.monotonic() < deadline:
            body = await conn.request(fetch_frame(group, partitions))
            resp = lg.decode(kp.OFFSET_FETCH, 1, body)
            parts = resp.topics[0].partitions if resp.topics else []
            if parts and all(p.error_code == 0 for p in parts):
                return [p.committed_offset for p in parts]
        raise lg.LoadError(f"no answer with offsets for {group} before the deadline")
    finally:
        conn.close()


def one_run(groups: int, partitions: int, flags: tuple[str, ...] = ()) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        data = Path(tmp) / "data"
        node = NodeProcess(data, (*FAST_GROUP_FLAGS, *flags))
        node.start()
        try:
            started = time.perf_counter()
            asyncio.run(commit_all(node.port, groups, partitions))
            committing = time.perf_counter() - started
            before = rss_mib(node)
            size = records_bytes(data)
            killed = time.perf_counter()
            node.kill9()
            node.start(timeout=300)
            listening = time.perf_counter() - killed
            last = f"group-{groups - 1:05d}"
            got = asyncio.run(first_answer(node.port, last, partitions, time.monotonic() + 300))
            answered = time.perf_counter() - killed
            cpu = cpu_s(node)
            if got != [1000 + p for p in range(partitions)]:
                raise lg.LoadError(f"{last}: offsets {got[:5]}... after the restart")
            after = rss_mib(node)
        finally:
            node.stop()
            node.kill9()
    return {
        "commit_s": committing,
        "records_mb": size / 1e6,
        "listening_s": listening,
        "answer_s": answered,
        "cpu_s": cpu,
        "rss_before": before,
        "rss_after": after,
    }


def _leader(zk: Any) -> int:
    state = registry.read_partition_state(zk, OFFSETS_TOPIC, 0)
    return state.leader if state is not None else -1


def cluster_run(groups: int, partitions: int) -> dict[str, float]:
    """The same live set in cluster mode: two `serve --zk` nodes, one offsets partition (so one node coordinates
    every group and holds all 1M offsets, in ZooKeeper); its leader is killed -9 and the other node takes the
    partition over once ZooKeeper expires the dead node's session, loads it from ZooKeeper and answers."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-load-cluster-") as tmp,
        ZooKeeper.start(1, base_dir=Path(tmp) / "zk", heap="1g") as zks,
    ):
        connect_string = zks.hosts + "/bench"
        admin = connect(zks.hosts, timeout=15)
        admin.ensure_path("/bench")
        admin.stop()
        zk = connect(connect_string, timeout=15)
        flags = (*FAST_GROUP_FLAGS, "--zk", connect_string, "--offsets.topic.num.partitions=1",
                 "--zookeeper.session.timeout.ms=6000")  # fmt: skip
        nodes = {n: NodeProcess(Path(tmp) / f"node{n}", (*flags, "--node-id", str(n))) for n in (1, 2)}
        try:
            for node in nodes.values():
                node.start()
            wait_for(lambda: _leader(zk) in nodes, 60, "offsets partition 0 led")
            leader = _leader(zk)
            other = nodes[3 - leader]
            last = f"group-{groups - 1:05d}"
            # the leader has loaded the (empty) partition once it answers an OffsetFetch without an error
            asyncio.run(first_answer(nodes[leader].port, last, partitions, time.monotonic() + 60))
            started = time.perf_counter()
            asyncio.run(commit_all(nodes[leader].port, groups, partitions))
            committing = time.perf_counter() - started
            before = rss_mib(other)
            cpu_before = cpu_s(other)
            killed = time.perf_counter()
            nodes[leader].kill9()
            wait_for(lambda: _leader(zk) == 3 - leader, 120, "offsets partition 0 moved")
            moved = time.perf_counter() - killed
            got = asyncio.run(first_answer(other.port, last, partitions, time.monotonic() + 300))
            answered = time.perf_counter() - killed
            cpu = cpu_s(other) - cpu_before
            if got != [1000 + p for p in range(partitions)]:
                raise lg.LoadError(f"{last}: offsets {got[:5]}... after the move")
            after = rss_mib(other)
        finally:
            for node in nodes.values():
                node.kill9()
            zk.stop()
            zk.close()
    return {
        "commit_s": committing,
        "moved_s": moved,
        "answer_s": answered,
        "load_s": answered - moved,
        "cpu_s": cpu,
        "rss_before": before,
        "rss_after": after,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--cluster-runs", type=int, default=1, help="runs of the same load in cluster mode (0: none)"
    )
    parser.add_argument("--no-report", action="store_true", help="print, do not write docs/benchmarks.md")
    parser.add_argument(
        "--serve-flag",
        action="append",
        default=[],
        help="a further `zkcoord serve` flag (repeatable), e.g. "
        "--serve-flag=--group.records.compact.min.bytes=0",
    )
    args = parser.parse_args(argv)
    runs = []
    for i in range(args.runs):
        r = one_run(args.groups, args.partitions, tuple(args.serve_flag))
        print(
            f"run {i + 1}: commits {r['commit_s']:.1f} s, group-records {r['records_mb']:.1f} MB, kill -9 -> "
            f"listening {r['listening_s']:.2f} s, first answer {r['answer_s']:.2f} s (node CPU {r['cpu_s']:.2f} s); "
            f"RSS {r['rss_before']:.0f} "
            f"MiB before, {r['rss_after']:.0f} MiB after",
            flush=True,
        )
        runs.append(r)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    live = args.groups * args.partitions
    rows = [
        "| run | kill -9 → listening (s) | kill -9 → first OffsetFetch answer (s) | restarted node's CPU until "
        "then (s) | RSS before kill (MiB) | RSS after load (MiB) | after / before |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(runs, 1):
        rows.append(
            f"| {i} | {r['listening_s']:.2f} | {r['answer_s']:.2f} | {r['cpu_s']:.2f} | {r['rss_before']:.0f} | "
            f"{r['rss_after']:.0f} | "
            f"{r['rss_after'] / r['rss_before']:.2f} |"
        )
    body = "\n".join(
        [
            f"A standalone `zkcoord serve` (fsync=always) holds {args.groups:,} groups × {args.partitions} partitions "
            f"({live:,} live offsets, committed over the wire as simple-consumer OffsetCommits, 32 in flight: "
            f"{med['commit_s']:.0f} s; `group-records` {med['records_mb']:.0f} MB). It is killed -9 and restarted "
            "on its data dir; measured from the kill to the node listening again and to the first OffsetFetch "
            "answer carrying the last group's offsets; RSS from /proc/PID/statm.",
            "",
            *rows,
            "",
            f"Median: first answer {med['answer_s']:.2f} s after the kill ({med['cpu_s']:.2f} s of the node's CPU, "
            "interpreter start included), RSS after load "
            f"{med['rss_after'] / med['rss_before']:.2f} × before. Targets (#27): ≤ 2 s, within 10%.",
        ]
    )
    cluster = []
    for i in range(args.cluster_runs):
        c = cluster_run(args.groups, args.partitions)
        print(
            f"cluster run {i + 1}: commits {c['commit_s']:.1f} s, kill -9 -> partition moved {c['moved_s']:.2f} s, "
            f"first answer {c['answer_s']:.2f} s (load {c['load_s']:.2f} s, node CPU {c['cpu_s']:.2f} s); "
            f"RSS {c['rss_before']:.0f} MiB before, {c['rss_after']:.0f} MiB after",
            flush=True,
        )
        cluster.append(c)
    if cluster:
        body += "\n\n" + "\n".join(
            [
                f"Cluster mode, beside it: two `serve --zk` nodes, one ZooKeeper 3.8 (1 GiB heap), one offsets "
                f"partition (so one node coordinates all {args.groups:,} groups; their {live:,} offsets are batch "
                "znodes in ZooKeeper), zookeeper.session.timeout.ms 6000. The partition's leader is killed -9; the "
                "other node takes the partition over once ZooKeeper expires the dead node's session (the controller "
                "rewrites its state), loads it from ZooKeeper and answers the same OffsetFetch.",
                "",
                "| run | kill -9 → partition moved (s) | moved → first answer: the load (s) | kill -9 → first answer "
                "(s) | new leader's CPU (s) | its RSS before / after (MiB) |",
                "|---:|---:|---:|---:|---:|---:|",
                *(
                    f"| {i} | {c['moved_s']:.2f} | {c['load_s']:.2f} | {c['answer_s']:.2f} | {c['cpu_s']:.2f} | "
                    f"{c['rss_before']:.0f} / {c['rss_after']:.0f} |"
                    for i, c in enumerate(cluster, 1)
                ),
            ]
        )
    met = "met" if med["answer_s"] <= 2.0 else "NOT met"
    ratio = med["rss_after"] / med["rss_before"]
    result = (
        f"RESULT load: first answer {med['answer_s']:.2f} s after kill -9 (median of {len(runs)}; target <= 2 s: "
        f"{met}), node CPU {med['cpu_s']:.2f} s, RSS after/before {ratio:.2f} (target <= 1.10: "
        f"{'met' if ratio <= 1.10 else 'NOT met'})"
    )
    if cluster:
        cmed = statistics.median(c["load_s"] for c in cluster)
        result += f"; cluster move: load {cmed:.2f} s after the partition moved"
    load = os.getloadavg()
    result += f"; load average now {load[0]:.1f}"
    if not args.no_report:
        write_section("coordinator load after kill -9", body)
    print(body)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
