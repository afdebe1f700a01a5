"""Mixed-group benchmark: partition-seconds without an owner per replaced member, member-by-member migration through
`serve --bridge-zk-groups` against the barrier way (stop the legacy group, start the broker-protocol group).

Loopback ZooKeeper (zkcoord.local.ZooKeeper) and one `zkcoord serve --zk --bridge-zk-offsets --bridge-zk-groups`
node; N legacy members (zkcoord's, fast mode, range) of a P-partition topic, replaced by kafka-python members. A
sampler reads every 20 ms what each member may consume from (legacy: `LegacyConsumer.owned()`; kafka-python: its
rebalance callbacks) and integrates the partitions nobody holds. Member by member: start a kafka-python member,
wait until every member holds its share, one legacy member leaves (make-before-break, `LegacyConsumer.leave`:
it consumes until each partition's next owner waits for it), wait again; barrier: stop every legacy member,
start the kafka-python members, wait until they hold every partition. The same command also measures plain
(not bridged) groups of kafka-python and librdkafka members replaced one by one, eager (range) against cooperative
(cooperative-sticky), back to back and with a pause between steps (`--plain-pause-ms`, default 0,1500), and writes
both sections of docs/benchmarks.md.

Usage: `python -m benchmarks.bench_mixed` (all of it, ~15 min); `--plain-only` (the plain section alone, ~8 min
at --runs 5); `--mixed-only` (the mixed section alone, ~7 min at --runs 5); `--no-report` (print only); `--trace FILE` (one member-by-member cooperative run at initial delay 0,
every step logged with timestamps: the bench's events, the legacy members', kafka-python's coordinator and the
node's, merged into FILE; printed: the unheld partition-seconds per membership change and every partition's
unheld stretch of 40 ms or more); `--trace-plain FILE --plain-way "librdkafka cooperative" --plain-pause-ms 1500`
(one plain run the same way, plus librdkafka's `cgrp` debug log and every group request with its answer as the
node sees them, through `benchmarks.wire_trace`).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from benchmarks.report import write_section
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import NodeProcess
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.testing import wait_for
from zkcoord.zk.member import LegacyConsumer
from zkcoord.zk.session import ensure_chroot

SAMPLE_S = 0.02
trace = logging.getLogger("bench_mixed")  # `--trace`: what each member gains and gives up, with timestamps
# Member by member with eager kafka-python members (range) and with cooperative ones (cooperative-sticky); the
# legacy members are zkcoord's in fast mode, whose hand-over is incremental.
WAYS = ("member-by-member eager", "member-by-member cooperative")


class Holdings:
    """What every member may consume from, sampled; integrates partition-seconds with no holder."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.lock = threading.Lock()
        self.classic: dict[str, set[int]] = {}
        self.legacy: dict[str, Callable[[], set[int]]] = {}
        self.unowned_s = 0.0
        # `--trace`: each stretch a partition went unheld, as (step it began in, partition, seconds); `step` is
        # the membership change under way, set by `run`
        self.step = "start"
        self.episodes: list[tuple[str, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def held(self) -> set[int]:
        with self.lock:
            out = {p for ps in self.classic.values() for p in ps}
            for view in self.legacy.values():
                out |= view()
            return out

    def _run(self) -> None:
        last = time.monotonic()
        unheld: set[int] = set()
        since: dict[int, tuple[str, float]] = {}  # partition -> (step, when) it went unheld
        while not self._stop.wait(SAMPLE_S):
            now = time.monotonic()
            held = self.held()
            self.unowned_s += (self.partitions - len(held)) * (now - last)
            for p in set(range(self.partitions)) - held:
                since.setdefault(p, (self.step, last))  # unheld since the last sample, at the earliest
            for p in held & since.keys():
                step, began = since.pop(p)
                self.episodes.append((step, p, last - began))  # counted up to the previous sample
            last = now
            if trace.isEnabledFor(logging.INFO) and set(range(self.partitions)) - held != unheld:
                unheld = set(range(self.partitions)) - held
                trace.info("unheld %s", sorted(unheld))
        self.episodes.extend((step, p, last - began) for p, (step, began) in since.items())

    def start(self) -> Holdings:
        self._thread.start()
        return self

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(5)
        return self.unowned_s


class Legacy:
    def __init__(self, zk_connect: str, group: str, topic: str, name: str, h: Holdings) -> None:
        config = LegacyConsumerConfig(
            group_id=group, zookeeper_connect=zk_connect, consumer_id=name, auto_offset_reset="smallest",
            auto_commit_interval_ms=200, rebalance_backoff_ms=200, rebalance_max_retries=50, socket_timeout_ms=3000,
            zookeeper_session_timeout_ms=6000, mode="fast",
        )  # fmt: skip
        self.consumer = LegacyConsumer(config, {topic: 1})
        self.name, self.h = name, h
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Legacy:
        self.consumer.start()
        with self.h.lock:
            self.h.legacy[self.name] = lambda: {tp.partition for tp in self.consumer.owned()}
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.next_message(timeout=0.1)

    def stop(self) -> None:
        # Make before break: it deregisters and goes on consuming what it still owns until each partition's
        # next owner waits for it (LegacyConsumer.leave), then closes.
        self.consumer.leave(timeout=5.0)
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()
        with self.h.lock:
            self.h.legacy.pop(self.name, None)


class Classic(ConsumerRebalanceListener):  # type: ignore[misc]
    """A kafka-python member: eager (range; revokes everything before every JoinGroup) or cooperative
    (CooperativeStickyAssignor, KIP-429: its callbacks name only what it gains and what it gives up)."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, name: str, h: Holdings, cooperative: bool = False
    ) -> None:
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        self.cooperative = cooperative
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, client_id=name, auto_offset_reset="earliest",
            enable_auto_commit=True, auto_commit_interval_ms=200, session_timeout_ms=6000,
            heartbeat_interval_ms=200, max_poll_interval_ms=20000, fetch_max_wait_ms=100,
            partition_assignment_strategy=[CooperativeStickyAssignor if cooperative else RangePartitionAssignor],
        )  # fmt: skip
        self.consumer.subscribe([topic], listener=self)
        self.consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost join: docs/cluster.md)
        self.name, self.h = name, h
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def on_partitions_revoked(self, revoked: Any) -> None:
        trace.info("%s revoked %s", self.name, sorted(tp.partition for tp in revoked))
        with self.h.lock:
            if self.cooperative:
                self.h.classic.setdefault(self.name, set()).difference_update(tp.partition for tp in revoked)
            else:
                self.h.classic[self.name] = set()

    def on_partitions_lost(self, lost: Any) -> None:
        self.on_partitions_revoked(lost)

    def on_partitions_assigned(self, assigned: Any) -> None:
        trace.info("%s assigned %s", self.name, sorted(tp.partition for tp in assigned))
        with self.h.lock:
            if self.cooperative:
                self.h.classic.setdefault(self.name, set()).update(tp.partition for tp in assigned)
            else:
                self.h.classic[self.name] = {tp.partition for tp in assigned}

    def start(self) -> Classic:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=1000)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()
        with self.h.lock:
            self.h.classic.pop(self.name, None)


def moved_per_change(members: int, partitions: int) -> list[int]:
    """Partitions whose owner changes at each membership change of one member-by-member migration, under range
    over the combined sorted consumer ids (classic ids, `<group>_classic-<seq><hash>`, sort in join order
    before `<group>_l<i>`)."""
    from zkcoord.bridge.mixed_policy import consumer_id_for
    from zkcoord.legacy import assign

    group = "mixed-bench"
    legacy = [f"{group}_l{i}" for i in range(members)]
    current = list(legacy)

    def owners() -> dict[Any, str]:
        decision = assign("range", {m: {"t": 1} for m in current}, {"t": list(range(partitions))})
        return {tp: thread.rsplit("-", 1)[0] for tp, thread in decision.items()}

    before, out = owners(), []
    for i in range(members):
        for change in ("join", "leave"):
            if change == "join":
                current.append(consumer_id_for(group, f"c{i}", [c for c in current if "_classic-" in c]))
            else:
                current.remove(legacy[i])
            now = owners()
            out.append(sum(1 for tp, owner in now.items() if before.get(tp) != owner))
            before = now
    return out


def settled(h: Holdings, members: list[Any]) -> Callable[[], bool]:
    def check() -> bool:
        with h.lock:
            names = {n for n, ps in h.classic.items() if ps} | {n for n, v in h.legacy.items() if v()}
        return names == {m.name for m in members} and h.held() == set(range(h.partitions))

    return check


def run(
    zk_connect: str,
    node: NodeProcess,
    members: int,
    partitions: int,
    way: str,
    episodes: list[tuple[str, int, float]] | None = None,
) -> float:
    """Partition-seconds without an owner per replaced member, for one migration of `members` members; each
    stretch a partition went unheld is added to `episodes` when given."""
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-{tag}"
    group = f"barrier-bench-{tag}" if way == "barrier" else f"mixed-bench-{tag}"
    cooperative = way.endswith("cooperative")
    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    producer.send(topic, b"x").get(timeout=30)  # creates the topic with --num.partitions partitions
    producer.close()
    h = Holdings(partitions)
    legacy = [Legacy(zk_connect, group, topic, f"l{i}", h).start() for i in range(members)]
    live: list[Any] = list(legacy)
    wait_for(settled(h, live), 60, "the legacy group to settle", interval=0.02)
    h.start()
    classic: list[Classic] = []
    try:
        if way != "barrier":
            for i, old in enumerate(legacy):
                h.step = f"c{i} joins"
                trace.info("step: c%d joins", i)
                new = Classic(node.bootstrap, group, topic, f"c{i}", h, cooperative).start()
                classic.append(new)
                live.append(new)
                wait_for(settled(h, live), 60, "the mixed group to settle", interval=0.02)
                trace.info("step: settled; l%d leaves", i)
                h.step = f"l{i} leaves"
                old.stop()
                live.remove(old)
                wait_for(settled(h, live), 60, "the mixed group to settle", interval=0.02)
                trace.info("step: settled")
        else:
            for old in legacy:
                old.stop()
                live.remove(old)
            for i in range(members):
                new = Classic(node.bootstrap, group, topic, f"c{i}", h).start()
                classic.append(new)
                live.append(new)
            wait_for(settled(h, live), 60, "the broker-protocol group to settle", interval=0.02)
    finally:
        total = h.stop()
        if episodes is not None:
            episodes.extend(h.episodes)
        for m in live:
            m.stop()
    return total / members


def breakdown(episodes: list[tuple[str, int, float]]) -> str:
    """`--trace`'s summary: partition-seconds unheld per membership change, then every stretch of 40 ms or more
    (shorter ones are one or two samples: the hand-over's own round trips)."""
    by_step: dict[str, float] = {}
    for step, _p, s in episodes:
        by_step[step] = by_step.get(step, 0.0) + s
    lines = [f"unheld partition-seconds in all: {sum(by_step.values()):.3f}"]
    lines += [f"  {step}: {s:.3f}" for step, s in by_step.items()]
    lines += [f"  stretch: partition {p} unheld {s:.3f} s ({step})" for step, p, s in episodes if s >= 0.04]
    return "\n".join(lines)


class Rdkafka:
    """A librdkafka (confluent-kafka) member: eager (range) or cooperative (cooperative-sticky); its callbacks
    tell what it may consume from, as kafka-python's do."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, name: str, h: Holdings, cooperative: bool = False
    ) -> None:
        from confluent_kafka import Consumer

        self.name, self.h, self.cooperative = name, h, cooperative
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "fetch.wait.max.ms": 100,
            "max.poll.interval.ms": 20000,
            "partition.assignment.strategy": "cooperative-sticky" if cooperative else "range",
        }  # fmt: skip  (as kafka-python's Classic: same session, heartbeat, fetch wait, rebalance timeout)
        if trace.isEnabledFor(
            logging.INFO
        ):  # `--trace-plain`: librdkafka's group state machine, as it logs it
            config |= {"debug": "cgrp", "logger": logging.getLogger(f"rdkafka.{name}")}
        self.consumer = Consumer(config)
        self.consumer.subscribe(
            [topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _assigned(self, _c: Any, parts: list[Any]) -> None:
        trace.info("%s assigned %s", self.name, sorted(p.partition for p in parts))
        with self.h.lock:
            held = self.h.classic.setdefault(self.name, set()) if self.cooperative else set()
            self.h.classic[self.name] = held | {p.partition for p in parts}

    def _revoked(self, _c: Any, parts: list[Any]) -> None:
        trace.info("%s revoked %s", self.name, sorted(p.partition for p in parts))
        with self.h.lock:
            self.h.classic.setdefault(self.name, set()).difference_update(p.partition for p in parts)

    def start(self) -> Rdkafka:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()
        with self.h.lock:
            self.h.classic.pop(self.name, None)


PLAIN_WAYS = ("kafka-python eager", "kafka-python cooperative", "librdkafka eager", "librdkafka cooperative")


def plain_run(
    node: NodeProcess,
    members: int,
    partitions: int,
    way: str,
    episodes: list[tuple[str, int, float]] | None = None,
    bootstrap: str | None = None,
    pause_s: float = 0.0,
) -> float:
    """A plain broker-protocol group (not bridged) of `members` members, each replaced by a new one (start the
    new member, wait until every member holds its share, stop the old one, wait again; `pause_s` more after each
    wait: the spacing of a rolling restart): partition-seconds without an owner per replaced member; each stretch
    a partition went unheld is added to `episodes` when given. Clients connect to `bootstrap` (the node's, unless
    given: `--trace-plain`'s relay)."""
    bootstrap = bootstrap or node.bootstrap
    tag = uuid.uuid4().hex[:6]
    topic, group = f"plain-{tag}", f"plain-bench-{tag}"
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, b"x").get(timeout=30)
    producer.close()
    kind: Any = Classic if way.startswith("kafka-python") else Rdkafka
    cooperative = way.endswith("cooperative")
    h = Holdings(partitions)
    old = [kind(bootstrap, group, topic, f"o{i}", h, cooperative).start() for i in range(members)]
    live: list[Any] = list(old)
    try:
        wait_for(settled(h, live), 60, "the group to settle", interval=0.02)
        h.start()
        pace = threading.Event()  # never set: waited on for `pause_s` between steps (the workload's spacing)
        for i, member in enumerate(old):
            pace.wait(pause_s)
            h.step = f"n{i} joins"
            trace.info("step: n%d joins", i)
            live.append(kind(bootstrap, group, topic, f"n{i}", h, cooperative).start())
            wait_for(settled(h, live), 60, "the group to settle", interval=0.02)
            pace.wait(pause_s)
            h.step = f"o{i} leaves"
            trace.info("step: settled; o%d leaves", i)
            member.stop()
            trace.info("step: o%d closed", i)
            live.remove(member)
            wait_for(settled(h, live), 60, "the group to settle", interval=0.02)
            trace.info("step: settled")
    finally:
        total = h.stop()
        if episodes is not None:
            episodes.extend(h.episodes)
        for m in live:
            m.stop()
    return total / members


PlainResults = dict[tuple[int, str], list[tuple[float, list[tuple[str, int, float]]]]]


def measure_plain(zk_hosts: str, args: argparse.Namespace) -> PlainResults:
    """Every plain way at every `--plain-pause-ms`, `args.runs` times, against one node (initial rebalance delay 0:
    the group is never Empty while it is measured): (pause, way) -> [(per-member figure, unheld stretches)]."""
    results: PlainResults = {(pause, way): [] for pause in args.plain_pause_ms for way in PLAIN_WAYS}
    with tempfile.TemporaryDirectory() as data:
        connect_string = ensure_chroot(zk_hosts, "/bench-plain")
        node = NodeProcess(
            Path(data),
            ("--zk", connect_string, "--node-id", "1", f"--num.partitions={args.partitions}",
             "--group.min.session.timeout.ms=1000", "--group.initial.rebalance.delay.ms=0"),
        )  # fmt: skip
        node.start()
        try:
            for _ in range(args.runs):
                for (pause, way), runs in results.items():
                    episodes: list[tuple[str, int, float]] = []
                    figure = plain_run(
                        node, args.members, args.partitions, way, episodes, pause_s=pause / 1000
                    )
                    runs.append((figure, episodes))
                    print(f"plain pause={pause}", way, f"{figure:.3f}", file=sys.stderr)
        finally:
            node.stop()
    return results


def per_change(
    runs: list[tuple[float, list[tuple[str, int, float]]]], members: int, kind: str
) -> tuple[float, float]:
    """Over `runs`: (partition-seconds, unheld stretches) per membership change of `kind` ("joins" or "leaves")."""
    changes = len(runs) * members
    stretches = [s for _fig, eps in runs for step, _p, s in eps if step.endswith(kind)]
    return sum(stretches) / changes, len(stretches) / changes


def measure(zk_hosts: str, delay_ms: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """Both ways, `args.runs` times each, against one node with `group.initial.rebalance.delay.ms=delay_ms`."""
    results: dict[str, list[float]] = {WAYS[0]: [], WAYS[1]: [], "barrier": []}
    with tempfile.TemporaryDirectory() as data:
        connect_string = ensure_chroot(zk_hosts, f"/bench-mixed-{delay_ms}")
        node = NodeProcess(
            Path(data),
            ("--zk", connect_string, "--node-id", "1", f"--num.partitions={args.partitions}",
             "--group.min.session.timeout.ms=1000", f"--group.initial.rebalance.delay.ms={delay_ms}",
             "--bridge-zk-offsets", "--bridge-zk-groups", "mixed-.*"),
        )  # fmt: skip
        node.start()
        try:
            for _ in range(args.runs):
                for way in results:
                    results[way].append(run(connect_string, node, args.members, args.partitions, way))
                    print(f"delay={delay_ms}", way, f"{results[way][-1]:.3f}", file=sys.stderr)
        finally:
            node.stop()
    return results


def traced(zk_hosts: str, delay_ms: int, args: argparse.Namespace, path: Path) -> None:
    """One member-by-member cooperative run with every step logged (the bench's events, the legacy members',
    kafka-python's coordinator and the node's log, merged by timestamp into `path`): where the time goes."""
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(n) for n in ("bench_mixed", "zkcoord", "kafka.coordinator")]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as data:
        connect_string = ensure_chroot(zk_hosts, f"/bench-mixed-trace-{delay_ms}")
        node = NodeProcess(
            Path(data),
            ("--zk", connect_string, "--node-id", "1", f"--num.partitions={args.partitions}",
             "--group.min.session.timeout.ms=1000", f"--group.initial.rebalance.delay.ms={delay_ms}",
             "--bridge-zk-offsets", "--bridge-zk-groups", "mixed-.*"),
        )  # fmt: skip
        node.start()
        try:
            way = WAYS[1] if args.trace_way == "cooperative" else WAYS[0]
            episodes: list[tuple[str, int, float]] = []
            per_member = run(connect_string, node, args.members, args.partitions, way, episodes)
            print(f"traced {way}: {per_member:.3f} partition-s per member")
            print(breakdown(episodes))
        finally:
            node.stop()
            for lg in loggers:
                lg.removeHandler(handler)
            handler.close()
    lines = path.read_text().splitlines() + [f"{ln.rstrip()} [node]" for ln in node.output if ln[:2] == "20"]
    path.write_text("\n".join(sorted(lines)) + "\n")


def plain_traced(zk_hosts: str, args: argparse.Namespace, way: str, path: Path) -> None:
    """One plain run of `way` (pause: the first `--plain-pause-ms`) with every step logged into `path`, merged: the bench's events and the
    members' callbacks, kafka-python's coordinator or librdkafka's `cgrp` debug log, the node's log, and every
    JoinGroup/SyncGroup/Heartbeat/LeaveGroup with its answer as the node receives and sends it (a relay in front
    of the node, which advertises the relay's address: `benchmarks.wire_trace`)."""
    from benchmarks.wire_trace import WireTrace

    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    names = ("bench_mixed", "zkcoord", "kafka.coordinator", "rdkafka", "wire")
    loggers = [logging.getLogger(n) for n in names]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG if lg.name == "rdkafka" else logging.INFO)
    with tempfile.TemporaryDirectory() as data:
        connect_string = ensure_chroot(zk_hosts, "/bench-plain-trace")
        node = NodeProcess(
            Path(data),
            ("--zk", connect_string, "--node-id", "1", f"--num.partitions={args.partitions}",
             "--group.min.session.timeout.ms=1000", "--group.initial.rebalance.delay.ms=0"),
        )  # fmt: skip
        relay = WireTrace(("127.0.0.1", node.port))
        node.extra += ("--advertise", f"127.0.0.1:{relay.port}")
        node.start()
        try:
            episodes: list[tuple[str, int, float]] = []
            pause = args.plain_pause_ms[0]
            bootstrap = f"127.0.0.1:{relay.port}"
            per_member = plain_run(
                node, args.members, args.partitions, way, episodes, bootstrap, pause / 1000
            )
            print(f"traced {way}, pause {pause} ms: {per_member:.3f} partition-s per member")
            print(breakdown(episodes))
        finally:
            node.stop()
            relay.close()
            for lg in loggers:
                lg.removeHandler(handler)
            handler.close()
    lines = path.read_text().splitlines() + [f"{ln.rstrip()} [node]" for ln in node.output if ln[:2] == "20"]
    path.write_text("\n".join(sorted(lines)) + "\n")


def plain_report(results: PlainResults, args: argparse.Namespace, load_before: float) -> None:
    rows = []
    med: dict[tuple[int, str], float] = {}
    for (pause, way), runs in results.items():
        v = [fig for fig, _eps in runs]
        med[pause, way] = statistics.median(v)
        (join_s, join_n), (leave_s, leave_n) = (
            per_change(runs, args.members, k) for k in ("joins", "leaves")
        )
        rows.append(
            f"| {pause} ms | {way} | {med[pause, way]:.3f} | {min(v):.3f} | {max(v):.3f} | "
            f"{join_n:.1f} × {join_s / join_n if join_n else 0:.2f} s | {leave_n:.1f} × {leave_s / leave_n if leave_n else 0:.2f} s | "
            f"{' '.join(f'{x:.2f}' for x in v)} |"
        )  # fmt: skip
    ratios = "; ".join(
        f"{pause} ms between steps: kafka-python {med[pause, 'kafka-python cooperative'] / med[pause, 'kafka-python eager']:.2f}×, "
        f"librdkafka {med[pause, 'librdkafka cooperative'] / med[pause, 'librdkafka eager']:.2f}×"
        for pause in args.plain_pause_ms
    )  # fmt: skip
    body = f"""\
A plain broker-protocol group (not bridged) of {args.members} members of one client on a {args.partitions}-partition
topic, each member replaced by a new one in turn (start the new member, wait until every member holds its share,
stop the old one, wait again), {args.runs} runs per row, one `zkcoord serve --zk` node,
`group.initial.rebalance.delay.ms` 0 (the group is never Empty while measured). Both clients configured alike:
session timeout 6000 ms, heartbeat interval 200 ms, fetch wait 100 ms, max poll interval (the JoinGroup's
rebalance timeout) 20000 ms, auto commit every 200 ms. Eager: range (every member revokes everything before each
JoinGroup); cooperative: cooperative-sticky (KIP-429: only what moves is revoked, in a first rebalance, and
assigned in a follow-up). Pause = extra wait after each settled step before the next one (0: back to back, as
before; {max(args.plain_pause_ms)} ms: steps further apart than librdkafka's 1 s JoinGroup interval, as in a real
rolling restart). Figure = partition-seconds during which no member may consume a partition (sampled every
{int(SAMPLE_S * 1000)} ms from the members' rebalance callbacks), per replaced member; per join / per leave =
partitions left unheld per membership change × their mean unheld stretch, over all runs. Machine load average
{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores, shared with other engineers' test runs).

| pause | client and protocol | median (partition-s per member) | min | max | per join | per leave | runs |
|---|---|---:|---:|---:|---:|---:|---|
{chr(10).join(rows)}

**Cooperative against eager: {ratios}.**
"""
    print(body)
    if not args.no_report:
        write_section("plain groups: eager against cooperative", body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-report", action="store_true", help="print only; do not write docs/benchmarks.md")
    ap.add_argument(
        "--trace", type=Path, help="one traced member-by-member run at initial delay 0 into this file"
    )
    ap.add_argument("--trace-way", choices=("cooperative", "eager"), default="cooperative")
    ap.add_argument(
        "--plain-only", action="store_true", help="only the plain-group table (eager against cooperative)"
    )
    ap.add_argument(
        "--mixed-only",
        action="store_true",
        help="only the mixed-group table (member by member against the barrier)",
    )
    ap.add_argument(
        "--trace-plain", type=Path, metavar="FILE",
        help="one traced plain run of --plain-way, paced by the first --plain-pause-ms, into FILE (callbacks, client group logs, the node's log, the group "
        "requests and answers as the node sees them); prints unheld partition-seconds per membership change",
    )  # fmt: skip
    ap.add_argument(
        "--plain-way", choices=PLAIN_WAYS, default="librdkafka cooperative",
        help="the row --trace-plain runs (default: librdkafka cooperative)",
    )  # fmt: skip
    ap.add_argument(
        "--plain-pause-ms", type=lambda v: [int(x) for x in v.split(",")], default=[0, 1500], metavar="MS[,MS...]",
        help="extra wait after each settled step of the plain runs, one set of rows per value (default: 0,1500)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.trace_plain is not None:
        with ZooKeeper.start(1) as zk:
            plain_traced(zk.hosts, args, args.plain_way, args.trace_plain)
        return 0
    if args.trace is not None:
        with ZooKeeper.start(1) as zk:
            traced(zk.hosts, 0, args, args.trace)
        return 0
    load_before = os.getloadavg()[0]
    by_delay: dict[int, dict[str, list[float]]] = {}
    if args.plain_only:
        with ZooKeeper.start(1) as zk:
            plain_report(measure_plain(zk.hosts, args), args, load_before)
        return 0
    with ZooKeeper.start(1) as zk:
        plain = None if args.mixed_only else measure_plain(zk.hosts, args)
        for delay_ms in (
            3000,
            0,
        ):  # Kafka's default initial rebalance delay, and none (zkcoord's test setting)
            by_delay[delay_ms] = measure(zk.hosts, delay_ms, args)
    load_after = os.getloadavg()[0]
    rows = []
    ratios = {}
    for delay_ms, results in by_delay.items():
        med = {way: statistics.median(v) for way, v in results.items()}
        ratios[delay_ms] = {
            way: med[way] / med["barrier"] if med["barrier"] else float("nan") for way in WAYS
        }
        for way, v in results.items():
            rows.append(
                f"| {delay_ms} ms | {way} | {med[way]:.3f} | {min(v):.3f} | {max(v):.3f} | "
                f"{' '.join(f'{x:.2f}' for x in v)} |"
            )
    table = "\n".join(rows)
    moved = moved_per_change(args.members, args.partitions)
    body = f"""\
{args.members} legacy members (zkcoord, fast mode: incremental hand-over, range) of a {args.partitions}-partition
topic replaced by {args.members} kafka-python members, {args.runs} runs per way, one `zkcoord serve --zk
--bridge-zk-offsets --bridge-zk-groups` node, loopback ZooKeeper. Ways: member by member with eager kafka-python
members (range: they revoke everything before every JoinGroup), member by member with cooperative ones
(`CooperativeStickyAssignor`, KIP-429: they revoke only what moves), and the barrier (stop the legacy group, start
the broker-protocol group). Figure = partition-seconds during which no member may consume a partition (sampled
every {int(SAMPLE_S * 1000)} ms from the members' own views), divided by the members replaced. Two broker settings:
`group.initial.rebalance.delay.ms` = 3000 (Kafka's default, what a real migration meets) and 0 (zkcoord's test
setting). Machine load average {load_before:.1f} at the start, {load_after:.1f} at the end (2 cores, shared with
other engineers' test runs).

| initial delay | way | median (partition-s per member) | min | max | runs |
|---|---|---:|---:|---:|---|
{table}

**Member by member against the barrier, with Kafka's default initial rebalance delay: eager
{ratios[3000][WAYS[0]]:.2f}×, cooperative {ratios[3000][WAYS[1]]:.2f}× (goal ≤ 0.05×); with no delay: eager
{ratios[0][WAYS[0]]:.2f}×, cooperative {ratios[0][WAYS[1]]:.2f}× (goal ≤ 0.2×; cooperative 0.68× earlier on
2026-11-27 before make-before-break, 0.35× with it, 0.23× before the same-generation hand-on).** The barrier leaves every partition unowned from the legacy group's stop
until the new group has formed (a new, Empty group waits the initial rebalance delay). Member by member the group
is never Empty; each replacement is two membership changes (a join, a leave). Legacy members in fast mode keep
the owner znodes of what stays and leave make-before-break (`LegacyConsumer.leave`); eager classic members revoke
everything before each JoinGroup and are unowned until the SyncGroup, cooperative ones keep consuming what stays.

Where the time went (`python -m benchmarks.bench_mixed --trace FILE`: one cooperative run at delay 0 with every
step logged, the bench's, the legacy members', kafka-python's coordinator and the node's, merged by timestamp).
Before make-before-break (load ~6, 0.78 partition-s per member in the traced run) three kinds of move cost a
whole classic rebalance each (members learn of it by heartbeat at heartbeat.interval.ms 200, then JoinGroup and
SyncGroup: 0.2-0.35 s per partition): (1) at a classic member's join, the legacy members gave up its share as
soon as it was registered (at its second JoinGroup) and the share waited for the round to end; (2) at a legacy
member's leave, it released first and deregistered after, so the classic round began only once its partitions
were unowned; (3) a partition moving between two cooperative members (withheld, revoked, handed over by a
follow-up rebalance), twice per run; and a move between two legacy members cost the successor's whole second
rebalance attempt after the release (20-120 ms). Now: (1) a cooperative newcomer is registered at the leader's
SyncGroup, whose hand-over waits for the legacy release, so the legacy members consume its share until then; (2)
a leaving fast member deregisters first and keeps consuming what goes to a classic member until the
coordinator's hand-over creates its hint znode (`/consumers/G/zkcoord-wanted/T/P`) and waits on the owner znode;
(3) the classic part of the legacy assignment is spread stickily among the cooperative members (each keeps what
it owns, counts at most one apart), so one partition moves between classic members per run (for balance, at
the last join) instead of two; (4) a fast legacy member that waited out a claim conflict claims again at once
when no group event came meanwhile, instead of re-reading the group. Under range over the combined sorted ids
the successive joins and leaves move {" ".join(map(str, moved))} of {args.partitions} partitions (mean
{statistics.mean(moved):.1f}; the sticky spread spares one of the two classic-to-classic ones). Traced after the
fix (load 9-11, 0.19 partition-s per member): a legacy-to-classic move is unowned 5-20 ms (the hand-over's own
ZooKeeper round trips and the SyncGroup answer), a legacy-to-legacy move about 20 ms; the largest item left is
the one balance move between two cooperative members (0.34 s: withheld, revoked, handed over by a follow-up
round that the other members learn of by heartbeat, heartbeat.interval.ms 200 here). (5) The first classic
member's registration no longer restarts its own rebalance (the bridge's watch let the first ids change after it
was set through, whatever it was): its share, released by the legacy members during the hand-over, waited for
a second generation (0.1-0.15 s of 3 partitions at load 10); now it is answered in the generation it joined.

The balance move, the largest item left then (0.23-0.35 s of one partition per run), is now handed on in the
same generation (#23): the recipient's SyncGroup answer is held until the giver's JoinGroup shows the partition
given up; that rejoin is answered in the current generation (Kafka's answer to a follower rejoining a Stable
group unchanged; here only its owned list shrank, to what it was assigned), the owner znode moves from the
giver's thread to the recipient's in one fenced multi-op, and the held answer carries it: no follow-up rebalance,
which the other members learned of only by heartbeat. A recipient new to the group is registered only at that
hand-on, so the legacy members consume what it takes from them until its answer can carry it (held from the
hand-over on, its other new partition stayed unheld as long as the moved one: 0.247 s for the join in a traced
run, against 0.308 before). Traced with both (load about 4-6): the giver revoked the partition at its SyncGroup
answer and rejoined 110 ms later (kafka-python's poll loop: the coordinator learns of the revocation only from
that JoinGroup), answered in place; 31 ms later (registration, the legacy member's release of the recipient's
other partition, the move) the recipient's answer carried both: 0.145 partition-s for the whole join.
"""
    print(body)
    if not args.no_report:
        write_section("mixed groups", body)
    if plain is not None:
        plain_report(plain, args, load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
