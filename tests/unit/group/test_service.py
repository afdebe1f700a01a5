"""GroupService (asyncio edge): delayed responses, durability before acknowledgement, restart from the log."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode as E
from zkcoord.group.messages import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from zkcoord.server.group_service import GroupService
from zkcoord.storage import FileRecordStore, MemoryRecordStore

from .service_helpers import PROTOCOLS, FakeClock, GatedStore, commit_req, join_req, until


async def join(svc: GroupService, client_id: str) -> JoinGroupResponse:
    first = await svc.join_group(join_req(client_id=client_id))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    return await svc.join_group(join_req(first.member_id))


def test_three_join_one_leaves_rebalance_completes_and_commits_survive_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        ids = (f"uuid{i}" for i in itertools.count())
        cfg = GroupConfig(group_initial_rebalance_delay_ms=3000)
        store = FileRecordStore(tmp_path, fsync="always")
        svc = GroupService(cfg, store, clock=clock, new_uuid=lambda: next(ids))
        await svc.start()
        tasks = [asyncio.create_task(join(svc, f"c{i}")) for i in range(3)]
        await until(lambda: "g" in svc.state.groups and len(svc.state.groups["g"].members) == 3, "3 members")
        assert not any(t.done() for t in tasks)  # parked during the initial delay
        clock.t += 3.0
        assert svc.fire_due_timers() == 1  # members arrived during the delay: re-armed once more (KIP-134)
        assert not any(t.done() for t in tasks)
        clock.t += 3.0
        svc.fire_due_timers()
        await until(lambda: all(t.done() for t in tasks), "joins answered")
        joined = [t.result() for t in tasks]
        assert {r.generation_id for r in joined} == {1}
        leader = joined[0].leader
        ids_ = [r.member_id for r in joined]
        syncs = [
            asyncio.create_task(
                svc.sync_group(
                    SyncGroupRequest(
                        5, "g", 1, m, None, "consumer", "range",
                        tuple((x, x.encode()) for x in ids_) if m == leader else (),
                    )
                )
            )
            for m in ids_
        ]  # fmt: skip
        answers = await asyncio.gather(*syncs)
        assert [a.assignment for a in answers] == [m.encode() for m in ids_]

        gone = ids_[2]
        left = await svc.leave_group(LeaveGroupRequest(3, "g", (LeaveGroupMember(gone),)))
        assert left.members[0].error_code == 0
        beat = await svc.heartbeat(HeartbeatRequest(4, "g", 1, ids_[0]))
        assert beat.error_code == E.REBALANCE_IN_PROGRESS
        rejoined = await asyncio.gather(*(svc.join_group(join_req(m)) for m in ids_[:2]))
        assert {r.generation_id for r in rejoined} == {2}
        assert rejoined[0].leader == leader and len(rejoined[0].members) == 2
        answers = await asyncio.gather(
            *(
                svc.sync_group(
                    SyncGroupRequest(5, "g", 2, m, None, None, None, ((m, b"A"),) if m == leader else ())
                )
                for m in ids_[:2]
            )
        )
        assert [a.error_code for a in answers] == [0, 0]
        committed = await svc.offset_commit(commit_req(2, leader, 42))
        assert committed.topics[0].partitions[0].error_code == 0
        stale = await svc.offset_commit(commit_req(1, leader, 7))
        assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
        await svc.close()
        store.close()
        before = svc.state.view.snapshot()

        store2 = FileRecordStore(tmp_path)
        svc2 = GroupService(cfg, store2, clock=clock)
        await svc2.start()
        assert svc2.state.view.snapshot() == before  # the log replays into the same persisted state
        fetched = await svc2.offset_fetch(OffsetFetchRequest(7, "g", None))
        p = fetched.topics[0].partitions[0]
        assert (fetched.topics[0].name, p.committed_offset, p.committed_leader_epoch, p.metadata) == (
            "t",
            42,
            3,
            "meta",
        )
        (desc,) = (await svc2.describe_groups(DescribeGroupsRequest(5, ("g",)))).groups
        assert (desc.group_state, desc.protocol_data) == ("Stable", "range")
        assert [m.member_id for m in desc.members] == ids_[:2]
        assert [m.member_assignment for m in desc.members] == [b"A", b""]
        beat = await svc2.heartbeat(HeartbeatRequest(4, "g", 2, leader))
        assert beat.error_code == 0
        await svc2.close()
        store2.close()

    asyncio.run(scenario())


def test_commit_and_later_responses_wait_for_durability() -> None:
    async def scenario() -> None:
        store = GatedStore()
        svc = GroupService(GroupConfig(), store, clock=FakeClock())
        await svc.start()
        commit = asyncio.create_task(svc.offset_commit(commit_req(-1, "", 5)))
        await until(lambda: bool(svc.state.view.offsets), "commit handled")
        fetch = asyncio.create_task(svc.offset_fetch(OffsetFetchRequest(7, "g", None)))
        await until(lambda: svc.runtime._token >= 2, "fetch handled")
        # a bounded observation window, not a synchronisation: neither answers while the write is held
        done, _ = await asyncio.wait({commit, fetch}, timeout=0.2)
        assert not done and store.records == []
        store.gate.set()
        await asyncio.wait_for(asyncio.gather(commit, fetch), timeout=10)
        assert len(store.records) == 1
        assert fetch.result().topics[0].partitions[0].committed_offset == 5
        await svc.close()

    asyncio.run(scenario())


def test_append_failure_stops_the_service() -> None:
    async def scenario() -> None:
        store = GatedStore()
        store.fail = True
        store.gate.set()
        svc = GroupService(GroupConfig(), store, clock=FakeClock())
        await svc.start()
        r = await svc.offset_commit(commit_req(-1, "", 5))
        assert r.topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        assert isinstance(svc.failed, OSError)
        beat = await svc.heartbeat(HeartbeatRequest(4, "g", 1, "m"))
        assert beat.error_code == E.COORDINATOR_NOT_AVAILABLE
        await svc.close()

    asyncio.run(scenario())


def test_status_errors_before_start_and_for_foreign_groups() -> None:
    async def scenario() -> None:
        svc = GroupService(GroupConfig(), MemoryRecordStore(), owns_group=lambda g: g != "foreign")
        r = await svc.join_group(join_req())
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE
        assert (await svc.list_groups(ListGroupsRequest(4))).error_code == E.COORDINATOR_NOT_AVAILABLE
        await svc.start()
        bad = JoinGroupRequest(5, "", 10_000, 20_000, "", None, "consumer", PROTOCOLS)
        assert (await svc.join_group(bad)).error_code == E.INVALID_GROUP_ID
        foreign = await svc.heartbeat(HeartbeatRequest(4, "foreign", 1, "m"))
        assert foreign.error_code == E.NOT_COORDINATOR
        (d,) = (await svc.describe_groups(DescribeGroupsRequest(5, ("foreign",)))).groups
        assert d.error_code == E.NOT_COORDINATOR
        await svc.close()

    asyncio.run(scenario())


def test_close_answers_parked_joins_not_coordinator() -> None:
    async def scenario() -> None:
        svc = GroupService(GroupConfig(), MemoryRecordStore(), clock=FakeClock())
        await svc.start()
        task = asyncio.create_task(svc.join_group(join_req(version=3)))
        await until(lambda: "g" in svc.state.groups and bool(svc.state.groups["g"].members), "parked join")
        await svc.close()
        assert (await task).error_code == E.NOT_COORDINATOR

    asyncio.run(scenario())


def test_real_timers_complete_the_initial_delay() -> None:
    async def scenario() -> None:
        svc = GroupService(GroupConfig(group_initial_rebalance_delay_ms=30), MemoryRecordStore())
        await svc.start()
        r = await asyncio.wait_for(svc.join_group(join_req(version=3)), timeout=10)
        assert (r.error_code, r.generation_id, r.leader) == (0, 1, r.member_id)
        await svc.close()

    asyncio.run(scenario())
