"""Legacy ZooKeeper member benchmarks: (a) time from a membership change to a stable, fully owned assignment, faithful vs
fast mode; (b) offset-commit throughput, one znode write per partition vs multi-op batches.

Loopback ZooKeeper (zkcoord.local.ZooKeeper), no broker process: the topic is written to /brokers/topics and a
broker registration to /brokers/ids, which is all the rebalance reads. Members of (a) are LegacyConsumer
processes (`--member`) fed by a synthetic fetcher, so they hold consumed offsets to commit at each rebalance.
Run: python -m benchmarks.bench_legacy [--members 10] [--partitions 100] [--changes 5] [--commit-partitions 1000]
(BENCH_LEGACY_LOG=1 makes the member processes log every ZooKeeper request, to trace a rebalance.)
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.report import write_section
from zkcoord.legacy import ids, paths
from zkcoord.legacy.assignment import assign
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.rebalance import TopicPartition, plan_offset_commit
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.testing import wait_for
from zkcoord.zk import offset_store, registry
from zkcoord.zk.member import LegacyConsumer, Message
from zkcoord.zk.session import connect, ensure_chroot

TOPIC = "bench-legacy"
GROUP = "bench-legacy-group"
CHANGE_TIMEOUT_S = 30.0
ROOT = Path(__file__).resolve().parent.parent
FETCH_LATENCY_S = 0.1


class SyntheticFetcher:
    """Stands in for the broker: every poll hands out the next record of each assigned partition, so members
    have consumed offsets to commit at each rebalance, as a consuming group does."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.resets: dict[TopicPartition, int] = {}

    def assign(
        self, positions: Mapping[TopicPartition, int], continuing: frozenset[TopicPartition] = frozenset()
    ) -> None:
        self.positions = {
            tp: self.positions[tp] if tp in continuing and tp in self.positions else max(pos, 0)
            for tp, pos in positions.items()
        }
        self.resets = {tp: 0 for tp, pos in positions.items() if pos < 0}

    def reset_positions(self) -> Mapping[TopicPartition, int]:
        taken, self.resets = self.resets, {}
        return taken

    def poll(self, timeout_ms: int) -> list[Message]:
        time.sleep(min(FETCH_LATENCY_S, timeout_ms / 1000.0))
        out = [Message(tp.topic, tp.partition, pos, None, b"x") for tp, pos in self.positions.items()]
        self.positions = {tp: pos + 1 for tp, pos in self.positions.items()}
        return out

    def close(self) -> None:
        self.positions = {}


class ActiveMember:
    """A LegacyConsumer with a thread consuming from the synthetic fetcher until closed."""

    def __init__(self, config: LegacyConsumerConfig) -> None:
        self.consumer = LegacyConsumer(config, {TOPIC: 1}, fetcher_factory=lambda _m: SyntheticFetcher())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, daemon=True)

    def start(self) -> ActiveMember:
        self.consumer.start()
        self._thread.start()
        return self

    def _consume(self) -> None:
        while not self._stop.is_set():
            self.consumer.next_message(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def run_member(zk_connect: str, mode: str, suffix: str) -> int:
    """Body of one member process (`--member`): consume from the synthetic fetcher until SIGTERM."""
    if os.environ.get("BENCH_LEGACY_LOG"):
        logging.basicConfig(level=logging.DEBUG, format=f"%(asctime)s {suffix} %(threadName)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    # The original's defaults: rebalance.backoff.ms = zookeeper.sync.time.ms = 2000, 4 retries.
    config = LegacyConsumerConfig(
        group_id=GROUP,
        zookeeper_connect=zk_connect,
        consumer_id=suffix,
        mode=mode,  # type: ignore[arg-type]
    )
    member = ActiveMember(config).start()
    try:
        stop.wait(CHANGE_TIMEOUT_S * 20)
    finally:
        member.close()
    return 0


class MemberProcess:
    """One member in its own process (as each JVM of a real group is): no shared interpreter or GIL."""

    def __init__(self, zk_connect: str, mode: str, suffix: str) -> None:
        self.consumer_id = ids.consumer_id_from_suffix(GROUP, suffix)
        cmd = [sys.executable, "-m", "benchmarks.bench_legacy", "--member", zk_connect, mode, suffix]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class OwnersProbe:
    """Reads the owner znodes only when they may have reached the wanted state: all partitions owned and the
    children changed since the last full read (so probing costs one request per look, not one per partition,
    and does not slow the group it measures)."""

    def __init__(self, client: Any, partitions: int) -> None:
        self.client = client
        self.partitions = partitions
        self.base = paths.owners_topic_path(GROUP, TOPIC)
        self.last_cversion = -1

    def matches(self, want: dict[tuple[str, int], str]) -> bool:
        try:
            children, stat = self.client.get_children(self.base, include_data=True)
        except Exception:  # NoNodeError: nothing owned yet
            return False
        if len(children) != self.partitions or stat.cversion == self.last_cversion:
            return False
        self.last_cversion = stat.cversion
        pending = [(int(c), self.client.get_async(f"{self.base}/{c}")) for c in children]
        owners = {}
        for p, result in pending:
            try:
                data, _stat = result.get(10)
            except Exception:  # deleted meanwhile
                return False
            owners[(TOPIC, p)] = data.decode()
        if owners == want:
            return True
        self.last_cversion = (
            -1
            if self.client.get_children(self.base, include_data=True)[1].cversion != stat.cversion
            else stat.cversion
        )
        return False


class IdsWatch:
    """Records when the group's member list changes (the moment every member's watch fires)."""

    def __init__(self, client: Any) -> None:
        self.changes: list[tuple[float, frozenset[str]]] = []
        client.ensure_path(paths.ids_path(GROUP))
        client.ChildrenWatch(paths.ids_path(GROUP), self._on)

    def _on(self, children: list[str]) -> None:
        self.changes.append((time.monotonic(), frozenset(children)))

    def changed_to(self, members: frozenset[str]) -> float | None:
        for at, now in reversed(self.changes):
            if now == members:
                return at
        return None


def rebalance_times(hosts: str, mode: str, members_n: int, partitions: int, changes: int) -> list[float]:
    """Seconds from each membership change (alternately a leave and a join) to a settled group: the owner
    znodes are exactly the range assignment of the current members."""
    zk_connect = ensure_chroot(hosts, f"/bench-legacy-{mode}-{time.time_ns()}")
    client = connect(zk_connect)
    members: list[MemberProcess] = []
    try:
        registry.ensure_cluster_paths(client)
        registry.register_broker(client, 1, "127.0.0.1", 9, timestamp_ms=int(time.time() * 1000))
        registry.write_topic(client, TOPIC, {p: [1] for p in range(partitions)})
        watch = IdsWatch(client)

        def expected() -> dict[tuple[str, int], str]:
            decision = assign(
                "range", {m.consumer_id: {TOPIC: 1} for m in members}, {TOPIC: range(partitions)}
            )
            return {(t, p): th for (t, p), th in decision.items()}

        probe = OwnersProbe(client, partitions)

        def settled() -> bool:
            return probe.matches(want)

        members = [MemberProcess(zk_connect, mode, f"m{i:02d}") for i in range(members_n)]
        want = expected()
        wait_for(settled, CHANGE_TIMEOUT_S * 2, "the initial group to settle", 0.005)
        times: list[float] = []
        next_id = members_n
        for change in range(changes):
            if change % 2 == 0:
                members.pop(len(members) // 2).stop()
            else:
                members.append(MemberProcess(zk_connect, mode, f"m{next_id:02d}"))
                next_id += 1
            want = expected()
            wait_for(settled, CHANGE_TIMEOUT_S, f"change {change} to settle", 0.005)
            done = time.monotonic()
            at = watch.changed_to(frozenset(m.consumer_id for m in members))
            if at is None:
                raise AssertionError(f"{mode}: the ids watch never saw the member list of change {change}")
            times.append(done - at)
        return times
    finally:
        for m in members:
            m.stop()
        client.stop()
        client.close()


def commit_rate(hosts: str, partitions: int, batched: bool, rounds: int) -> float:
    """Partitions committed per second: `rounds` commits of every partition's moved offset."""
    client = connect(ensure_chroot(hosts, f"/bench-legacy-commit-{time.time_ns()}"))
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        budget = LegacyConsumerConfig(group_id=GROUP, zookeeper_connect=hosts).multi_budget_bytes
        # Create every offset znode first (a batch), so both variants measure versioned sets only.
        versions: dict[TopicPartition, int] = {}
        first = plan_offset_commit(GROUP, dict.fromkeys(tps, 0), {})
        versions.update(
            offset_store.write_fenced(client, first, versions, batched=True, budget=budget).written
        )
        elapsed = 0.0
        for r in range(1, rounds + 1):
            writes = plan_offset_commit(GROUP, {tp: 100 * r + tp.partition for tp in tps}, {})
            t0 = time.perf_counter()
            result = offset_store.write_fenced(client, writes, versions, batched=batched, budget=budget)
            elapsed += time.perf_counter() - t0
            if len(result.written) != partitions or result.stale:
                raise AssertionError(f"commit round {r} wrote {len(result.written)} of {partitions}")
            versions.update(result.written)
        stored = registry.read_offsets(client, GROUP)
        if stored != {(TOPIC, p): 100 * rounds + p for p in range(partitions)}:
            raise AssertionError("stored offsets differ from the last commit")
        return partitions * rounds / elapsed
    finally:
        client.stop()
        client.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--member"]:
        return run_member(*argv[1:4])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--changes", type=int, default=5)
    ap.add_argument("--commit-partitions", type=int, default=1000)
    ap.add_argument("--commit-rounds", type=int, default=3)
    ap.add_argument("--no-report", action="store_true", help="print only; do not write docs/benchmarks.md")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    with ZooKeeper.start(1) as zk:
        times = {}
        for mode in ("fast", "faithful"):
            times[mode] = rebalance_times(zk.hosts, mode, args.members, args.partitions, args.changes)
            print(mode, " ".join(f"{t:.3f}" for t in times[mode]), file=sys.stderr)
        rates = {}
        for batched in (False, True):
            rates[batched] = commit_rate(zk.hosts, args.commit_partitions, batched, args.commit_rounds)
            print("batched" if batched else "one-by-one", f"{rates[batched]:.0f}/s", file=sys.stderr)
    med = {mode: statistics.median(ts) for mode, ts in times.items()}
    speedup = med["faithful"] / med["fast"]
    commit_ratio = rates[True] / rates[False]
    body = f"""\
### (a) membership change to a stable, fully owned assignment

{args.members} members × {args.partitions} partitions (range), each member its own process with its own ZooKeeper
session (as each JVM of a real group is), consuming from a synthetic fetcher so every rebalance commits moved
offsets first. {args.changes} changes per mode, alternating a member leaving (SIGTERM: commit, release, deregister)
and one joining. Time = from the moment the group's ids children change (seen by a watch) until the owner znodes are
exactly the range assignment of the new member list. Loopback ZooKeeper 3.8 on this machine (load average
{load_before:.1f} at the start, {os.cpu_count()} cores).

| mode | median | min | max | per change (s) |
|---|---:|---:|---:|---|
"""
    for mode in ("faithful", "fast"):
        ts = times[mode]
        body += (
            f"| {mode} | {med[mode]:.3f} s | {min(ts):.3f} s | {max(ts):.3f} s | "
            f"{' '.join(f'{t:.2f}' for t in ts)} |\n"
        )
    body += f"""
**fast is {speedup:.1f}× quicker at the median** (goal ≥ 10×). Faithful keeps the original timing: a member whose
claim hits an owner znode that its previous owner has not released yet fails the attempt and sleeps
`rebalance.backoff.ms` (default 2000 ms = `zookeeper.sync.time.ms`) before rereading the group, so a change costs
about one backoff. Fast waits on that znode's deletion instead and claims as soon as it is gone; both leave the
same znodes. What remains of a fast change is the members' own rebalances running at once: about ten
ZooKeeper round trips each (the commit, the batched release, the group read, the claim, the offset read), the
per-znode reads (owner `exists`, member registrations, topic data, offsets) being pipelined as kazoo async calls
so that each costs one round trip of latency rather than one per znode.

### (b) offset commits: one znode write per partition vs multi-op batches

{args.commit_partitions} offset znodes, each commit moves every offset (versioned writes, as the member commits),
{args.commit_rounds} rounds.

| write | partitions/s |
|---|---:|
| one by one (kazoo `set` per znode) | {rates[False]:,.0f} |
| batched (kazoo transaction, multi-op under the {budget_kib()} KiB budget) | {rates[True]:,.0f} |

**batched is {commit_ratio:.0f}× more partitions/s** (goal ≥ 20×). One by one pays a client-server round trip
and a ZooKeeper transaction-log write per partition; a multi-op is one request and one transaction for up to
the byte budget, so its cost is per batch, not per partition.
"""
    print(body)
    if not args.no_report:
        write_section("legacy member", body)
    return 0 if speedup >= 10 and commit_ratio >= 20 else 1


def budget_kib() -> int:
    return LegacyConsumerConfig(group_id="g", zookeeper_connect="x").multi_budget_bytes // 1024


if __name__ == "__main__":
    sys.exit(main())
