"""Consumer-protocol (KIP-848) members through `zkcoord proxy`, with Tansu holding the data: a mixed group of a
zkcoord legacy member (fetching from Tansu), a confluent-kafka `group.protocol=consumer` member and a kafka-python
classic member coordinated by the proxy under a paced producer writing to Tansu; the classic member leaves, then the
legacy member, and the consumer-protocol member takes its partitions; `migrate handoff` is then refused, naming the
consumer-protocol member (Tansu's coordinator has no ConsumerGroupHeartbeat). An observer (a look every 10 ms plus
its reads; median gap asserted <= 50 ms): no partition held twice (the legacy member's holdings and owner znodes,
the other members' rebalance callbacks), every acknowledged record read.

One Tansu for the module (node id 111), one proxy node.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import ANY as mock_any

import pytest

from e2e.proxies import ProxyProcess, read_exactly, tansu_group_members
from zkcoord.cli import main
from zkcoord.group import consumer_messages as gcm
from zkcoord.server import kafka_protocol as kp
from zkcoord.testing import SessionFault, wait_for, wait_until
from zkcoord.testing.members import KafkaPythonMember, LegacyMember, legacy_config
from zkcoord.testing.producers import PacedProducer
from zkcoord.testing.tansu import Tansu, register_in_zookeeper
from zkcoord.zk.handoff import Handoff, Phase, handoff_path, read_handoff, write_handoff

pytestmark = pytest.mark.timeout(150)

CONSUMER = Path(__file__).with_name("consumer_protocol_member_proc.py")
PARTITIONS = 4
COMMIT_INTERVAL_MS = 200


class ConsumerProcess:
    """consumer_protocol_member_proc.py (confluent-kafka, group.protocol=consumer) bootstrapped on the proxy: its
    callback lines kept as what it holds now, its records as (partition, offset)."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, name: str, read: Callable[[int, int], None]
    ) -> None:
        self.name = name
        self.held: frozenset[int] = frozenset()
        self.lines: list[str] = []
        self._read = read
        self.proc = subprocess.Popen(
            [sys.executable, str(CONSUMER), bootstrap, group, topic, name],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        self._pump = threading.Thread(target=self._pump_lines, daemon=True)
        self._pump.start()

    def _pump_lines(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            kind, _ns, *rest = text.rstrip("\n").split(" ", 2)
            self.lines.append(text)
            if kind == "M":
                p, o = rest[0].split()
                self._read(int(p), int(o))
                continue
            parts = {int(p) for p in (rest[0] if rest else "").split(",") if p}
            self.held = self.held | parts if kind == "A" else self.held - parts

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._pump.join(5)


def describe_consumer_groups(bootstrap: str, *groups: str) -> list[tuple[str, int]]:
    """(group, error code) of a ConsumerGroupDescribe v0 through the proxy's bootstrap (raw: kafka-python has no
    class for it)."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(kp.encode_consumer_group_request(5, "test", gcm.ConsumerGroupDescribeRequest(0, groups)))
        frame = read_exactly(sock, int.from_bytes(read_exactly(sock, 4), "big"))
    corr, resp = kp.decode_consumer_group_response(kp.CONSUMER_GROUP_DESCRIBE, 0, frame)
    assert corr == 5
    return [(g.group_id, g.error_code) for g in resp.groups]


def join_answer(bootstrap: str, group: str, topic: str) -> int:
    """The error code of a new member's first ConsumerGroupHeartbeat (epoch 0) through the proxy's bootstrap; a
    member admitted (before the proxy saw the hand-off) leaves at once (epoch -1), giving back what it was given."""
    host, _, port = bootstrap.rpartition(":")
    join = gcm.ConsumerGroupHeartbeatRequest(0, group, "", 0, rebalance_timeout_ms=30000,
                                             subscribed_topic_names=(topic,), topic_partitions=())  # fmt: skip
    with socket.create_connection((host, int(port)), timeout=10) as sock:

        def ask(corr: int, req: gcm.ConsumerGroupHeartbeatRequest) -> gcm.ConsumerGroupHeartbeatResponse:
            sock.sendall(kp.encode_consumer_group_request(corr, "test", req))
            frame = read_exactly(sock, int.from_bytes(read_exactly(sock, 4), "big"))
            return kp.decode_consumer_group_response(kp.CONSUMER_GROUP_HEARTBEAT, 0, frame)[1]

        resp = ask(6, join)
        if resp.error_code == 0 and resp.member_id:
            left = ask(7, gcm.ConsumerGroupHeartbeatRequest(0, group, resp.member_id, -1))
            assert left.error_code == 0, left
    return int(resp.error_code)


def test_a_consumer_protocol_member_in_a_mixed_group_through_the_proxy_takes_the_legacy_members_partitions(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path, capsys: Any
) -> None:
    topic, group = "kip848-orders", "mixed-kip848"
    tansu.create_topic(topic, PARTITIONS)
    everything = frozenset(range(PARTITIONS))
    with register_in_zookeeper(zk, tansu, {topic: PARTITIONS}):
        proxy = ProxyProcess(zk_connect, tmp_path / "proxy", "--bridge-zk-groups", "mixed-.*", "--bridge-zk-offsets",
                             "--group.consumer.heartbeat.interval.ms", "250",
                             "--group.consumer.session.timeout.ms", "6000")  # fmt: skip
        got: dict[tuple[int, int], int] = {}
        got_lock = threading.Lock()

        def read(partition: int, offset: int) -> None:
            with got_lock:
                got[(partition, offset)] = got.get((partition, offset), 0) + 1

        legacy: LegacyMember | None = LegacyMember(
            legacy_config(zk_connect, group, "legacy-1", rebalance_backoff_ms=200, rebalance_max_retries=50,
                          auto_commit_interval_ms=COMMIT_INTERVAL_MS),
            {topic: 1}, sink=read, poll_timeout_s=0.005,
        )  # fmt: skip
        consumer: ConsumerProcess | None = None
        classic: KafkaPythonMember | None = None
        producer = PacedProducer(tansu.bootstrap, topic, round_robin=True, config={"linger_ms": 2})
        overlaps: list[Any] = []
        looks: list[float] = []  # when the observer looked
        stop = threading.Event()
        legacy_prefix = f"{group}_legacy-1-"  # its owner znodes hold "<consumer id>-<thread>"

        def holdings() -> dict[str, frozenset[int]]:
            now: dict[str, frozenset[int]] = {}
            if legacy is not None:
                now["legacy"] = legacy.held()
            if consumer is not None:
                now["consumer"] = consumer.held
            if classic is not None:
                now["classic"] = classic.held()
            return now

        def observe() -> None:
            owners_path = f"/consumers/{group}/owners/{topic}"
            while not stop.wait(0.01):
                looks.append(time.monotonic())
                now = holdings()
                if sum(len(v) for v in now.values()) != len(frozenset().union(*now.values())):
                    overlaps.append(("two members", now))
                try:  # the owner znodes read at once (one round trip), not one after the other
                    pending = {
                        int(p): zk.get_async(f"{owners_path}/{p}") for p in zk.get_children(owners_path)
                    }
                    owners = {p: r.get(timeout=5)[0].decode() for p, r in pending.items()}
                except Exception:  # an owner znode deleted between the listing and the read
                    continue
                for name in ("consumer", "classic"):
                    taken = {
                        p: owners[p] for p in now.get(name, ()) if owners.get(p, "").startswith(legacy_prefix)
                    }
                    if taken:
                        overlaps.append(
                            (f"{name} holds partitions whose owner znode names the legacy member", taken)
                        )

        def settled(members: set[str]) -> Callable[[], bool]:
            """Exactly these members hold something, every partition held, every record acknowledged when the
            wait began read."""
            mark = producer.ends()

            def done() -> bool:
                now = holdings()
                if {m for m, held in now.items() if held} != members or frozenset().union(
                    *now.values()
                ) != everything:
                    return False
                with got_lock:
                    return all((p, end - 1) in got for p, end in mark.items())

            return done

        def wait(done: Callable[[], bool], what: str, timeout: float = 45) -> None:
            try:
                wait_for(done, timeout, what, 0.02)
            except SessionFault as exc:
                raise AssertionError(
                    f"{exc}: held {holdings()}; proxy: {''.join(proxy.lines[-15:])}"
                ) from None

        observer = threading.Thread(target=observe, daemon=True)
        began = time.monotonic()
        try:
            producer.start()
            legacy.start()
            observer.start()
            wait(settled({"legacy"}), "the legacy member holds every partition")
            consumer = ConsumerProcess(proxy.bootstrap, group, topic, "kip848-1", read)
            wait(settled({"legacy", "consumer"}), "the consumer-protocol member joined the legacy member")
            classic = KafkaPythonMember(
                proxy.bootstrap, group, topic, "kafka-python-1", heartbeat_interval_ms=300,
                auto_commit_interval_ms=COMMIT_INTERVAL_MS, sink=read, poll_timeout_s=0.02,
                config={"retry_backoff_ms": 100, "reconnect_backoff_max_ms": 500},
            ).start()  # fmt: skip
            wait(settled({"legacy", "consumer", "classic"}), "three generations in one group")
            # A Describe naming the coordinated group and another: the proxy answers both (the mixed group
            # described, as `serve` describes it; the other group's coordinator is asked alone).
            assert describe_consumer_groups(proxy.bootstrap, group, "elsewhere") == [
                (group, kp.ErrorCode.NONE), ("elsewhere", kp.ErrorCode.NOT_COORDINATOR)]  # fmt: skip
            # The classic member leaves, then the legacy member: the consumer-protocol member takes everything.
            classic.stop()
            classic = None
            wait(settled({"legacy", "consumer"}), "the classic member left")
            legacy_had = legacy.held()
            assert legacy_had
            legacy.stop()
            legacy = None
            wait(
                settled({"consumer"}),
                "the legacy member left: the consumer-protocol member took its partitions",
            )
            assert consumer.held == everything
            assert tansu_group_members(tansu, group) == 0  # nothing reached Tansu's own coordinator
            # The hand-off is refused while a consumer-protocol member is in the group (Tansu's coordinator has no
            # ConsumerGroupHeartbeat), naming it; nothing is written.
            code = main(["migrate", "handoff", "--zk", zk_connect, "--group", group,
                         "--state-dir", str(tmp_path / "state"), "--timeout-ms", "10000"])  # fmt: skip
            err = capsys.readouterr().err
            assert code == 2, err
            assert "1 consumer-protocol (KIP-848) member(s)" in err and "kip848-1" in err, err
            assert zk.exists(handoff_path(group)) is None  # no hand-off begun: nothing written
            # A hand-off already releasing when the member joined (written here as such a run leaves it): the
            # proxy admits no new consumer-protocol member, and the resumed run refuses before `forwarding`.
            write_handoff(zk, Handoff(group, Phase.RELEASING, int(time.time() * 1000), 1), -1)
            wait(lambda: join_answer(proxy.bootstrap, group, topic) == kp.ErrorCode.NOT_COORDINATOR,
                 "a consumer-protocol join refused while releasing")  # fmt: skip
            code = main(["migrate", "handoff", "--zk", zk_connect, "--group", group,
                         "--state-dir", str(tmp_path / "state"), "--timeout-ms", "10000"])  # fmt: skip
            err = capsys.readouterr().err
            assert code == 2 and "kip848-1" in err and "run again to resume the hand-off" in err, err
            assert read_handoff(zk, group)[0] == Handoff(group, Phase.RELEASING, mock_any, 1)
            zk.delete(handoff_path(group))  # the way back while releasing: the member carries on
            wait(settled({"consumer"}), "the consumer-protocol member holding everything again")
            producer.stop()
            ends = producer.ends()
            wait(lambda: all((p, e - 1) in got for p, e in ends.items()), "every record read")
        finally:
            stop.set()
            observer.join(5)
            watched_s = time.monotonic() - began
            producer.stop()
            for member in (classic, consumer, legacy):
                if member is not None:
                    member.stop()
            proxy.stop()
        assert producer.failed == []
        assert overlaps == [], overlaps[:5]
        gaps = sorted(b - a for a, b in itertools.pairwise(looks))
        assert len(looks) > 100 and gaps[len(gaps) // 2] <= 0.05, gaps[-5:]  # a look every <= 50 ms (median)
        assert set(got) == {(p, o) for p, end in ends.items() for o in range(end)}  # nothing lost
        print(f"kip848 through the proxy: {len(got)} records, {sum(n - 1 for n in got.values())} read again, "
              f"{len(looks)} looks in {watched_s:.1f} s, gap median {gaps[len(gaps) // 2] * 1000:.0f} ms, "
              f"p99 {gaps[len(gaps) * 99 // 100] * 1000:.0f} ms, max {gaps[-1] * 1000:.0f} ms")  # fmt: skip


def test_the_proxy_takes_topic_ids_from_the_cluster(tansu: Tansu) -> None:
    """A consumer-protocol assignment names topics by the ids the members' Metadata (forwarded to the cluster)
    shows: the proxy's lookup gives Tansu's own ids (what kafka-python's admin client reads there), None for a
    topic the cluster does not have, and asks again once an answer is REFRESH_S old."""
    from kafka.admin import KafkaAdminClient

    from zkcoord.proxy import topics as proxy_topics

    tansu.create_topic("kip848-ids", 3)
    admin = KafkaAdminClient(bootstrap_servers=tansu.bootstrap)
    try:
        (described,) = admin.describe_topics(["kip848-ids"])
    finally:
        admin.close()
    clock = [0.0]

    async def scenario() -> None:
        known = proxy_topics.ClusterTopics(lambda: ("127.0.0.1", tansu.port), clock=lambda: clock[0])
        known.start()
        try:
            assert known.lookup("kip848-ids") is None  # not asked yet: asked in the background
            await known.fetch(["kip848-ids", "kip848-absent"])
            assert known.lookup("kip848-ids") == (described["topic_id"].replace("-", ""), 3)
            assert known.lookup("kip848-absent") is None and known.known("kip848-absent")
            assert known._task is None  # a fresh answer: nothing asked
            clock[0] += proxy_topics.REFRESH_S + 0.1
            assert known.lookup("kip848-ids") is not None  # the cached answer, and asked again
            # the lookup scheduled a request on the loop from its thread: the cluster is asked again
            await wait_until(
                lambda: known._cache["kip848-ids"][0] == clock[0], 10, "the refresh of kip848-ids"
            )
        finally:
            known.close()

    asyncio.run(scenario())


def test_a_consumer_protocol_client_of_a_group_the_proxy_does_not_coordinate_is_told_why(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """A group.protocol=consumer client of a group the proxy does not coordinate: its ConsumerGroupHeartbeat would go
    to Tansu, which does not list the API (the proxy lists it for its own groups) and closes the connection on one;
    the proxy answers UNSUPPORTED_VERSION with the reason instead, which librdkafka reports as a fatal error, as it
    reports a cluster without the API (the client is told at once instead of reconnecting without end)."""
    from confluent_kafka import Consumer, KafkaError

    topic = "kip848-plain"
    tansu.create_topic(topic, 1)
    with register_in_zookeeper(zk, tansu, {topic: 1}):
        proxy = ProxyProcess(zk_connect, tmp_path / "proxy", "--bridge-zk-groups", "mixed-.*")
        errors: list[Any] = []
        consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "plain-kip848",
                             "group.protocol": "consumer", "error_cb": errors.append})  # fmt: skip
        try:
            consumer.subscribe([topic])

            def reported() -> bool:  # through error_cb or as an error event from poll
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is not None:
                    errors.append(msg.error())
                return bool(errors)

            wait_for(reported, 30, "librdkafka's error report", 0)
        finally:
            consumer.close()
            proxy.stop()
        # librdkafka: "Fatal error: Broker: API version not supported: ConsumerGroupHeartbeat fatal error: ..."
        assert any(
            e.code() == KafkaError._FATAL
            and "ConsumerGroupHeartbeat" in e.str()
            and "not supported" in e.str()
            for e in errors
        ), [e.str() for e in errors]
        assert tansu_group_members(tansu, "plain-kip848") == 0
