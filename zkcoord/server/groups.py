"""Routes group-API frames to the GroupService: adapter request dataclasses in, encoded responses out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from zkcoord.server import kafka_protocol as kp


class GroupDispatch:
    """`dispatch(req)` -> awaitable response frame for JoinGroup ... DeleteGroups."""

    def __init__(self, service: Any, observe: Callable[[int, Any], None] | None = None) -> None:
        self.service = service
        self.observe = observe  # (api_key, typed response): the metrics hook, one call per answered group
        self._methods = {
            kp.JOIN_GROUP: service.join_group,
            kp.SYNC_GROUP: service.sync_group,
            kp.HEARTBEAT: service.heartbeat,
            kp.LEAVE_GROUP: service.leave_group,
            kp.OFFSET_COMMIT: service.offset_commit,
            kp.OFFSET_FETCH: service.offset_fetch,
            kp.DESCRIBE_GROUPS: service.describe_groups,
            kp.LIST_GROUPS: service.list_groups,
            kp.DELETE_GROUPS: service.delete_groups,
        }

    def dispatch(self, req: kp.RequestFrame) -> Any:
        method = self._methods.get(req.api_key)
        if method is None:
            return kp.error_response(req, 35)
        return self._call(req, method)

    async def _call(self, req: kp.RequestFrame, method: Any) -> bytes:
        requests = kp.group_requests(req)
        if len(requests) == 1:
            responses = [await method(requests[0])]
        else:
            responses = list(await asyncio.gather(*(method(r) for r in requests)))
        if self.observe is not None:
            for response in responses:
                self.observe(req.api_key, response)
        return kp.group_response(req, responses)
