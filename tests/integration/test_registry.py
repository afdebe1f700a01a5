"""The registry edge against real ZooKeeper: byte-exact znodes, Kafka's write primitives, duplicate broker
ids, leader lookup, and malformed data reported by path and left untouched."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.exceptions import BadVersionError

from zkcoord.errors import MalformedZnode
from zkcoord.legacy import TopicPartition, paths
from zkcoord.legacy.codecs import ConsumerRegistration, PartitionState
from zkcoord.zk import registry

pytestmark = pytest.mark.integration

TS = 1428512949385


def test_ensure_cluster_paths(zk: Any) -> None:
    created = registry.ensure_cluster_paths(zk)
    for path in created:
        assert zk.exists(path) is not None
    assert "/isr_change_notification" in created and "/consumers" in created
    assert registry.ensure_cluster_paths(zk, generation="0.8.2") == paths.PERSISTENT_PATHS_0_8_2
    with pytest.raises(ValueError, match="generation"):
        registry.ensure_cluster_paths(zk, generation="2.0")


def test_register_and_read_brokers(zk: Any, zk_client_factory: Any) -> None:
    assert registry.read_brokers(zk) == {}
    reg = registry.register_broker(zk, 2, "127.0.0.1", 9093, timestamp_ms=TS)
    registry.register_broker(zk, 10, "127.0.0.1", 9094, version=1, timestamp_ms=TS)
    data, stat = zk.get("/brokers/ids/2")
    assert data == (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://127.0.0.1:9093"],'
        b'"jmx_port":-1,"host":"127.0.0.1","timestamp":"1428512949385","port":9093,"version":4}'
    )
    assert stat.ephemeralOwner == zk.client_id[0]
    brokers = registry.read_brokers(zk)
    assert list(brokers) == [2, 10]
    assert brokers[2] == reg and brokers[10].version == 1
    # the same session registering again (a retried create) is fine; another session is a duplicate id
    registry.register_broker(zk, 2, "127.0.0.1", 9093, timestamp_ms=TS)
    other = zk_client_factory()
    with pytest.raises(registry.DuplicateBrokerId, match="already registered on the path /brokers/ids/2"):
        registry.register_broker(other, 2, "127.0.0.1", 9999, timestamp_ms=TS)
    assert zk.get("/brokers/ids/2")[0] == data
    # the registration is ephemeral
    zk.stop()
    zk.close()
    assert registry.read_brokers(other) == {}


def test_topics_and_partition_state(zk: Any) -> None:
    registry.write_topic(zk, "t1", {1: [2, 3], 0: [1, 2]})
    assert zk.get("/brokers/topics/t1")[0] == b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
    registry.write_topic(zk, "t1", {0: [1], 1: [1], 2: [1]})  # update in place (partition count grows)
    registry.write_topic(zk, "a", {0: [1]})
    topics = registry.read_topics(zk)
    assert list(topics) == ["a", "t1"]
    assert topics["t1"].partition_ids == [0, 1, 2]
    assert registry.read_partition_state(zk, "t1", 0) is None

    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    v0 = registry.write_partition_state(zk, "t1", 0, state)
    assert zk.get("/brokers/topics/t1/partitions/0/state")[0] == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    )
    found = registry.read_partition_state_versioned(zk, "t1", 0)
    assert found == (state, v0)
    moved = PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
    v1 = registry.write_partition_state(zk, "t1", 0, moved, version=v0)
    assert v1 == v0 + 1
    with pytest.raises(registry.ZnodeVersionConflict) as info:
        registry.write_partition_state(zk, "t1", 0, state, version=v0)
    assert isinstance(info.value, BadVersionError)
    assert registry.read_partition_state(zk, "t1", 0) == moved
    with pytest.raises(registry.ZnodeVersionConflict):
        registry.write_partition_state(zk, "t1", 9, state, version=0)


def test_leader_endpoint(zk: Any) -> None:
    with pytest.raises(registry.NoLeader, match="no partition state"):
        registry.leader_endpoint(zk, "t", 0)
    registry.write_partition_state(
        zk, "t", 0, PartitionState(leader=3, leader_epoch=0, isr=(3,), controller_epoch=1)
    )
    with pytest.raises(registry.NoLeader, match="not registered"):
        registry.leader_endpoint(zk, "t", 0)
    registry.register_broker(zk, 3, "127.0.0.1", 9095, timestamp_ms=TS)
    assert registry.leader_endpoint(zk, "t", 0) == ("127.0.0.1", 9095)
    registry.write_partition_state(
        zk, "t", 0, PartitionState(leader=-1, leader_epoch=1, isr=(), controller_epoch=1)
    )
    with pytest.raises(LookupError, match="no leader"):
        registry.leader_endpoint(zk, "t", 0)


def test_controller_reads(zk: Any) -> None:
    assert registry.read_controller(zk) is None
    assert registry.read_controller_epoch(zk) is None
    zk.create("/controller", b'{"version":1,"brokerid":4,"timestamp":"1"}', ephemeral=True)
    zk.create("/controller_epoch", b"7")
    controller = registry.read_controller(zk)
    assert controller is not None and controller.brokerid == 4
    assert registry.read_controller_epoch(zk) == (7, 0)
    zk.set("/controller", b"5")  # pre-0.8.1 bare integer
    controller = registry.read_controller(zk)
    assert controller is not None and controller.brokerid == 5 and controller.version == 0


def test_mark_topic_for_deletion(zk: Any) -> None:
    registry.mark_topic_for_deletion(zk, "t")
    assert zk.get("/admin/delete_topics/t")[0] == b""
    with pytest.raises(registry.TopicAlreadyMarkedForDeletion):
        registry.mark_topic_for_deletion(zk, "t")


def test_group_reads(zk: Any) -> None:
    reg = ConsumerRegistration.static({"t": 2}, timestamp_ms=TS)
    zk.create("/consumers/g/ids/g_c1", reg.encode(), makepath=True)
    zk.create("/consumers/g/owners/t/1", b"g_c1-0", makepath=True)
    zk.create("/consumers/g/owners/t/0", b"g_c1-1", makepath=True)
    zk.create("/consumers/g/offsets/t/10", b"42", makepath=True)
    zk.create("/consumers/g/offsets/t/2", b"7", makepath=True)
    zk.create("/consumers/h", b"", makepath=True)
    assert registry.list_groups(zk) == ["g", "h"]
    assert registry.group_exists(zk, "g") and not registry.group_exists(zk, "x")
    assert registry.read_registrations(zk, "g") == {"g_c1": reg}
    assert list(registry.read_owners(zk, "g").items()) == [(("t", 0), "g_c1-1"), (("t", 1), "g_c1-0")]
    assert list(registry.read_offsets(zk, "g").items()) == [(("t", 2), 7), (("t", 10), 42)]
    assert registry.read_offsets(zk, "h") == {}
    # The legacy code's one TopicPartition type, still unpackable as the (topic, partition) pair.
    owned = next(iter(registry.read_owners(zk, "g")))
    assert type(owned) is TopicPartition and owned.topic == "t" and owned.partition == 0
    assert type(next(iter(registry.read_offsets(zk, "g")))) is TopicPartition


@pytest.mark.parametrize(
    ("path", "data", "reader"),
    [
        ("/brokers/ids/1", b'{"version":0}', lambda c: registry.read_brokers(c)),
        ("/brokers/ids/x", b"{}", lambda c: registry.read_brokers(c)),
        ("/brokers/topics/t", b'{"partitions":{"a":[1]}}', lambda c: registry.read_topics(c)),
        ("/brokers/topics/t/partitions/0/state", b"{}", lambda c: registry.read_partition_state(c, "t", 0)),
        ("/controller", b"nope", lambda c: registry.read_controller(c)),
        ("/controller_epoch", b"x", lambda c: registry.read_controller_epoch(c)),
        ("/consumers/g/ids/m", b'{"pattern":"static"}', lambda c: registry.read_registrations(c, "g")),
        ("/consumers/g/offsets/t/0", b"12x", lambda c: registry.read_offsets(c, "g")),
        ("/consumers/g/offsets/t/zero", b"1", lambda c: registry.read_offsets(c, "g")),
        ("/consumers/g/owners/t/0", b"", lambda c: registry.read_owners(c, "g")),
    ],
)
def test_malformed_znodes_are_named_and_untouched(zk: Any, path: str, data: bytes, reader: Any) -> None:
    zk.create(path, data, makepath=True)
    before = zk.get(path)
    with pytest.raises(MalformedZnode) as info:
        reader(zk)
    assert info.value.path == path
    after = zk.get(path)
    assert after[0] == data and after[1].version == before[1].version and after[1].mzxid == before[1].mzxid
