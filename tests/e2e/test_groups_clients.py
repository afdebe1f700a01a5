"""Real consumer groups on a zkcoord node: kafka-python, confluent-kafka and kcat each run a 3-member group that
consumes 30,000 records across a member leaving and another joining, with every record delivered and the
committed offsets (watched by a separate admin client throughout) never going backwards."""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.conftest import ServerProcess
from zkcoord.testing import wait_for
from zkcoord.zk.session import SessionFault

pytestmark = pytest.mark.e2e

PARTITIONS = 6
RECORDS = 30_000
# Fast liveness so rebalances take well under a second; the server allows session timeouts down to 1 s.
SESSION_MS = 6000
HEARTBEAT_MS = 300
COMMIT_INTERVAL_MS = 200

Offsets = set[tuple[int, int]]


def new_topic(server: ServerProcess, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    return topic


def produce(server: ServerProcess, topic: str, start: int, count: int) -> Offsets:
    """Produce `count` records round-robin over the partitions; returns every acknowledged (partition, offset)."""
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    acked: Offsets = set()
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.add((msg.partition(), msg.offset()))

    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, value=b"r%d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, failed[:3]
    assert len(acked) == count
    return acked


class Consumed:
    """What a group's members received, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.offsets: Offsets = set()
        self.deliveries = 0

    def add(self, partition: int, offset: int) -> None:
        with self.lock:
            self.offsets.add((partition, offset))
            self.deliveries += 1

    def covers(self, wanted: Offsets) -> bool:
        with self.lock:
            return wanted <= self.offsets


class Member:
    """One group member consuming in its own thread (or process); `stop()` closes it cleanly (commit + leave)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class KafkaPythonMember(Member):
    def __init__(
        self, server: ServerProcess, group: str, topic: str, sink: Consumed, strategy: str = ""
    ) -> None:
        self.sink = sink
        self.halt = threading.Event()
        self.errors: list[BaseException] = []
        extra: dict[str, Any] = {}
        if strategy:
            from kafka.coordinator.assignors.range import RangePartitionAssignor
            from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

            extra["partition_assignment_strategy"] = [
                {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]
            ]
        self.client_id = f"kp-{uuid.uuid4().hex[:6]}"
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=server.bootstrap,
            group_id=group,
            client_id=self.client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=COMMIT_INTERVAL_MS,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            fetch_max_wait_ms=100,
            **extra,
        )
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        # Metadata before the first join: kafka-python 3.0.12 otherwise rejoins at its first metadata update and
        # can lose that join for good with 100 ms polls (docs/cluster.md, "The failover benchmark's first-join
        # hang"); a member stuck so is timed out and the group does not settle.
        self.consumer.topics()
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.halt.is_set():
                for records in self.consumer.poll(timeout_ms=100).values():
                    for r in records:
                        self.sink.add(r.partition, r.offset)
        except BaseException as exc:  # surfaced by stop()
            self.errors.append(exc)

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(30)
        self.consumer.close()  # commits the consumed positions, then LeaveGroup
        assert not self.thread.is_alive()
        assert not self.errors, self.errors


class ConfluentMember(Member):
    def __init__(
        self, server: ServerProcess, group: str, topic: str, sink: Consumed, strategy: str = "range"
    ) -> None:
        self.sink = sink
        self.halt = threading.Event()
        self.errors: list[str] = []
        self.assigned: set[int] = set()
        self.client_id = f"ck-{uuid.uuid4().hex[:6]}"
        self.consumer = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": group,
                "client.id": self.client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": COMMIT_INTERVAL_MS,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": strategy,
                "fetch.wait.max.ms": 100,
            }
        )
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            self.assigned = {p.partition for p in parts}

        def on_revoke(_c: Any, _parts: list[Any]) -> None:
            self.assigned = set()

        self.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        self.thread.start()

    def _run(self) -> None:
        while not self.halt.is_set():
            msg = self.consumer.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if not err.retriable() and err.code() != -191:  # -191 = partition EOF
                    self.errors.append(str(err))
                continue
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            self.sink.add(partition, offset)

    def assignment(self) -> set[int]:
        return set(self.assigned)

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(30)
        self.consumer.close()  # commits stored offsets, then LeaveGroup
        assert not self.thread.is_alive()
        assert not self.errors, self.errors


class KcatMember(Member):
    """`kcat -G` as a subprocess printing "partition offset" per message; SIGTERM makes it commit and leave."""

    def __init__(self, server: ServerProcess, group: str, topic: str, sink: Consumed) -> None:
        self.sink = sink
        self.cmd = [
            "kcat",
            "-b",
            server.bootstrap,
            "-G",
            group,
            # Not `-o beginning`: in -G mode kcat applies -o at every assignment, which would ignore the
            # group's committed offsets; the reset policy applies only where nothing is committed.
            "-X",
            "auto.offset.reset=earliest",
            "-u",
            "-q",
            "-f",
            "%p %o\\n",
            "-X",
            f"session.timeout.ms={SESSION_MS}",
            "-X",
            f"heartbeat.interval.ms={HEARTBEAT_MS}",
            "-X",
            f"auto.commit.interval.ms={COMMIT_INTERVAL_MS}",
            "-X",
            "fetch.wait.max.ms=100",
            topic,
        ]
        self.proc: subprocess.Popen[str] | None = None
        self.stderr: list[str] = []
        self.bad_lines: list[str] = []

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        proc = self.proc

        def read_out() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    self.sink.add(int(parts[0]), int(parts[1]))
                else:
                    self.bad_lines.append(line)

        def read_err() -> None:
            assert proc.stderr is not None
            self.stderr.extend(proc.stderr)

        self.readers = [threading.Thread(target=f, daemon=True) for f in (read_out, read_err)]
        for t in self.readers:
            t.start()

    def stop(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("kcat did not stop on SIGTERM:\n" + "".join(self.stderr[-20:])) from None
        for t in self.readers:
            t.join(10)
        assert not self.bad_lines, self.bad_lines[:5]


class CommitWatcher:
    """Polls the group's committed offsets (OffsetFetch from a separate admin client) and keeps every change."""

    def __init__(self, server: ServerProcess, group: str, topic: str) -> None:
        self.group = group
        self.topic = topic
        self.admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        self.history: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.polls = 0
        self.errors: list[BaseException] = []
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CommitWatcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.thread.join(30)
        self.admin.close()

    def committed(self) -> dict[int, int]:
        found = self.admin.list_group_offsets({self.group: None}).get(self.group, {})
        return {
            tp.partition: om.offset for tp, om in found.items() if tp.topic == self.topic and om.offset >= 0
        }

    def latest(self) -> dict[int, int]:
        return {p: seen[-1] for p, seen in self.history.items() if seen}

    def _run(self) -> None:
        while not self.halt.is_set():
            try:
                now = self.committed()
            except BaseException as exc:
                self.errors.append(exc)
                return
            self.polls += 1
            for p, offset in now.items():
                seen = self.history[p]
                if not seen or seen[-1] != offset:
                    seen.append(offset)
            self.halt.wait(0.05)

    def assert_monotonic(self) -> None:
        assert not self.errors, self.errors
        for p, seen in self.history.items():
            assert seen == sorted(seen), f"partition {p}: committed offset went backwards: {seen}"


def wait_stable(
    admin: KafkaAdminClient,
    group: str,
    members: int,
    timeout: float = 60,
    server: ServerProcess | None = None,
) -> dict[str, Any]:
    """Wait until the group is Stable with `members` members that between them own every partition once; on
    timeout, fail with the group's last description and the coordinator's log of the group (from `server`)."""
    found: dict[str, Any] = {}

    def ready() -> bool:
        nonlocal found
        found = dict(admin.describe_groups([group])[group])
        if found["group_state"] != "Stable" or len(found["members"]) != members:
            return False
        owned = assigned_partitions(found)
        return sorted(p for ps in owned.values() for p in ps) == list(range(PARTITIONS))

    try:
        wait_for(ready, timeout, f"group {group} Stable with {members} members covering all partitions", 0.1)
    except SessionFault as exc:
        told = "".join(line for line in list(server.output) if group in line) if server is not None else ""
        raise AssertionError(f"{exc}\nlast description: {found}\ncoordinator log:\n{told}") from exc
    return found


def assigned_partitions(group: dict[str, Any]) -> dict[str, list[int]]:
    """member id -> partitions of its assignment (DescribeGroups, decoded by kafka-python's admin client)."""
    out: dict[str, list[int]] = {}
    for m in group["members"]:
        parts = (m.get("member_assignment") or {}).get("assigned_partitions") or []
        out[m["member_id"]] = sorted(p for t in parts for p in t["partitions"])
    return out


def diagnose(
    admin: KafkaAdminClient,
    group: str,
    produced: Offsets,
    sink: Consumed,
    watcher: CommitWatcher,
    members: list[Member],
) -> str:
    """What is missing, per partition, with the group's state: for a failure message."""
    missing: dict[int, list[int]] = {}
    with sink.lock:
        for p, o in sorted(produced - sink.offsets):
            missing.setdefault(p, []).append(o)
    lines = [f"missing per partition: { {p: (len(os), os[:3]) for p, os in missing.items()} }"]
    lines.append(f"committed: {watcher.latest()}")
    try:
        lines.append(f"group: {admin.describe_groups([group])[group]}")
    except Exception as exc:
        lines.append(f"describe failed: {exc!r}")
    for m in members:
        if isinstance(m, KcatMember):
            lines.append(f"kcat stderr: {''.join(m.stderr[-15:])}")
    return "\n".join(lines)


def end_offsets(produced: Offsets) -> dict[int, int]:
    ends: dict[int, int] = {}
    for p, o in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


def run_group(server: ServerProcess, prefix: str, make: Callable[[str, str, Consumed], Member]) -> None:
    topic = new_topic(server, prefix)
    group = f"{prefix}-group-{uuid.uuid4().hex[:6]}"
    sink = Consumed()
    produced = produce(server, topic, 0, RECORDS // 3)
    members = [make(group, topic, sink) for _ in range(3)]
    started: list[Member] = []
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        with CommitWatcher(server, group, topic) as watcher:
            for m in members:
                m.start()
                started.append(m)
            wait_stable(admin, group, 3, server=server)
            wait_for(lambda: sink.deliveries >= 1000, 60, "the 3-member group consumes")
            produced |= produce(server, topic, RECORDS // 3, RECORDS // 3)
            # one member leaves (commit + LeaveGroup), another joins
            leaving = started.pop(0)
            leaving.stop()
            wait_stable(admin, group, 2, server=server)
            joining = make(group, topic, sink)
            joining.start()
            started.append(joining)
            produced |= produce(server, topic, 2 * RECORDS // 3, RECORDS - 2 * (RECORDS // 3))
            wait_stable(admin, group, 3, server=server)
            try:
                wait_for(lambda: sink.covers(produced), 90, f"all {RECORDS} records consumed")
            except Exception as exc:
                raise AssertionError(diagnose(admin, group, produced, sink, watcher, started)) from exc
            ends = end_offsets(produced)
            wait_for(lambda: watcher.latest() == ends, 30, "commits reach the end of every partition")
            polls = watcher.polls
            wait_for(lambda: watcher.polls >= polls + 3, 30, "a few more samples of the final offsets")
            for m in started:
                m.stop()
            started.clear()
        watcher.assert_monotonic()
        assert watcher.polls >= 10
        assert sum(len(h) for h in watcher.history.values()) > PARTITIONS  # offsets were seen moving
        assert sink.offsets == produced  # every record delivered, nothing that was not produced
        # Members taking over a partition resume from its committed offset: re-deliveries are limited to
        # what was consumed but not yet committed when ownership moved (a lost commit would replay it all).
        assert sink.deliveries < RECORDS * 1.3, sink.deliveries
        assert len(produced) == RECORDS
    finally:
        for m in started:
            with contextlib.suppress(AssertionError):
                m.stop()
        admin.close()


def test_kafka_python_group(server: ServerProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(
        logging.INFO, logger="kafka.coordinator"
    )  # the members' view of each rebalance, on failure
    run_group(server, "kp", lambda g, t, s: KafkaPythonMember(server, g, t, s))


def test_confluent_kafka_group(server: ServerProcess) -> None:
    run_group(server, "ck", lambda g, t, s: ConfluentMember(server, g, t, s))


def test_kcat_group(server: ServerProcess) -> None:
    run_group(server, "kcat", lambda g, t, s: KcatMember(server, g, t, s))
