"""One mixed group, each member answered in its own protocol name: a group service with the real mixed-group bridge
on a real ZooKeeper, JoinGroup and SyncGroup v5 as kafkajs (`RoundRobinAssigner` only) and sarama 1.22 (`range`
only) send them. The classic core picks one name for the group (`range`), each member hears its own, a SyncGroup
naming another member's name is refused, and the owner znodes are held for the shares sent. And each member is
treated by its own rebalance protocol: a `cooperative-sticky` member in a `range` group keeps what stays."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from zkcoord.bridge.membership import MixedGroupBridge
from zkcoord.bridge.mixed_policy import decode_assignment
from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import JoinGroupRequest, SyncGroupRequest
from zkcoord.server.group_service import GroupService
from zkcoord.server.mixed_decisions import FOLLOW_PROTOCOL
from zkcoord.storage import FileRecordStore
from zkcoord.zk import registry

pytestmark = pytest.mark.integration

GROUP = "mixed-names"
TOPIC = "t"
PARTITIONS = 4
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of topic "t"
KAFKAJS = (("RoundRobinAssigner", SUB),)
SARAMA = (("range", SUB),)


def join_req(member_id: str, protocols: tuple[tuple[str, bytes], ...], client: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        5, GROUP, 10_000, 10_000, member_id, None, "consumer", protocols, client_id=client
    )


def sync_req(member: str, generation: int, name: str, assignments: tuple[tuple[str, bytes], ...] = ()) -> Any:
    return SyncGroupRequest(5, GROUP, generation, member, None, "consumer", name, assignments)


async def join(svc: GroupService, protocols: tuple[tuple[str, bytes], ...], client: str) -> str:
    """A v4+ client's first JoinGroup: MEMBER_ID_REQUIRED and its id."""
    first = await svc.join_group(join_req("", protocols, client))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
    return first.member_id


Offer = tuple[str, tuple[tuple[str, bytes], ...], str]  # member id, protocols, client id


async def rebalance(svc: GroupService, members: list[Offer]) -> tuple[list[Any], list[Any]]:
    """Every member joins, then syncs (the leader with a proposal the bridge replaces) naming the protocol it was
    answered in, as clients do; a round that ends REBALANCE_IN_PROGRESS (the bridge's watch on the legacy
    members fires once when it is set) is run again, at most 5 times. (JoinGroup, SyncGroup) answers per member."""
    for _ in range(5):
        joins = await asyncio.gather(*(svc.join_group(join_req(m, p, c)) for m, p, c in members))
        assert all(j.error_code == 0 for j in joins), joins
        leader = joins[0].leader
        proposal = tuple((m, b"") for m, _, _ in members)
        syncs = await asyncio.gather(
            *(
                svc.sync_group(sync_req(m, j.generation_id, j.protocol_name, proposal if m == leader else ()))
                for (m, _, _), j in zip(members, joins, strict=True)
            )
        )
        if all(s.error_code == 0 for s in syncs):
            return joins, syncs
        assert {s.error_code for s in syncs} <= {0, ErrorCode.REBALANCE_IN_PROGRESS}, syncs
    raise AssertionError(f"no rebalance completed in 5 rounds: {syncs}")


def test_kafkajs_and_sarama_names_in_one_group(zk: Any, zk_connect: str, tmp_path: Path) -> None:
    registry.write_topic(zk, TOPIC, {p: [1] for p in range(PARTITIONS)})

    async def main() -> None:
        bridge = MixedGroupBridge(zk_connect, "mixed-.*", hand_over_timeout_ms=500)
        await bridge.start()
        svc = GroupService(
            GroupConfig(group_initial_rebalance_delay_ms=0),
            FileRecordStore(tmp_path / "records", "always"),
            membership_bridge=bridge,
        )
        await svc.start()
        try:
            js = (await join(svc, KAFKAJS, "js"), KAFKAJS, "js")
            (one,), (alone,) = await rebalance(svc, [js])
            assert (one.protocol_name, alone.protocol_name) == ("RoundRobinAssigner", "RoundRobinAssigner")
            assert svc.state.groups[GROUP].protocol_name == FOLLOW_PROTOCOL  # the core's name for it
            assert len(decode_assignment(alone.assignment)) == PARTITIONS

            go = (await join(svc, SARAMA, "go"), SARAMA, "go")
            joins, syncs = await rebalance(svc, [go, js])
            # each answered in its own name: sarama's range fixes the group's, kafkajs's leader finds its own
            assert [j.protocol_name for j in joins] == ["range", "RoundRobinAssigner"]
            assert [s.protocol_name for s in syncs] == ["range", "RoundRobinAssigner"]
            assert svc.state.groups[GROUP].protocol_name == "range"
            shares = [decode_assignment(s.assignment) for s in syncs]
            assert sorted(tp.partition for s in shares for tp in s) == list(range(PARTITIONS))
            assert [len(s) for s in shares] == [2, 2]
            owners = zk.get_children(f"/consumers/{GROUP}/owners/{TOPIC}")
            assert sorted(int(p) for p in owners) == list(range(PARTITIONS))  # held for what was sent

            # a SyncGroup naming a protocol the member was not answered in is refused; its own is accepted
            gen = joins[0].generation_id
            wrong = await svc.sync_group(sync_req(js[0], gen, "range"))
            assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, wrong
            again = await svc.sync_group(sync_req(js[0], gen, "RoundRobinAssigner"))
            assert (again.error_code, again.protocol_name) == (0, "RoundRobinAssigner"), again
            assert again.assignment == syncs[1].assignment
        finally:
            await svc.close()
            await bridge.close()

    asyncio.run(main())


def cooperative_subscription(owned: list[int]) -> bytes:
    """A ConsumerProtocolSubscription v1 of topic "t" listing owned partitions, as a KIP-429 client rejoins."""
    out = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1)
    out += struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", len(owned))
    return out + b"".join(struct.pack(">i", p) for p in owned)


def test_a_cooperative_member_beside_an_eager_one_keeps_what_stays(
    zk: Any, zk_connect: str, tmp_path: Path
) -> None:
    """kafka-python's/librdkafka's `cooperative-sticky` member holds every partition; a sarama `range` member
    joins, so the group's name becomes `range`. The cooperative member, answered `cooperative-sticky`, is
    treated as one: the owner znodes of the partitions it keeps are never re-created, and those moving to the
    newcomer are withheld (not sent to it while the cooperative member still consumes them)."""
    registry.write_topic(zk, TOPIC, {p: [1] for p in range(PARTITIONS)})
    base = f"/consumers/{GROUP}/owners/{TOPIC}"

    def czxids() -> dict[int, int]:
        return {int(p): zk.exists(f"{base}/{p}").czxid for p in zk.get_children(base)}

    async def main() -> None:
        bridge = MixedGroupBridge(zk_connect, "mixed-.*", hand_over_timeout_ms=500)
        await bridge.start()
        svc = GroupService(
            GroupConfig(group_initial_rebalance_delay_ms=0),
            FileRecordStore(tmp_path / "records", "always"),
            membership_bridge=bridge,
        )
        await svc.start()
        try:
            fresh = (("cooperative-sticky", cooperative_subscription([])),)
            coop = await join(svc, fresh, "coop")
            (one,), (alone,) = await rebalance(svc, [(coop, fresh, "coop")])
            assert (one.protocol_name, alone.protocol_name) == ("cooperative-sticky", "cooperative-sticky")
            assert len(decode_assignment(alone.assignment)) == PARTITIONS
            before = czxids()
            assert sorted(before) == list(range(PARTITIONS))

            go = await join(svc, SARAMA, "go")
            owning = (("cooperative-sticky", cooperative_subscription(list(range(PARTITIONS)))),)
            joins, syncs = await rebalance(svc, [(coop, owning, "coop"), (go, SARAMA, "go")])
            assert [j.protocol_name for j in joins] == ["cooperative-sticky", "range"]
            assert svc.state.groups[GROUP].protocol_name == "range"
            kept = {tp.partition for tp in decode_assignment(syncs[0].assignment)}
            assert len(kept) == PARTITIONS // 2, kept  # its share under range, all of which it already owned
            assert decode_assignment(syncs[1].assignment) == ()  # the rest is withheld until coop revokes it
            after = czxids()
            assert {p: after[p] for p in kept} == {p: before[p] for p in kept}  # never released
            assert sorted(after) == list(range(PARTITIONS))  # coop still holds what it has not revoked
        finally:
            await svc.close()
            await bridge.close()

    asyncio.run(main())
