"""Same-generation hand-on in a mixed group: a group service with the real mixed-group bridge on a real ZooKeeper,
JoinGroup and SyncGroup v5 as a KIP-429 (`cooperative-sticky`) client sends them. When a partition moves between
two cooperative members, the recipient's SyncGroup answer is held until the giver's rejoin shows it revoked the
partition; that rejoin is answered in the current generation and the recipient's answer then carries the
partition: no follow-up rebalance. If the giver does not rejoin in time, the recipient is answered without it,
the giver keeps its owner znode, and the giver's late rejoin rebalances as before."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from zkcoord.bridge.membership import MixedGroupBridge
from zkcoord.bridge.mixed_policy import classic_marker, decode_assignment
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse
from zkcoord.group.state import GroupState
from zkcoord.server.group_service import GroupService
from zkcoord.storage import FileRecordStore
from zkcoord.testing import wait_until
from zkcoord.testing.members import LegacyMember, legacy_config
from zkcoord.zk import registry
from zkcoord.zk.registry import PartitionState

pytestmark = pytest.mark.integration

TOPIC = "t"
PARTITIONS = 4
COOP = "cooperative-sticky"


def subscription(owned: list[int]) -> bytes:
    """A ConsumerProtocolSubscription v1 of topic "t" listing owned partitions, as a KIP-429 client joins."""
    out = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1)
    out += struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", len(owned))
    return out + b"".join(struct.pack(">i", p) for p in owned)


class Client:
    """One cooperative member's requests; `rebalance_ms` sets the group's rebalance timeout (the hold's bound)."""

    def __init__(self, svc: GroupService, group: str, name: str, rebalance_ms: int) -> None:
        self.svc, self.group, self.name, self.rebalance_ms = svc, group, name, rebalance_ms
        self.member_id = ""

    def join(self, owned: list[int]) -> Any:
        req = JoinGroupRequest(
            5, self.group, 10_000, self.rebalance_ms, self.member_id, None, "consumer",
            ((COOP, subscription(owned)),), client_id=self.name,
        )  # fmt: skip
        return self.svc.join_group(req)

    async def first_join(self) -> None:
        first = await self.join([])
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
        self.member_id = first.member_id

    def sync(self, generation: int, assignments: tuple[tuple[str, bytes], ...] = ()) -> Any:
        req = SyncGroupRequest(5, self.group, generation, self.member_id, None, "consumer", COOP, assignments)
        return self.svc.sync_group(req)


def parts(resp: SyncGroupResponse) -> list[int]:
    assert resp.error_code == 0, resp
    return sorted(tp.partition for tp in decode_assignment(resp.assignment))


def owners(zk: Any, group: str) -> dict[int, str]:
    """Partition -> the member id whose thread holds its owner znode (each znode has exactly one holder)."""
    ids = {}
    for cid in zk.get_children(f"/consumers/{group}/ids"):
        marker = classic_marker(zk.get(f"/consumers/{group}/ids/{cid}")[0])
        if marker is not None:
            ids[f"{cid}-0"] = marker["member_id"]
    base = f"/consumers/{group}/owners/{TOPIC}"
    out = {}
    for p in zk.get_children(base):
        thread = zk.get(f"{base}/{p}")[0].decode()
        out[int(p)] = ids.get(thread, json.dumps(thread))
    return out


async def start(zk_connect: str, tmp_path: Path) -> tuple[MixedGroupBridge, GroupService]:
    bridge = MixedGroupBridge(zk_connect, "handon-.*", hand_over_timeout_ms=500)
    await bridge.start()
    svc = GroupService(
        GroupConfig(group_initial_rebalance_delay_ms=0),
        FileRecordStore(tmp_path / "records", "always"),
        membership_bridge=bridge,
    )
    await svc.start()
    return bridge, svc


async def two_members(svc: GroupService, a: Client, b: Client) -> tuple[int, asyncio.Task[Any]]:
    """`a` holds every partition; `b` joins and both rejoin (a owning all). Returns the generation and `b`'s
    SyncGroup, still in flight, once `a`'s (the leader's) is answered with half: the other half is withheld
    from `b` while `a` owns it. A round the bridge's first watch event restarts is run again (at most 5)."""
    await a.first_join()
    for _ in range(5):
        (alone,) = await asyncio.gather(a.join([]))
        if (await a.sync(alone.generation_id, ((a.member_id, b""),))).error_code == 0:
            break
    await b.first_join()
    for _ in range(5):
        ja, jb = await asyncio.gather(a.join(list(range(PARTITIONS))), b.join([]))
        assert (ja.error_code, jb.error_code, ja.leader) == (0, 0, a.member_id), (ja, jb)
        gen = ja.generation_id
        b_sync = asyncio.ensure_future(b.sync(gen))
        a_sync = await a.sync(gen, ((a.member_id, b""), (b.member_id, b"")))
        if a_sync.error_code == 0:
            assert parts(a_sync) == [0, 1]
            return gen, b_sync
        assert (await b_sync).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    raise AssertionError("no rebalance completed in 5 rounds")


def test_the_recipient_gets_the_partition_in_the_same_generation(
    zk: Any, zk_connect: str, tmp_path: Path
) -> None:
    group = "handon-same"
    registry.write_topic(zk, TOPIC, {p: [1] for p in range(PARTITIONS)})

    async def main() -> None:
        bridge, svc = await start(zk_connect, tmp_path)
        try:
            a, b = Client(svc, group, "a", 10_000), Client(svc, group, "b", 10_000)
            gen, b_sync = await two_members(svc, a, b)
            classic = svc.state.groups[group]
            assert h.sync_held(classic, gen, b.member_id) and not b_sync.done()
            assert owners(zk, group) == dict.fromkeys(range(PARTITIONS), a.member_id)  # a still owns 2, 3
            # a revoked 2 and 3 (KIP-429) and rejoins owning its assignment: same generation, no rebalance
            again: JoinGroupResponse = await a.join([0, 1])
            assert (again.error_code, again.generation_id) == (0, gen), again
            assert classic.state is GroupState.STABLE
            got = await asyncio.wait_for(b_sync, 10)
            assert parts(got) == [2, 3] and classic.generation == gen
            assert owners(zk, group) == {0: a.member_id, 1: a.member_id, 2: b.member_id, 3: b.member_id}
            assert parts(await a.sync(gen)) == [0, 1]  # the giver's reduced assignment, same generation
            assert parts(await b.sync(gen)) == [2, 3]  # recorded: a repeated SyncGroup says the same
            assert bridge.withheld(group) == {} and not bridge.hand_over_incomplete(group)
        finally:
            await svc.close()
            await bridge.close()

    asyncio.run(main())


def test_a_giver_that_does_not_rejoin_in_time_keeps_the_partition_and_its_late_rejoin_rebalances(
    zk: Any, zk_connect: str, tmp_path: Path
) -> None:
    group = "handon-late"
    registry.write_topic(zk, TOPIC, {p: [1] for p in range(PARTITIONS)})

    async def main() -> None:
        bridge, svc = await start(zk_connect, tmp_path)
        try:
            # rebalance timeout 1000 ms: the hold waits max(500, 1000 // 2) ms
            a, b = Client(svc, group, "a", 1000), Client(svc, group, "b", 1000)
            gen, b_sync = await two_members(svc, a, b)
            since = asyncio.get_running_loop().time()
            got = await asyncio.wait_for(b_sync, 10)  # the deadline: answered without what a still owns
            assert (
                asyncio.get_running_loop().time() - since >= 0.45
            )  # held until then (the timer's own bound)
            assert parts(got) == [] and svc.state.groups[group].generation == gen
            assert owners(zk, group) == dict.fromkeys(range(PARTITIONS), a.member_id)  # no two holders
            late = asyncio.ensure_future(a.join([0, 1]))  # now Kafka's rule: a rebalance
            await wait_until(
                lambda: svc.state.groups[group].state is GroupState.PREPARING_REBALANCE, 10, "the rebalance"
            )
            jb = await b.join([])  # b learns of it (its heartbeat) and rejoins
            ja = await late
            assert ja.generation_id == jb.generation_id == gen + 1
            b_sync = asyncio.ensure_future(b.sync(gen + 1))
            assert parts(await a.sync(gen + 1, ((a.member_id, b""), (b.member_id, b"")))) == [0, 1]
            assert parts(await b_sync) == [2, 3]
            assert owners(zk, group) == {0: a.member_id, 1: a.member_id, 2: b.member_id, 3: b.member_id}
        finally:
            await svc.close()
            await bridge.close()

    asyncio.run(main())


def test_a_new_recipient_registers_at_the_hand_on_so_the_legacy_member_consumes_its_share_until_then(
    zk: Any, zk_connect: str, tmp_path: Path
) -> None:
    """Six partitions, a fast legacy member and cooperative `a` (3 each); `b` joins: it gets partition 2 from `a`
    (withheld while `a` owns it) and partition 3 from the legacy member. Its answer is held for `a`'s rejoin, so
    it is registered only then: until then the legacy member keeps partition 3 (it cannot count `b` yet), and
    releases it at the registration; `b`'s answer carries both, in the same generation."""
    group = "handon-legacy"
    six = 6
    registry.write_topic(zk, TOPIC, {p: [1] for p in range(six)})
    with (
        socket.socket() as sock
    ):  # the legacy member joins once a broker is registered; it fetches nothing here
        sock.bind(("127.0.0.1", 0))
        registry.register_broker(zk, 1, "127.0.0.1", sock.getsockname()[1], timestamp_ms=0)
    for p in range(six):
        registry.write_partition_state(
            zk, TOPIC, p, PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
        )
    legacy = LegacyMember(legacy_config(zk_connect, group, "l1"), {TOPIC: 1}).start(thread=False)

    async def main() -> None:
        bridge, svc = await start(zk_connect, tmp_path)
        try:
            await wait_until(
                lambda: sorted(legacy.held()) == list(range(six)), 10, "the legacy member holding all six"
            )
            a, b = Client(svc, group, "a", 10_000), Client(svc, group, "b", 10_000)
            await a.first_join()
            for _ in range(5):
                ja = await a.join([])
                if (await a.sync(ja.generation_id, ((a.member_id, b""),))).error_code == 0:
                    break
            await wait_until(
                lambda: sorted(legacy.held()) == [3, 4, 5], 10, "the legacy member keeping 3, 4, 5"
            )
            await b.first_join()
            ja, _ = await asyncio.gather(a.join([0, 1, 2]), b.join([]))
            gen = ja.generation_id
            b_sync = asyncio.ensure_future(b.sync(gen))
            assert parts(await a.sync(gen, ((a.member_id, b""), (b.member_id, b"")))) == [0, 1]
            assert h.sync_held(svc.state.groups[group], gen, b.member_id)
            assert sorted(legacy.held()) == [3, 4, 5]  # b is not registered yet: the legacy member keeps 3
            again = await a.join([0, 1])
            assert (again.error_code, again.generation_id) == (0, gen)
            assert parts(await asyncio.wait_for(b_sync, 10)) == [2, 3]
            assert sorted(legacy.held()) == [4, 5]
            assert svc.state.groups[group].generation == gen
            held = owners(zk, group)
            assert {p: held[p] for p in (0, 1, 2, 3)} == {
                0: a.member_id,
                1: a.member_id,
                2: b.member_id,
                3: b.member_id,
            }
        finally:
            await svc.close()
            await bridge.close()

    try:
        asyncio.run(main())
    finally:
        legacy.stop()
