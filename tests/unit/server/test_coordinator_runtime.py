"""The coordinator runtime's synchronous path (`run_now`, every heartbeat): its inlined status check answers
exactly as the status function does, whichever check fails."""

from __future__ import annotations

import asyncio

from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import HeartbeatRequest, HeartbeatResponse
from zkcoord.server.group_service import GroupService
from zkcoord.storage import MemoryRecordStore


def test_the_fast_status_check_refuses_as_the_status_function_does() -> None:
    async def scenario() -> None:
        svc = GroupService(GroupConfig(), MemoryRecordStore(), owns_group=lambda g: g != "foreign")
        await svc.start()
        for group_id, code in (("", ErrorCode.INVALID_GROUP_ID), ("foreign", ErrorCode.NOT_COORDINATOR)):
            req = HeartbeatRequest(4, group_id, 1, "m")
            now = svc.heartbeat_now(req)
            assert isinstance(now, HeartbeatResponse) and now.error_code == code, (group_id, now)
            assert (await svc.heartbeat(req)).error_code == code
        served = svc.heartbeat_now(HeartbeatRequest(4, "g", 1, "m"))  # passes the checks: the handler answers
        assert isinstance(served, HeartbeatResponse)
        assert served == await svc.heartbeat(HeartbeatRequest(4, "g", 1, "m"))
        assert served.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        await svc.close()
        closed = svc.heartbeat_now(HeartbeatRequest(4, "g", 1, "m"))
        assert (
            isinstance(closed, HeartbeatResponse) and closed.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        )

    asyncio.run(scenario())
