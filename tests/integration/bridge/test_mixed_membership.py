"""read_members and repair on a real ZooKeeper: a legacy member and a bridged classic member side by side."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from zkcoord.bridge.membership import MixedGroupBridge, read_members, repair
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
        "group_protocol": "classic",
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


def test_a_restarted_coordinator_reads_each_members_kind_and_restores_only_consumer_members(
    zk: Any, zk_connect: str
) -> None:
    """The kind is written where each member is registered (early for a consumer-protocol member, at the hand-over
    for a classic one) and read back by the next coordinator: the classic member that is not in the loaded group
    (it left before the crash) is not restored, so its partitions are not fenced for a consumer session."""
    from zkcoord.server import mixed_decisions as md

    group = "g3"
    registry.write_topic(zk, "t", {p: [1] for p in range(4)})

    async def first() -> dict[str, bytes]:
        bridge = MixedGroupBridge(zk_connect, group, hand_over_timeout_ms=500)
        await bridge.start()
        try:
            await bridge.preregister(group, ("cons-1", "ck", ("t",)), md.CONSUMER_KIND)
            members = [("cons-1", "ck", ("t",)), ("kp-1", "kp", ("t",))]
            return await bridge.assign(group, "range", members, 500, owned={"cons-1": ()})
        finally:
            await bridge.close()

    async def restarted() -> Any:
        bridge = MixedGroupBridge(zk_connect, group, hand_over_timeout_ms=500)
        await bridge.start()
        try:
            return await bridge.adopted_members(group)
        finally:
            await bridge.close()

    assigned = asyncio.run(first())
    assert sorted(assigned) == ["cons-1", "kp-1"]
    # Both registrations are what a 0.8 member reads: one stream of t each, whatever the kind.
    parsed = registry.read_registrations(zk, group)
    assert sorted(r.topic_counts["t"] for r in parsed.values()) == [1, 1]
    adopted = asyncio.run(restarted())
    assert {mid: (a[0], a[3]) for mid, a in adopted.items()} == {
        "cons-1": ("ck", "consumer"),
        "kp-1": ("kp", "classic"),
    }
    assert all(a[2] for a in adopted.values())  # both hold partitions: the kind alone decides
    restored = md.restored_consumers([], {}, adopted)  # the loaded classic group has no members left
    assert sorted(restored) == ["cons-1"]
