"""`zkcoord legacy consume` members as real processes against `serve --zk`: members join and leave while a
producer keeps producing; together they print every record, with duplicates only from uncommitted windows."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from zkcoord.cli.legacy_consume import consume
from zkcoord.errors import ZkcoordError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.producers import PacedProducer
from zkcoord.zk.member import MemberStats, Message

pytestmark = pytest.mark.e2e

TOPIC = "legacy-consume"
GROUP = "console-group"
COMMIT_INTERVAL_MS = 200


class Member:
    """One `python -m zkcoord legacy consume` child; its stdout lines are collected by a pump thread."""

    def __init__(self, zk_connect: str, name: str, extra: tuple[str, ...] = ()) -> None:
        cmd = [sys.executable, "-m", "zkcoord", "legacy", "consume", "--zk", zk_connect, "--group", GROUP,
               "--topic", TOPIC, "--from-beginning",
               "--property", f"auto.commit.interval.ms={COMMIT_INTERVAL_MS}",
               "--property", "zookeeper.session.timeout.ms=6000", *extra]  # fmt: skip
        self.name = name
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        self.lines: list[bytes] = []
        self.stderr = b""
        self._pumps = [
            threading.Thread(target=self._pump_out, daemon=True),
            threading.Thread(target=self._pump_err, daemon=True),
        ]
        for t in self._pumps:
            t.start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip(b"\n"))

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def terminate(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        for t in self._pumps:
            t.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def node(zk_connect: str, tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node", ("--zk", zk_connect, "--node-id", "1", "--num.partitions=6", *FAST_GROUP_FLAGS)
    )
    with proc:
        yield proc
    proc.kill9()


def test_members_join_and_leave_while_producing(zk_connect: str, node: NodeProcess) -> None:
    producer = PacedProducer(node.bootstrap, TOPIC, per_second=200, limit=4000, prefix=b"v")
    members: list[Member] = []
    try:
        producer.burst(200)  # creates the 6-partition topic (and its /brokers/topics znode) with a backlog
        members += [Member(zk_connect, "a"), Member(zk_connect, "b")]
        producer.start()
        wait_for(lambda: all(m.lines for m in members), 30, "members a and b to print records", interval=0.1)
        members.append(Member(zk_connect, "c"))  # joins half way
        wait_for(lambda: bool(members[2].lines), 30, "member c to print records", interval=0.1)
        assert members[0].terminate() == 0, members[0].stderr.decode(errors="replace")
        a_printed = len(members[0].lines)
        # b and c take over a's partitions while records keep coming.
        mark = len(members[1].lines) + len(members[2].lines)
        wait_for(
            lambda: len(members[1].lines) + len(members[2].lines) > mark + 50,
            30,
            "b and c to keep consuming after a left",
            interval=0.1,
        )
        producer.stop()
        produced = set(producer.acked_values)
        assert len(produced) == producer.sent

        def printed() -> Counter[bytes]:
            return Counter(v for m in members for v in list(m.lines))

        wait_for(lambda: produced <= set(printed()), 30, "every produced record to be printed", interval=0.1)
        for m in members[1:]:
            assert m.terminate() == 0, m.stderr.decode(errors="replace")
    finally:
        for m in members:
            m.kill()
        with contextlib.suppress(Exception):
            producer.stop()

    counts = printed()
    assert set(counts) == produced  # nothing printed that was not produced
    assert a_printed > 0 and all(b"Processed a total of" in m.stderr for m in members)
    duplicates = sum(n - 1 for n in counts.values())
    # Three membership changes (b joining a, c joining, a leaving): a member commits what it consumed before it
    # releases, so a change can redeliver at most what was consumed since the last commit, i.e. at most one
    # commit interval of production per change.
    rate = producer.sent / max(producer.elapsed, 1e-3)
    bound = int(3 * rate * COMMIT_INTERVAL_MS / 1000.0) + 10
    assert duplicates <= bound, f"{duplicates} duplicates > bound {bound}"


def _run(zk_connect: str, *extra: str, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "zkcoord",
        "-v",
        "legacy",
        "consume",
        "--zk",
        zk_connect,
        "--group",
        "g2",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_max_messages_then_timeout_resume_from_the_commit(zk_connect: str, node: NodeProcess) -> None:
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=5)
    try:
        for i in range(30):
            producer.send("resume", value=b"r%d" % i)
        producer.flush(30)
    finally:
        producer.close(5)
    first = _run(zk_connect, "--topic", "resume", "--from-beginning", "--max-messages", "10")
    assert first.returncode == 0, first.stderr.decode(errors="replace")
    assert len(first.stdout.splitlines()) == 10
    assert b"Processed a total of 10 messages (max-messages)" in first.stderr
    # The exit committed what was printed: the next member resumes there (partitions the first one never read
    # have no offset and start at the beginning) and stops after 1.5 s without a record.
    second = _run(zk_connect, "--topic", "resume", "--from-beginning", "--timeout-ms", "1500")
    assert second.returncode == 0, second.stderr.decode(errors="replace")
    assert b"(timeout)" in second.stderr
    values = first.stdout.splitlines() + second.stdout.splitlines()
    assert sorted(values) == sorted(b"r%d" % i for i in range(30)), second.stderr.decode(errors="replace")


def test_bad_input_is_refused_before_joining(zk_connect: str) -> None:
    bad_topic = _run(zk_connect, "--topic", "no spaces")
    assert bad_topic.returncode == 2
    assert b"invalid topic 'no spaces': illegal characters ' '" in bad_topic.stderr
    bad_property = _run(zk_connect, "--topic", "t", "--property", "auto.commit.interval.ms")
    assert bad_property.returncode == 2 and b"expected KEY=VALUE" in bad_property.stderr
    conflicting = _run(
        zk_connect, "--topic", "t", "--from-beginning", "--property", "auto.offset.reset=largest"
    )
    assert conflicting.returncode == 2 and b"conflicts with" in conflicting.stderr
    unreachable = _run(
        "127.0.0.1:1", "--topic", "t", "--property", "zookeeper.connection.timeout.ms=1000", timeout=30
    )
    assert unreachable.returncode == 2
    assert b"cannot join group 'g2' through ZooKeeper '127.0.0.1:1'" in unreachable.stderr


class _NoLeaderYet(ZkcoordError):
    retriable = True


class _FakeMember:
    """Stands in for LegacyConsumer in consume(): hands out scripted results on a fake clock."""

    def __init__(self, script: list[Any], clock: list[float], timeout_ms: int = -1) -> None:
        self.script = script
        self.clock = clock
        self.config = LegacyConsumerConfig(
            group_id="g", zookeeper_connect="z", consumer_timeout_ms=timeout_ms, refresh_leader_backoff_ms=0
        )
        self.stats = MemberStats(last_error="DuplicateConsumerId: taken")

    def wait_stable(self, timeout: float) -> bool:
        return True

    def next_message(self, timeout: float | None) -> Message | None:
        item = self.script.pop(0) if self.script else "idle"
        if isinstance(item, BaseException):
            raise item
        if item == "idle":
            self.clock[0] += timeout or 0.0
            return None
        if item == "stopped":
            return None
        n = int(item)
        return Message("t", 0, n, None, None if n == 9 else b"v%d" % n)


def _consume(member: _FakeMember, clock: list[float], **kw: Any) -> tuple[int, str, bytes]:
    out = io.BytesIO()
    stop = kw.pop("stop", threading.Event())
    printed, reason = consume(member, out, stop=stop, monotonic=lambda: clock[0], **kw)  # type: ignore[arg-type]
    return printed, reason, out.getvalue()


def test_consume_loop_stop_reasons() -> None:
    clock = [0.0]
    assert _consume(_FakeMember([1, 2, 3], clock), clock, max_messages=2) == (2, "max-messages", b"v1\nv2\n")
    clock = [0.0]
    # consumer.timeout.ms: idle polls until 1 s passes without a record; a null value prints "null".
    printed = _consume(_FakeMember([1, "idle", 9, "idle"], clock, timeout_ms=1000), clock, max_messages=None)
    assert printed == (2, "timeout", b"v1\nnull\n") and clock[0] >= 1.0
    clock = [0.0]
    stopped = _consume(_FakeMember([1, "stopped"], clock), clock, max_messages=None)
    assert stopped == (1, "member stopped: DuplicateConsumerId: taken", b"v1\n")
    clock = [0.0]
    retried = _FakeMember([_NoLeaderYet("no leader yet"), 5], clock)
    assert _consume(retried, clock, max_messages=1) == (1, "max-messages", b"v5\n")
    with pytest.raises(ZkcoordError, match="fatal"):
        _consume(_FakeMember([ZkcoordError("fatal")], clock), clock, max_messages=1)
    stop = threading.Event()
    stop.set()
    assert _consume(_FakeMember([1], clock), clock, max_messages=None, stop=stop) == (0, "signal", b"")


def test_a_member_from_a_config_file_serves_its_metrics(
    zk_connect: str, node: NodeProcess, tmp_path: Path
) -> None:
    """`--config` supplies flags and a consumer property; `--metrics-listen` shows the member's ownership."""
    from prometheus_client.parser import text_string_to_metric_families

    from zkcoord.local.zookeeper import free_port

    producer = PacedProducer(node.bootstrap, TOPIC, per_second=200, limit=4000, prefix=b"v")
    producer.burst(20)  # the 6-partition topic
    conf = tmp_path / "consumer.properties"
    port = free_port()
    conf.write_text(f"metrics-listen=127.0.0.1:{port}\nmax-messages=25\nrebalance.backoff.ms=100\n")
    member = Member(zk_connect, "m", ("--config", str(conf)))

    def owned() -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                text = resp.read().decode()
        except OSError:
            return -1
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        return next((s.value for s in samples if s.name == "zkcoord_legacy_owned_partitions"), -1)

    try:
        wait_for(lambda: owned() == 6, 30, "the member's metrics to show its 6 partitions", interval=0.1)
        producer.burst(5)  # records 21..25: max-messages=25 from the file stops it by itself
        assert member.proc.wait(30) == 0
        for t in member._pumps:
            t.join(5)
    finally:
        member.kill()
        producer.stop()  # bursts only: the background thread never ran
    assert b"Processed a total of 25 messages (max-messages)" in member.stderr
