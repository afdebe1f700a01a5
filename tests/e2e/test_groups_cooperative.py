"""The coordinator's side of KIP-429 with real clients in a plain broker-protocol group: kafka-python's
CooperativeStickyAssignor and librdkafka's cooperative-sticky members joining and leaving revoke only the
partitions that move (seen through their rebalance callbacks, sampled every 10 ms), a partition is never held
by two members at once, and every produced record is consumed. An eager control group shows what the checks
catch: there every join revokes everything."""

from __future__ import annotations

import functools
import uuid

import pytest

from e2e.classic_groups import PARTITIONS, new_topic
from e2e.conftest import ServerProcess
from zkcoord.testing import wait_for
from zkcoord.testing.handover import HandoverSampler
from zkcoord.testing.members import ClientMember, ConfluentMember, KafkaPythonMember
from zkcoord.topic_partition import TopicPartition

pytestmark = pytest.mark.e2e

SESSION_MS = 6000
HEARTBEAT_MS = 300


def joined(
    kind: type[ClientMember], server: ServerProcess, group: str, topic: str, cooperative: bool
) -> ClientMember:
    """A member polling on its own thread; `held()` follows its rebalance callbacks, `events` records them."""
    assignor = "cooperative-sticky" if cooperative else "range"
    return kind(
        server.bootstrap,
        group,
        topic,
        assignor=assignor,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    ).start()


CLIENTS = {"kafka-python": KafkaPythonMember, "librdkafka": ConfluentMember}


@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "eager-control"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_join_and_a_leave_revoke_only_what_moves(
    server: ServerProcess, client: str, cooperative: bool
) -> None:
    topic = new_topic(server, "coop")
    group = f"g-{uuid.uuid4().hex[:8]}"
    make = functools.partial(joined, CLIENTS[client])
    members: list[ClientMember] = []

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
