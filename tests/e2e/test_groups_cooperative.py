"""The coordinator's side of KIP-429 with real clients in a plain broker-protocol group: kafka-python's
CooperativeStickyAssignor and librdkafka's cooperative-sticky members joining and leaving revoke only the
partitions that move (seen through their rebalance callbacks, sampled every 10 ms), a partition is never held
by two members at once, and every produced record is consumed. An eager control group shows what the checks
catch: there every join revokes everything."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.conftest import ServerProcess
from zkcoord.testing import wait_for
from zkcoord.testing.handover import HandoverSampler
from zkcoord.topic_partition import TopicPartition

pytestmark = pytest.mark.e2e

PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 300


def new_topic(server: ServerProcess) -> str:
    topic = f"coop-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    return topic


class Member:
    """A client member on its own poll thread; `holdings` follows its rebalance callbacks, `events` records
    them in order as ("revoked" | "assigned" | "lost", partitions)."""

    name: str

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holdings: set[int] = set()
        self.events: list[tuple[str, frozenset[int]]] = []
        self.halt = threading.Event()
        self.errors: list[BaseException | str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def record(self, kind: str, partitions: set[int]) -> None:
        with self.lock:
            self.events.append((kind, frozenset(partitions)))
            if kind == "assigned":
                self.holdings |= partitions
            else:
                self.holdings -= partitions

    def held(self) -> frozenset[int]:
        with self.lock:
            return frozenset(self.holdings)

    def revoked(self) -> set[int]:
        with self.lock:
            return {p for kind, ps in self.events if kind != "assigned" for p in ps}

    def paused(self) -> set[int]:
        """Partitions this member gave up and was then assigned again: a gap in its holding of a partition it
        kept, read from its own callbacks (a sampler may miss one shorter than its interval)."""
        with self.lock:
            events = list(self.events)
        return {
            p
            for i, (kind, ps) in enumerate(events)
            if kind != "assigned"
            for p in ps
            if any(later == "assigned" and p in back for later, back in events[i + 1 :])
        }

    def _run(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(30)
        self.close()
        assert not self.thread.is_alive()
        assert not self.errors, self.errors

    def close(self) -> None:
        raise NotImplementedError


class KafkaPythonMember(Member):
    def __init__(self, server: ServerProcess, group: str, topic: str, cooperative: bool) -> None:
        super().__init__()
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        self.name = f"kp-{uuid.uuid4().hex[:6]}"
        self.consumer = KafkaConsumer(
            bootstrap_servers=server.bootstrap,
            group_id=group,
            client_id=self.name,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            fetch_max_wait_ms=100,
            partition_assignment_strategy=[
                CooperativeStickyAssignor if cooperative else RangePartitionAssignor
            ],
        )
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.record("revoked", {tp.partition for tp in revoked})

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.record("assigned", {tp.partition for tp in assigned})

            def on_partitions_lost(self, lost: Any) -> None:
                member.record("lost", {tp.partition for tp in lost})

        self.consumer.topics()  # metadata before the first join (see test_groups_clients.py)
        self.consumer.subscribe([topic], listener=Listener())
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.halt.is_set():
                self.consumer.poll(timeout_ms=100)
        except BaseException as exc:
            self.errors.append(exc)

    def close(self) -> None:
        self.consumer.close()


class ConfluentMember(Member):
    def __init__(self, server: ServerProcess, group: str, topic: str, cooperative: bool) -> None:
        super().__init__()
        self.name = f"ck-{uuid.uuid4().hex[:6]}"
        self.consumer = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": group,
                "client.id": self.name,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": "cooperative-sticky" if cooperative else "range",
                "fetch.wait.max.ms": 100,
            }
        )
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, ps: self.record("assigned", {p.partition for p in ps}),
            on_revoke=lambda _c, ps: self.record("revoked", {p.partition for p in ps}),
            on_lost=lambda _c, ps: self.record("lost", {p.partition for p in ps}),
        )
        self.thread.start()

    def _run(self) -> None:
        while not self.halt.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is not None:
                err = msg.error()
                if not err.retriable() and err.code() != -191:  # -191 = partition EOF
                    self.errors.append(str(err))

    def close(self) -> None:
        self.consumer.close()


CLIENTS = {"kafka-python": KafkaPythonMember, "librdkafka": ConfluentMember}


@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "eager-control"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_join_and_a_leave_revoke_only_what_moves(
    server: ServerProcess, client: str, cooperative: bool
) -> None:
    topic = new_topic(server)
    group = f"g-{uuid.uuid4().hex[:8]}"
    make = CLIENTS[client]
    members: list[Member] = []

    def holdings() -> dict[str, frozenset[TopicPartition]]:
        return {m.name: frozenset(TopicPartition(topic, p) for p in m.held()) for m in list(members)}

    def balanced(n: int) -> bool:
        held = [m.held() for m in members]
        return (
            len(members) == n
            and sorted(len(h) for h in held)
            == sorted(PARTITIONS // n + (i < PARTITIONS % n) for i in range(n))
            and set().union(*held) == set(range(PARTITIONS))
        )

    with HandoverSampler(None, group, {}, holdings=holdings) as sampler:
        try:
            members.append(make(server, group, topic, cooperative))
            wait_for(lambda: balanced(1), 30, "the first member to hold every partition")
            first = members[0]
            before = first.held()
            members.append(make(server, group, topic, cooperative))
            wait_for(lambda: balanced(2), 30, "two members to share the partitions")
            moved = before - first.held()
            members.append(make(server, group, topic, cooperative))
            wait_for(lambda: balanced(3), 30, "three members to share the partitions")
            moved |= before - first.held()
            leaving = members.pop(1)
            leaving.stop()
            wait_for(lambda: balanced(2), 30, "two members after one left")
            sampler.wait_samples(3, 10)
            if cooperative:
                # The first member gave up only what moved away from it, never took anything back, and
                # no member paused a partition it kept.
                assert first.revoked() == moved, first.events
                assert sampler.holding_gaps() == [], first.events
            else:
                # Eager: every join revokes everything the first member held, kept partitions included.
                assert first.revoked() == set(range(PARTITIONS)), first.events
                assert first.paused(), first.events  # kept partitions were revoked and assigned again
            assert sampler.held_twice() == []
            assert sampler.median_interval_s() <= 0.02
        finally:
            for m in members:
                m.stop()
