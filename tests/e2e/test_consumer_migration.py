"""Online migration between the classic and the consumer protocol (KIP-848) with real clients on one `zkcoord serve
--zk` node under a paced producer: a classic group of three kafka-python members (eager range), each in its own
process, is replaced one by one by confluent-kafka `group.protocol=consumer` members (the first one upgrades the
group; the classic members are hosted in the consumer group until they leave), then back: kafka-python members
join the consumer group and the consumer-protocol members leave one by one (the last one downgrades the group).
Every member prints its rebalance callbacks with a machine-wide monotonic clock; the observer replays them in time
order and requires that no partition is ever held by two members; every acknowledged record is consumed (0 lost);
librdkafka's admin client reports the group's type after each phase."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.member_lines import MemberProcess, Observer
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.producers import PacedProducer
from zkcoord.zk.session import ensure_chroot

pytestmark = pytest.mark.e2e

CONSUMER = Path(__file__).with_name("consumer_protocol_member_proc.py")
CLASSIC = Path(__file__).with_name("classic_member_proc.py")
PARTITIONS = 3


@pytest.fixture(scope="module")
def bootstrap(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    connect_string = ensure_chroot(zk_server.hosts, f"/zkcoord-tests/kip848mig-{uuid.uuid4().hex[:8]}")
    flags = ("--zk", connect_string, "--node-id", "1", f"--num.partitions={PARTITIONS}", *FAST_GROUP_FLAGS,
             "--group.consumer.session.timeout.ms=6000", "--group.consumer.heartbeat.interval.ms=250")  # fmt: skip
    proc = NodeProcess(tmp_path_factory.mktemp("kip848mig-node"), flags)
    proc.start()
    try:
        yield proc.bootstrap
    finally:
        proc.stop()


def test_classic_members_replaced_by_consumer_members_and_back_never_overlap_and_lose_nothing(
    bootstrap: str,
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic, group = f"mig-{tag}", f"mig-{tag}"
    observer = Observer()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(20)
    # ~200 records/s round the topic's partitions; remembers what was acknowledged.
    producer = PacedProducer(
        bootstrap, topic, per_second=200, round_robin=True, config={"acks": "all"}
    ).start()
    members: dict[str, MemberProcess] = {}

    def start(name: str, script: Path) -> None:
        members[name] = MemberProcess(str(script), [bootstrap, group, topic, name], name, observer)

    def settled(names: set[str], newcomer: str | None) -> bool:
        held = observer.holders()
        live = {m: held.get(m, set()) for m in names}
        covered = set().union(*live.values()) == set(range(PARTITIONS))
        return covered and (newcomer is None or bool(live[newcomer]))

    def settle(what: str, newcomer: str | None = None) -> None:
        wait_for(lambda: settled(set(members), newcomer), 30, what)

    def group_type() -> ConsumerGroupType:
        listed = admin.list_consumer_groups().result(20).valid
        (found,) = [g.type for g in listed if g.group_id == group]
        return found  # type: ignore[no-any-return]

    def member_ids() -> set[str]:
        described = admin.describe_consumer_groups([group])[group].result(20)
        return {m.client_id for m in described.members}

    try:
        wait_for(lambda: len(producer.acked) > 20, 20, "the producer's first acknowledgements")
        for name in ("k1", "k2", "k3"):
            start(name, CLASSIC)
            settle(f"classic {name} joined", name)
        assert group_type() == ConsumerGroupType.CLASSIC
        # Upgrade: each consumer-protocol member joins, then a classic member leaves.
        for new, old in (("n1", "k1"), ("n2", "k2"), ("n3", "k3")):
            start(new, CONSUMER)
            wait_for(lambda: group_type() == ConsumerGroupType.CONSUMER, 20, f"{new} upgraded the group")
            wait_for(lambda n=new: n in member_ids(), 20, f"{new} in the consumer group")
            settle(f"{new} joined beside the classic members")
            members.pop(old).leave()
            settle(f"{old} left, {new} took over", new)
        described = admin.describe_consumer_groups([group])[group].result(20)
        assert described.type == ConsumerGroupType.CONSUMER
        assert sorted(m.client_id for m in described.members) == ["n1", "n2", "n3"]
        # Downgrade: classic members join the consumer group, the consumer-protocol members leave; the last
        # one's leave converts the group back to a classic group.
        for new, old in (("k4", "n1"), ("k5", "n2"), ("k6", "n3")):
            start(new, CLASSIC)
            wait_for(lambda n=new: n in member_ids(), 20, f"classic {new} in the group")
            settle(f"classic {new} joined the consumer group")
            members.pop(old).leave()
            settle(f"{old} left, {new} took over", new)
        wait_for(lambda: group_type() == ConsumerGroupType.CLASSIC, 20, "the group downgraded to classic")
        described = admin.describe_consumer_groups([group])[group].result(20)
        assert described.type == ConsumerGroupType.CLASSIC
        assert sorted(m.client_id for m in described.members) == ["k4", "k5", "k6"]
        producer.stop()
        assert producer.failed == []
        wait_for(lambda: producer.acked <= observer.consumed, 30, "every acknowledged record consumed")
        assert len(producer.acked) > 500
        for name in list(members):  # every member's stream to its end, so the last replay has every line
            members.pop(name).leave()
        observer.holders()  # once more over every event, none still in flight
    finally:
        producer.stop()
        for m in members.values():
            m.leave()
