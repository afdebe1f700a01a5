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

import pytest
from kafka.admin import KafkaAdminClient

from e2e.classic_groups import (
    PARTITIONS,
    Consumed,
    Offsets,
    new_topic,
    produce,
    wait_stable,
)
from e2e.conftest import ServerProcess
from zkcoord.testing import wait_for
from zkcoord.testing.members import ClientMember, ConfluentMember, KafkaPythonMember

pytestmark = pytest.mark.e2e

RECORDS = 30_000
# Fast liveness so rebalances take well under a second; the server allows session timeouts down to 1 s.
SESSION_MS = 6000
HEARTBEAT_MS = 300
COMMIT_INTERVAL_MS = 200
LIVENESS = {
    "session_timeout_ms": SESSION_MS,
    "heartbeat_interval_ms": HEARTBEAT_MS,
    "auto_commit_interval_ms": COMMIT_INTERVAL_MS,
}


class KcatMember:
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


# A group member: the kit's kafka-python and confluent-kafka members consuming on their own thread, or kcat;
# `stop()` closes it cleanly (commit + leave).
Member = ClientMember | KcatMember


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
    run_group(server, "kp", lambda g, t, s: KafkaPythonMember(server.bootstrap, g, t, sink=s.add, **LIVENESS))


def test_confluent_kafka_group(server: ServerProcess) -> None:
    run_group(server, "ck", lambda g, t, s: ConfluentMember(server.bootstrap, g, t, sink=s.add, **LIVENESS))


def test_kcat_group(server: ServerProcess) -> None:
    run_group(server, "kcat", lambda g, t, s: KcatMember(server, g, t, s))
