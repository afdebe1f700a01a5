"""GroupService.heartbeat_now: the synchronous heartbeat answers and changes state exactly as `heartbeat` does, and
waits behind a pending write like every other response."""

from __future__ import annotations

import asyncio

from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode as E
from zkcoord.group.messages import HeartbeatRequest, HeartbeatResponse, SyncGroupRequest
from zkcoord.server.group_service import GroupService
from zkcoord.storage import MemoryRecordStore

from .service_helpers import FakeClock, GatedStore, commit_req, join_req, until


async def _stable_member(svc: GroupService, clock: FakeClock) -> tuple[str, int]:
    """One member, Stable (the initial delay skipped on the fake clock)."""
    first = await svc.join_group(join_req())
    task = asyncio.create_task(svc.join_group(join_req(first.member_id)))
    await until(lambda: "g" in svc.state.groups and bool(svc.state.groups["g"].members), "parked join")
    for _ in range(10):  # group.initial.rebalance.delay.ms, perhaps re-armed once (KIP-134)
        if task.done():
            break
        clock.t += 3.0
        svc.fire_due_timers()
        await asyncio.wait(
            {task}, timeout=0.2
        )  # the join answered by the timer completes, or the delay re-armed
    joined = await asyncio.wait_for(task, 10)
    m = joined.member_id
    plan = ((m, b"A"),)
    synced = await svc.sync_group(SyncGroupRequest(5, "g", joined.generation_id, m, None, None, None, plan))
    assert synced.error_code == 0
    return m, joined.generation_id


def test_heartbeat_now_answers_and_arms_as_heartbeat_does() -> None:
    async def scenario() -> None:
        results = []
        for sync_path in (True, False):
            clock = FakeClock()
            svc = GroupService(GroupConfig(), MemoryRecordStore(), clock=clock, new_uuid=lambda: "u")
            await svc.start()
            m, gen = await _stable_member(svc, clock)
            clock.t += 1.0
            answers = []
            for req in (
                HeartbeatRequest(4, "g", gen, m),
                HeartbeatRequest(4, "g", gen + 1, m),
                HeartbeatRequest(4, "g", gen, "stranger"),
                HeartbeatRequest(4, "nope", gen, m),
            ):
                if sync_path:
                    answer = svc.heartbeat_now(req)
                    assert isinstance(answer, HeartbeatResponse)  # nothing pending: answered at once
                else:
                    answer = await svc.heartbeat(req)
                answers.append(answer.error_code)
            member = svc.state.groups["g"].members[m]
            results.append((answers, member.deadline_ms, svc.next_timer_ms(), svc.state.view.snapshot()))
            await svc.close()
        assert results[0] == results[1]
        assert results[0][0] == [0, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]

    asyncio.run(scenario())


def test_heartbeat_now_waits_behind_a_pending_write() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        store = GatedStore()
        store.gate.set()
        svc = GroupService(GroupConfig(), store, clock=clock, new_uuid=lambda: "u")
        await svc.start()
        m, gen = await _stable_member(svc, clock)
        store.gate.clear()
        commit = asyncio.create_task(svc.offset_commit(commit_req(gen, m, 5)))
        await until(lambda: bool(svc.state.view.offsets), "commit handled")
        pending = svc.heartbeat_now(HeartbeatRequest(4, "g", gen, m))
        assert not isinstance(pending, HeartbeatResponse)  # must not overtake the commit's write
        beat = asyncio.ensure_future(pending)
        # a bounded observation window, not a synchronisation: neither answers while the write is held
        done, _ = await asyncio.wait({beat, commit}, timeout=0.2)
        assert not done
        store.gate.set()
        assert (await asyncio.wait_for(beat, 10)).error_code == 0
        assert (await commit).topics[0].partitions[0].error_code == 0
        await svc.close()

    asyncio.run(scenario())


def test_heartbeat_now_status_errors() -> None:
    svc = GroupService(GroupConfig(), MemoryRecordStore())
    answer = svc.heartbeat_now(HeartbeatRequest(4, "g", 1, "m"))  # not started
    assert isinstance(answer, HeartbeatResponse) and answer.error_code == E.COORDINATOR_NOT_AVAILABLE
