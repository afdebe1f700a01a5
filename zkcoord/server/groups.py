"""Routes group-API frames to a group coordinator: adapter request dataclasses in, encoded responses out."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from zkcoord.group import consumer_messages as cm
from zkcoord.group import messages as gm
from zkcoord.group.errors import ErrorCode
from zkcoord.group.offsets import (
    PartitionCount,
    unknown_partitions,
    with_unknown_partitions,
    without_partitions,
)
from zkcoord.security.acl import Operation, Resource, ResourceType, all_operations
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.authorization import RequestAuthorizer, authorized_group_call, with_every_operation
from zkcoord.server.seams import GroupCoordinator


class GroupDispatch:
    """`dispatch(req)` -> awaitable response frame for JoinGroup ... DeleteGroups.

    `partition_count` is the node's view of the cluster's topics (Kafka's metadata cache): an OffsetCommit partition
    it does not have is answered UNKNOWN_TOPIC_OR_PARTITION here, after authorization and before the coordinator,
    as KafkaApis does (so nothing is stored or mirrored to ZooKeeper for it). None: every partition is taken."""

    def __init__(
        self,
        service: GroupCoordinator,
        observe: Callable[[int, gm.GroupResponse], None] | None = None,
        authorizer: RequestAuthorizer | None = None,  # None: every principal may do everything
        partition_count: PartitionCount | None = None,
    ) -> None:
        self.service = service
        self.authorizer = authorizer
        self.partition_count = partition_count
        self.observe = observe  # (api_key, typed response): the metrics hook, one call per answered group

    def dispatch(self, req: kp.RequestFrame) -> Awaitable[bytes] | bytes | None:
        if req.api_key == kp.CONSUMER_GROUP_HEARTBEAT:
            return self._consumer_heartbeat(req)
        if req.api_key in kp.CONSUMER_GROUP_APIS:
            return self._consumer_group(req)
        if req.api_key not in kp.GROUP_APIS:
            return kp.error_response(req, ErrorCode.UNSUPPORTED_VERSION)
        if req.api_key == kp.HEARTBEAT:
            return self._heartbeat(req)
        return self._call(req)

    def _heartbeat(self, req: kp.RequestFrame) -> Awaitable[bytes] | bytes:
        # The hottest API: answered synchronously (no task, no future) whenever the service can.
        (r,) = kp.group_requests(req)
        assert isinstance(r, gm.HeartbeatRequest)
        if self.authorizer is not None and not self.authorizer.group(req, Operation.READ, r.group_id):
            refused = gm.HeartbeatResponse(int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            if self.observe is not None:
                self.observe(req.api_key, refused)
            return kp.group_response(req, [refused])
        answer = self.service.heartbeat_now(r)
        if not isinstance(answer, gm.HeartbeatResponse):
            return self._finish(req, answer)
        if self.observe is not None:
            self.observe(req.api_key, answer)
        return kp.group_response(req, [answer])

    async def _finish(self, req: kp.RequestFrame, pending: Awaitable[gm.HeartbeatResponse]) -> bytes:
        answer = await pending
        if self.observe is not None:
            self.observe(req.api_key, answer)
        return kp.group_response(req, [answer])

    async def _call(self, req: kp.RequestFrame) -> bytes:
        requests = kp.group_requests(req)
        one: Callable[[gm.GroupRequest], Awaitable[gm.GroupResponse]] = self._one
        if self.authorizer is not None:
            one = functools.partial(authorized_group_call, self.authorizer, req, call=self._one)
        if len(requests) == 1:
            responses = [await one(requests[0])]
        else:
            responses = list(await asyncio.gather(*(one(r) for r in requests)))
        if self.observe is not None:
            for response in responses:
                self.observe(req.api_key, response)
        return kp.group_response(req, responses)

    def _consumer_heartbeat(self, req: kp.RequestFrame) -> Awaitable[bytes] | bytes:
        """ConsumerGroupHeartbeat, authorized as Kafka's KafkaApis does (Read on the group, Describe on every
        subscribed topic), and answered synchronously (no task, no future) whenever the service can: a steady
        member's heartbeat, the consumer protocol's hottest request."""
        r = kp.consumer_group_request(req)
        assert isinstance(r, cm.ConsumerGroupHeartbeatRequest)
        authz = self.authorizer
        answer: cm.ConsumerGroupHeartbeatResponse | Awaitable[cm.ConsumerGroupHeartbeatResponse]
        if authz is not None and not authz.group(req, Operation.READ, r.group_id):
            answer = cm.ConsumerGroupHeartbeatResponse(int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
        elif authz is not None and authz.denied_topics(
            req, Operation.DESCRIBE, r.subscribed_topic_names or ()
        ):
            denied = sorted(authz.denied_topics(req, Operation.DESCRIBE, r.subscribed_topic_names or ()))
            answer = cm.ConsumerGroupHeartbeatResponse(
                int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                f"The following topics are not authorized: {', '.join(denied)}",
            )
        else:
            # The group's regexes, if this heartbeat refreshes them (any member's may: a steady one's after the
            # refresh interval), match only what its principal may Describe, as in Kafka 4.
            describable = functools.partial(_describable, authz, req) if authz is not None else None
            answer = self.service.consumer_group_heartbeat_now(r, describable)
        if isinstance(answer, cm.ConsumerGroupHeartbeatResponse):
            return kp.consumer_group_response(req, answer)
        return self._consumer_heartbeat_done(req, answer)

    @staticmethod
    async def _consumer_heartbeat_done(
        req: kp.RequestFrame, pending: Awaitable[cm.ConsumerGroupHeartbeatResponse]
    ) -> bytes:
        return kp.consumer_group_response(req, await pending)

    async def _consumer_group(self, req: kp.RequestFrame) -> bytes:
        """ConsumerGroupDescribe, authorized as Kafka's KafkaApis does: Describe on each group (and its assigned
        topics)."""
        r = kp.consumer_group_request(req)
        assert isinstance(r, cm.ConsumerGroupDescribeRequest)
        authz = self.authorizer
        allowed = tuple(g for g in r.group_ids if authz is None or authz.group(req, Operation.DESCRIBE, g))
        described = (
            await self.service.consumer_group_describe(replace(r, group_ids=allowed)) if allowed else None
        )
        found = {g.group_id: g for g in described.groups} if described is not None else {}
        groups = []
        for gid in r.group_ids:
            g = found.get(gid)
            if g is None:
                groups.append(cm.DescribedConsumerGroup(int(ErrorCode.GROUP_AUTHORIZATION_FAILED), gid))
                continue
            if authz is not None and g.error_code == 0:
                topics = {tp.topic_name for m in g.members for tp in (*m.assignment, *m.target_assignment)}
                if authz.denied_topics(req, Operation.DESCRIBE, sorted(topics)):
                    groups.append(cm.DescribedConsumerGroup(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), gid))
                    continue
            if r.include_authorized_operations and g.error_code == 0:
                ops = (
                    authz.operations(req, Resource(ResourceType.GROUP, gid))
                    if authz is not None
                    else all_operations(ResourceType.GROUP)
                )
                g = replace(g, authorized_operations=ops)
            groups.append(g)
        return kp.consumer_group_response(req, cm.ConsumerGroupDescribeResponse(tuple(groups)))

    async def _offset_commit(self, r: gm.OffsetCommitRequest) -> gm.OffsetCommitResponse:
        count = self.partition_count
        unknown = unknown_partitions(r, count) if count is not None else None
        if not unknown:
            return await self.service.offset_commit(r)
        known = without_partitions(r, unknown)
        answered = await self.service.offset_commit(known) if known is not None else None
        return with_unknown_partitions(r, answered, unknown)

    async def _one(self, r: gm.GroupRequest) -> gm.GroupResponse:
        s = self.service
        if isinstance(r, gm.JoinGroupRequest):
            return await s.join_group(r)
        if isinstance(r, gm.SyncGroupRequest):
            return await s.sync_group(r)
        if isinstance(r, gm.HeartbeatRequest):
            return await s.heartbeat(r)
        if isinstance(r, gm.LeaveGroupRequest):
            return await s.leave_group(r)
        if isinstance(r, gm.OffsetCommitRequest):
            return await self._offset_commit(r)
        if isinstance(r, gm.OffsetFetchRequest):
            return await s.offset_fetch(r)
        if isinstance(r, gm.DescribeGroupsRequest):
            described = await s.describe_groups(r)
            return described if self.authorizer is not None else with_every_operation(r, described)
        if isinstance(r, gm.ListGroupsRequest):
            return await s.list_groups(r)
        return await s.delete_groups(r)


def _describable(authz: RequestAuthorizer, req: kp.RequestFrame, names: Sequence[str]) -> list[str]:
    denied = authz.denied_topics(req, Operation.DESCRIBE, names)
    return [n for n in names if n not in denied]
