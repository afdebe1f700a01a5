"""GroupService.consumer_group_heartbeat_now: a steady member's ConsumerGroupHeartbeat is answered at once and
changes state (its session timer) exactly as `consumer_group_heartbeat` does; anything that writes records, and
anything behind a pending write, waits for the write like every other response."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse as Resp
from zkcoord.group.errors import ErrorCode as E
from zkcoord.server.group_service import GroupService
from zkcoord.storage import MemoryRecordStore

from .service_helpers import FakeClock, GatedStore, until

T = "11" * 16
TOPICS = {"t": (T, 4)}


def _join(member: str) -> Hb:
    return Hb(
        1, "g", member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), topic_partitions=()
    )


def _steady(member: str, epoch: int, owned: tuple[int, ...]) -> Hb:
    return Hb(1, "g", member, epoch, topic_partitions=((T, owned),) if owned else ())


async def _answer(svc: GroupService, req: Hb, sync_path: bool) -> tuple[Resp, bool]:
    """(the answer, whether it came at once)."""
    if not sync_path:
        return await svc.consumer_group_heartbeat(req), False
    answer = svc.consumer_group_heartbeat_now(req)
    if isinstance(answer, Resp):
        return answer, True
    assert isinstance(answer, Awaitable)
    return await answer, False


def test_steady_heartbeats_are_answered_at_once_and_as_the_general_path_does() -> None:
    async def scenario() -> None:
        results = []
        for sync_path in (True, False):
            clock = FakeClock()
            svc = GroupService(GroupConfig(), MemoryRecordStore(), clock=clock, topics=TOPICS.get)
            await svc.start()
            joined, _ = await _answer(svc, _join("m1"), sync_path)  # writes records: waits for them
            owned = tuple(p for _t, ps in joined.assignment or () for p in ps)
            steps = []
            for req in (
                _steady("m1", joined.member_epoch, owned),  # the member acknowledges its assignment
                _steady("m1", joined.member_epoch, owned),  # steady: nothing to write
                _steady("m1", joined.member_epoch + 1, owned),  # FENCED_MEMBER_EPOCH
                _steady("stranger", 1, ()),  # UNKNOWN_MEMBER_ID
                Hb(1, "g", "m1", joined.member_epoch, topic_partitions=None),  # owned not sent: steady too
            ):
                clock.t += 1.0
                answer, at_once = await _answer(svc, req, sync_path)
                steps.append((answer, at_once))
            timers = dict(svc.runtime._timers)
            results.append((joined, [a for a, _ in steps], timers, svc.state.consumer_groups))
            if sync_path:
                assert [at_once for _, at_once in steps] == [True] * 5  # no record: no future, no task
            await svc.close()
        assert results[0] == results[1]
        joined, answers, timers, _ = results[0]
        assert [a.error_code for a in answers] == [0, 0, E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID, 0]
        assert answers[1].assignment is None  # unchanged: not sent again
        # the session timer re-armed by the last good heartbeat, 5 s after the join
        session = next(deadline for key, deadline in timers.items() if key.member_id == "m1")
        assert session == int((FakeClock().t + 5) * 1000) + GroupConfig().group_consumer_session_timeout_ms

    asyncio.run(scenario())


def test_a_steady_heartbeat_waits_behind_a_pending_write() -> None:
    async def scenario() -> None:
        store = GatedStore()
        store.gate.set()
        svc = GroupService(GroupConfig(), store, clock=FakeClock(), topics=TOPICS.get)
        await svc.start()
        joined = await svc.consumer_group_heartbeat(_join("m1"))
        owned = tuple(p for _t, ps in joined.assignment or () for p in ps)
        steady = _steady("m1", joined.member_epoch, owned)
        assert isinstance(svc.consumer_group_heartbeat_now(steady), Resp)
        store.gate.clear()
        second = asyncio.ensure_future(svc.consumer_group_heartbeat(_join("m2")))  # records, held at the gate
        await until(lambda: store.blocked.is_set(), "m2's join records held at the gate")
        pending = svc.consumer_group_heartbeat_now(steady)
        assert not isinstance(pending, Resp)  # must not overtake m2's join, whose records are not durable yet
        beat = asyncio.ensure_future(pending)
        # a bounded observation window, not a synchronisation: neither answers while the write is held
        done, _ = await asyncio.wait({beat, second}, timeout=0.2)
        assert not done
        store.gate.set()
        assert (await asyncio.wait_for(beat, 10)).error_code == 0
        assert (await asyncio.wait_for(second, 10)).error_code == 0
        await svc.close()

    asyncio.run(scenario())


def test_refusals_before_the_handler() -> None:
    svc = GroupService(GroupConfig(), MemoryRecordStore(), topics=TOPICS.get)
    answer = svc.consumer_group_heartbeat_now(_steady("m1", 1, ()))  # not started
    assert isinstance(answer, Resp) and answer.error_code == E.COORDINATOR_NOT_AVAILABLE
