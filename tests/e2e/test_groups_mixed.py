"""One consumer group of kafka-python and confluent-kafka members sharing one assignment: whichever client is the
leader, the members between them own every partition exactly once, each client's own view of its assignment
matches the coordinator's (DescribeGroups), and each record produced afterwards is delivered by its owner."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from e2e.classic_groups import PARTITIONS, Consumed, assigned_partitions, new_topic, produce, wait_stable
from e2e.conftest import ServerProcess
from zkcoord.testing import wait_for
from zkcoord.testing.members import ConfluentMember, KafkaPythonMember

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("strategy", "leader"), [("range", "kafka-python"), ("roundrobin", "confluent-kafka")]
)
def test_mixed_group_shares_one_assignment(server: ServerProcess, strategy: str, leader: str) -> None:
    topic = new_topic(server, f"mixed-{strategy}")
    group = f"mixed-{strategy}-{uuid.uuid4().hex[:6]}"
    sinks = [Consumed() for _ in range(4)]
    kinds = [KafkaPythonMember, ConfluentMember]
    if leader == "confluent-kafka":
        kinds.reverse()
    members: list[Any] = [
        kinds[i % 2](server.bootstrap, group, topic, sink=sinks[i].add, assignor=strategy) for i in range(4)
    ]
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    started: list[Any] = []
    try:
        # The first member alone forms the group and stays its leader through the later joins, so the
        # assignment the others apply was computed by `leader`'s assignor.
        members[0].start()
        started.append(members[0])
        wait_stable(admin, group, 1)
        for m in members[1:]:
            m.start()
            started.append(m)
        described = wait_stable(admin, group, 4)
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] == strategy  # both client kinds agreed on one protocol
        owned = assigned_partitions(described)
        all_parts = sorted(p for ps in owned.values() for p in ps)
        assert all_parts == list(range(PARTITIONS))  # every partition, each exactly once
        assert sorted(len(ps) for ps in owned.values()) == [1, 1, 2, 2]  # balanced (range and roundrobin)
        by_client = {m["client_id"]: owned[m["member_id"]] for m in described["members"]}
        assert set(by_client) == {m.client_id for m in members}
        # each client applied what the leader (whichever kind it was) computed
        wait_for(
            lambda: all(sorted(m.held()) == by_client[m.client_id] for m in members),
            30,
            "every client's own assignment equals the coordinator's record of it",
            0.05,
        )
        assert all(by_client[m.client_id] for m in members)  # both kinds really share the partitions
        produced = produce(server, topic, 0, 6000)
        wait_for(
            lambda: set().union(*(s.offsets for s in sinks)) >= produced, 60, "all 6000 records consumed"
        )
        for m, sink in zip(members, sinks, strict=True):
            delivered_from = {p for p, _ in sink.offsets}
            assert delivered_from <= set(by_client[m.client_id]), (m.client_id, delivered_from)
        # no rebalance happened meanwhile: the same generation's assignment still holds
        assert assigned_partitions(dict(admin.describe_groups([group])[group])) == owned
    finally:
        for m in started:
            m.stop()
        admin.close()
