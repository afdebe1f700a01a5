"""read_members and repair on a real ZooKeeper: a legacy member and a bridged classic member side by side."""

from __future__ import annotations

import json

from zkcoord.bridge.membership import read_members, repair
from zkcoord.bridge.mixed_policy import (
    ClassicMember,
    MemberView,
    consumer_id_for,
    encode_classic_registration,
    thread_for,
)
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import ConsumerRegistration
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import registry


def test_read_members_by_protocol_and_repair(zk) -> None:  # type: ignore[no-untyped-def]
    group = "g1"
    legacy = "g1_host-1-abcdef01"
    reg = ConsumerRegistration.static({"t": 1}, timestamp_ms=1).encode()
    zk.create(paths.id_path(group, legacy), reg, makepath=True, ephemeral=True)
    classic = consumer_id_for(group, "kafka-python-abc")
    data = encode_classic_registration(ClassicMember("kafka-python-abc", "kp", ("t",)), 2)
    zk.create(paths.id_path(group, classic), data, makepath=True)
    zk.create(paths.owner_path(group, "t", 0), f"{legacy}-0".encode(), makepath=True, ephemeral=True)
    zk.create(paths.owner_path(group, "t", 1), thread_for(classic).encode(), makepath=True)
    zk.create(paths.owner_path(group, "t", 2), thread_for(classic).encode(), makepath=True)

    # the classic member's registration is one a 0.8 reader parses: extra key ignored
    parsed = registry.read_registrations(zk, group)
    assert parsed[classic].topic_counts == {"t": 1}
    assert json.loads(data)["zkcoord"] == {
        "protocol": "classic",
        "member_id": "kafka-python-abc",
        "client_id": "kp",
    }

    views = {v.consumer_id: v for v in read_members(zk, group)}
    assert views == {
        legacy: MemberView(legacy, "legacy", (TopicPartition("t", 0),)),
        classic: MemberView(classic, "classic", (TopicPartition("t", 1), TopicPartition("t", 2))),
    }
    deleted = repair(zk, group)
    assert sorted(deleted) == sorted(
        [paths.owner_path(group, "t", 1), paths.owner_path(group, "t", 2), paths.id_path(group, classic)]
    )
    assert [v.consumer_id for v in read_members(zk, group)] == [legacy]


def test_migrate_repair_lists_first_and_deletes_only_with_force(zk, zk_connect, capsys) -> None:  # type: ignore[no-untyped-def]
    from zkcoord.cli import main

    group = "g2"
    legacy = "g2_host-1-abcdef01"
    reg = ConsumerRegistration.static({"t": 1}, timestamp_ms=1).encode()
    zk.create(paths.id_path(group, legacy), reg, makepath=True, ephemeral=True)
    zk.create(paths.owner_path(group, "t", 0), f"{legacy}-0".encode(), makepath=True, ephemeral=True)
    classic = consumer_id_for(group, "rdkafka-1")
    zk.create(
        paths.id_path(group, classic),
        encode_classic_registration(ClassicMember("rdkafka-1", "ck", ("t",)), 2),
        makepath=True,
    )
    zk.create(paths.owner_path(group, "t", 1), thread_for(classic).encode(), makepath=True)

    assert main(["migrate", "repair", "--zk", zk_connect, "--group", group]) == 0
    out = capsys.readouterr().out
    assert f"classic member {classic} holds t-1" in out and "not repaired" in out
    assert zk.exists(paths.owner_path(group, "t", 1)) is not None  # listing deletes nothing

    assert main(["migrate", "repair", "--zk", zk_connect, "--group", group, "--force"]) == 0
    assert "deleted 2 znode(s)" in capsys.readouterr().out
    assert (
        zk.exists(paths.owner_path(group, "t", 1)) is None
        and zk.exists(paths.id_path(group, classic)) is None
    )
    assert [v.consumer_id for v in read_members(zk, group)] == [legacy]  # the legacy member is untouched
    assert main(["migrate", "repair", "--zk", zk_connect, "--group", group]) == 0
    assert "nothing to repair" in capsys.readouterr().out
