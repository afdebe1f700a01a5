"""The group service: the nine classic group APIs and the two of the consumer protocol (KIP-848), each one pure
handler (`zkcoord.group.handlers`, `zkcoord.group.consumer`) run on the `CoordinatorRuntime`, which owns the state,
the clock, the timers and the durable log (a response is released only once what it reveals is durable).

Composed at construction: an `OffsetMirror` (zkcoord.bridge.ZkOffsetBridge with `serve --bridge-zk-offsets`) sees
every acknowledged commit and merges every OffsetFetch with the legacy znodes; without one, nothing leaves the
coordinator's own store. A `MembershipBridge` (zkcoord.bridge.membership.MixedGroupBridge, `serve
--bridge-zk-groups`) makes the groups it matches mixed groups, through `MixedGroups` (`mixed_groups.py`, whose
decisions are the pure `mixed_decisions.py`): JoinGroup keeps only legacy-compatible protocols and each member
is answered (JoinGroup, SyncGroup) in a protocol name of its own, the leader's
SyncGroup assignment is replaced by the bridge's (held in ZooKeeper first), member departures release owner znodes,
legacy membership changes start a rebalance, and legacy members' generation -1 commits are stored; there a
ConsumerGroupHeartbeat is a consumer-protocol member of the mixed group (registered in ZooKeeper, its share from
the same hand-over), and its commits at its member epoch are stored.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from zkcoord.errors import ZkcoordError
from zkcoord.group import consumer, consumer_classic
from zkcoord.group import consumer_messages as cm
from zkcoord.group import handlers as h
from zkcoord.group import messages as gm
from zkcoord.group.config import GroupConfig
from zkcoord.group.errors import ErrorCode
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Result
from zkcoord.server.coordinator_runtime import CoordinatorRuntime, refusal
from zkcoord.server.mixed_decisions import remirrored_groups
from zkcoord.server.mixed_groups import MixedGroups
from zkcoord.server.seams import Describable, GroupCoordinator, MembershipBridge, OffsetMirror
from zkcoord.storage.store import RecordStore

log = logging.getLogger(__name__)

_REFUSALS_WORTH_A_LOG = frozenset(
    int(c) for c in (ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.GROUP_ID_NOT_FOUND)
)
CONSUMER_GROUP_HEARTBEAT = 68  # api keys, for the common status checks
CONSUMER_GROUP_DESCRIBE = 69


class CoordinatorUnavailable(ZkcoordError):
    """The group coordinator cannot carry out an internal change now (loading, stopped, or failed)."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class GroupService(GroupCoordinator):
    """One per node (one per led offsets partition in cluster mode). `clock()` returns seconds (like `time.time`); the core sees `int(clock() * 1000)`."""

    def __init__(
        self,
        config: GroupConfig,
        store: RecordStore,
        *,
        clock: Callable[[], float] = time.time,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
        append_in_thread: bool = True,
        owns_group: Callable[[str], bool] | None = None,
        offset_mirror: OffsetMirror | None = None,
        membership_bridge: MembershipBridge | None = None,
        topics: consumer.TopicLookup = lambda name: (
            None
        ),  # name -> (topic id hex, partitions): KIP-848 groups
        topic_names: consumer.TopicCatalog = tuple,  # every topic's name: KIP-848 regex subscriptions
        topics_version: Callable[[], int] | None = None,  # moves when `topics` may answer differently
    ) -> None:
        self.config = config
        self._topics = topics
        self._topic_names = topic_names
        self._topics_version = topics_version
        self._new_uuid = new_uuid
        self.offset_mirror = offset_mirror
        self.runtime = CoordinatorRuntime(
            config,
            store,
            clock=clock,
            append_in_thread=append_in_thread,
            owns_group=owns_group,
            touched=None if membership_bridge is None else self._touched,
        )
        self._mixed = (
            None
            if membership_bridge is None
            else MixedGroups(
                self.runtime, membership_bridge, offset_mirror, self.request_rebalance, topics=topics
            )
        )

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def state(self) -> CoordinatorState:
        return self.runtime.state

    @property
    def store(self) -> RecordStore:
        return self.runtime.store

    @property
    def failed(self) -> BaseException | None:
        return self.runtime.failed

    def now_ms(self) -> int:
        return self.runtime.now_ms()

    async def start(self) -> None:
        """Load: replay the store into state. Requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS."""
        await self.runtime.start(self._loaded)

    def _loaded(self) -> None:
        if self.offset_mirror is not None:
            # What a crash left unmirrored is mirrored now (never-regress: a znode at the value costs one read).
            for group_id, offsets in remirrored_groups(self.state):
                self.offset_mirror.submit(group_id, offsets)
        for group_id in sorted(self.state.groups):
            self._touched(group_id)

    def _touched(self, group_id: str) -> None:
        if self._mixed is not None:
            self._mixed.report_members(group_id)

    async def close(self) -> None:
        """Stop serving: parked requests are answered NOT_COORDINATOR (as on partition unload); pending writes finish."""
        if self._mixed is not None:
            self._mixed.close()
        await self.runtime.close()

    def unload_groups(self) -> None:
        """Drop every group `owns_group` no longer covers (cluster mode: its offsets partition moved away)."""
        self.runtime.apply(h.unload_groups(self.state, self.owns_group, self.now_ms()))

    def owns_group(self, group_id: str) -> bool:
        return self.runtime.owns_group(group_id)

    async def flush(self) -> None:
        """Wait until everything emitted so far is durable (tests, shutdown)."""
        await self.runtime.flush()

    def fire_due_timers(self) -> int:
        """Fire every timer due at the clock's now; returns how many fired (tests drive a fake clock with it)."""
        return self.runtime.fire_due_timers()

    def next_timer_ms(self) -> int | None:
        return self.runtime.next_timer_ms()

    def request_rebalance(self, group_id: str) -> None:
        """Rebalance a classic group from outside: a legacy member of a mixed group joined, left or lost its
        session (or a topic grew), or the proxy hands the group off."""
        rt = self.runtime
        if rt.serving and rt.owns_group(group_id):
            log.info("group=%s legacy membership changed: rebalancing the broker-protocol side", group_id)
            rt.apply(h.handle_external_rebalance(self.state, group_id, self.now_ms()))

    async def partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Drop every group's committed offsets of these deleted partitions (Kafka's handleDeletedPartitions),
        returning once the tombstones are durable; CoordinatorUnavailable when they cannot be (the service is
        loading, stopped, or its append failed), so the caller does not report a deletion that a restart undoes."""
        rt = self.runtime
        if not rt.serving:
            raise CoordinatorUnavailable("the group coordinator is not serving (loading or stopped)")
        rt.apply(h.delete_partition_offsets(self.state, partitions, self.now_ms()))
        await rt.flush()
        if rt.failed is not None:
            raise CoordinatorUnavailable(f"the group coordinator's append failed: {rt.failed!r}")

    # ------------------------------------------------------------------------------------------- requests

    async def join_group(self, req: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        err = self.runtime.status(h.JOIN_GROUP, req.group_id)
        if err is not None:
            return refusal(req, gm.JoinGroupResponse, err)
        if consumer.is_consumer_group(self.state, req.group_id):
            # A classic member hosted in a consumer group (online migration): answered from the consumer group.
            uuid = self._new_uuid() if req.member_id == "" else ""
            return await self.runtime.run(
                req,
                gm.JoinGroupResponse,
                lambda now, token: consumer_classic.handle_join(
                    self.state, req, now, token, uuid, self._topics
                ),
            )
        if self._mixed is not None and self._mixed.bridges(req.group_id):
            joined = await self._mixed.join(req)
            if isinstance(joined, gm.JoinGroupResponse):
                return joined
            return self._mixed.joined(req, await self._join(joined, self._mixed.in_place))
        return await self._join(req)

    async def _join(
        self, req: gm.JoinGroupRequest, in_place: h.RejoinInPlace | None = None
    ) -> gm.JoinGroupResponse:
        member_uuid = self._new_uuid() if req.member_id == "" else ""  # only a new member gets an id
        return await self.runtime.run(
            req,
            gm.JoinGroupResponse,
            lambda now, token: h.handle_join(self.state, req, now, token, member_uuid, in_place),
        )

    async def sync_group(self, req: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        err = self.runtime.status(h.SYNC_GROUP, req.group_id)
        if err is not None:
            return refusal(req, gm.SyncGroupResponse, err)
        if self._mixed is not None and self._mixed.bridges(req.group_id):
            bridged = await self._mixed.sync(req)
            if isinstance(bridged, gm.SyncGroupResponse):
                return bridged
            return self._mixed.synced(req, await self._sync(bridged))
        return await self._sync(req)

    async def _sync(self, req: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        return await self.runtime.run(
            req, gm.SyncGroupResponse, lambda now, token: h.handle_sync(self.state, req, now, token)
        )

    async def heartbeat(self, req: gm.HeartbeatRequest) -> gm.HeartbeatResponse:
        err = self.runtime.status(h.HEARTBEAT, req.group_id)
        if err is not None:
            return refusal(req, gm.HeartbeatResponse, err)
        return await self.runtime.run(
            req, gm.HeartbeatResponse, lambda now, token: h.handle_heartbeat(self.state, req, now, token)
        )

    def heartbeat_now(
        self, req: gm.HeartbeatRequest
    ) -> gm.HeartbeatResponse | Awaitable[gm.HeartbeatResponse]:
        """`heartbeat` without a future when its answer need not wait for a write: a heartbeat emits no records,
        so with none pending ahead of it the answer is final now (the same handler, the same state change)."""
        return self.runtime.run_now(h.HEARTBEAT, req.group_id, req, gm.HeartbeatResponse, h.handle_heartbeat)

    async def leave_group(self, req: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        err = self.runtime.status(h.LEAVE_GROUP, req.group_id)
        if err is not None:
            return refusal(req, gm.LeaveGroupResponse, err)
        return await self.runtime.run(
            req, gm.LeaveGroupResponse, lambda now, token: h.handle_leave(self.state, req, now, token)
        )

    async def offset_commit(self, req: gm.OffsetCommitRequest) -> gm.OffsetCommitResponse:
        """Returns only after the committed offsets are durable in the store, or REQUEST_TIMED_OUT for every
        partition once offsets.commit.timeout.ms has passed without that."""
        err = self.runtime.status(h.OFFSET_COMMIT, req.group_id)
        if err is not None:
            return refusal(req, gm.OffsetCommitResponse, err)
        handler = h.handle_offset_commit
        if consumer.is_consumer_group(self.state, req.group_id):
            handler = h.handle_consumer_group_commit
        elif self._mixed is not None and self._mixed.bridges(req.group_id):
            consumer_member = self._mixed.consumer_commit(req.group_id, req.member_id, req.generation_id)
            if consumer_member is not None and consumer_member is not ErrorCode.NONE:
                return refusal(req, gm.OffsetCommitResponse, consumer_member)
            if consumer_member is ErrorCode.NONE:
                # A consumer-protocol member of the mixed group at its epoch: stored as a commit from outside
                # the classic generation (the member's epoch is no classic generation).
                req = replace(req, generation_id=-1, member_id="", group_instance_id=None)
                handler = h.handle_legacy_member_commit
            elif await self._mixed.legacy_member_commit(req):
                handler = h.handle_legacy_member_commit
        # Kafka's offsets.commit.timeout.ms: the append (ZooKeeper in cluster mode) gets that long, then the
        # commit is answered REQUEST_TIMED_OUT; the write goes on and, if it lands, the offsets hold.
        resp = await self.runtime.run(
            req,
            gm.OffsetCommitResponse,
            lambda now, token: handler(self.state, req, now, token),
            timeout_ms=self.config.offsets_commit_timeout_ms,
        )
        if self.offset_mirror is not None:
            await self.offset_mirror.mirror_commit(req, resp)
        return resp

    async def offset_fetch(self, req: gm.OffsetFetchRequest) -> gm.OffsetFetchResponse:
        err = self.runtime.status(h.OFFSET_FETCH, req.group_id)
        if err is not None:
            return refusal(req, gm.OffsetFetchResponse, err)
        resp = await self.runtime.run(
            req, gm.OffsetFetchResponse, lambda now, token: h.handle_offset_fetch(self.state, req, now, token)
        )
        if self.offset_mirror is not None:
            resp = await self.offset_mirror.fetch_merged(req, resp)
        return resp

    async def describe_groups(self, req: gm.DescribeGroupsRequest) -> gm.DescribeGroupsResponse:
        def status(gid: str) -> ErrorCode | None:
            return self.runtime.status(h.DESCRIBE_GROUPS, gid)

        return await self.runtime.run(
            req,
            gm.DescribeGroupsResponse,
            lambda now, token: h.handle_describe(self.state, req, now, token, status),
        )

    async def list_groups(self, req: gm.ListGroupsRequest) -> gm.ListGroupsResponse:
        if not self.runtime.active:
            return gm.ListGroupsResponse(int(ErrorCode.COORDINATOR_NOT_AVAILABLE), ())
        code = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) if self.runtime.loading else 0
        return await self.runtime.run(
            req, gm.ListGroupsResponse, lambda now, token: h.handle_list(self.state, req, now, token, code)
        )

    async def delete_groups(self, req: gm.DeleteGroupsRequest) -> gm.DeleteGroupsResponse:
        def status(gid: str) -> ErrorCode | None:
            return self.runtime.status(h.DELETE_GROUPS, gid)

        return await self.runtime.run(
            req,
            gm.DeleteGroupsResponse,
            lambda now, token: h.handle_delete(self.state, req, now, token, status),
        )

    # ------------------------------------------------------------------- the consumer protocol (KIP-848)

    async def consumer_group_heartbeat(
        self, req: cm.ConsumerGroupHeartbeatRequest, describable: Describable | None = None
    ) -> cm.ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat: answered once the records it emitted are durable, as every response is. The
        group's regular expressions, when this heartbeat refreshes them, match only the topics `describable` keeps
        (Kafka 4's `filterTopicDescribeAuthorizedTopics`, in the context of the member that triggered the refresh)."""
        err = self.runtime.status(CONSUMER_GROUP_HEARTBEAT, req.group_id) if req.group_id else None
        if err is not None:
            return cm.ConsumerGroupHeartbeatResponse(int(err))
        new_id = self._new_uuid() if req.member_epoch == 0 and not req.member_id else ""
        if req.group_id and self._mixed is not None and self._mixed.bridges(req.group_id):
            # A consumer-protocol member of a mixed group: registered in ZooKeeper, its share from the bridge.
            return await self._mixed.consumer_heartbeat(req, new_id)
        catalog = self._catalog(describable)
        resp = await self.runtime.run(
            req,
            cm.ConsumerGroupHeartbeatResponse,
            lambda now, token: consumer_classic.handle_consumer_heartbeat(
                self.state, req, now, token, self._topics, new_id, catalog, self._topic_version()
            ),
        )
        return _logged_refusal(req, resp)

    def _catalog(self, describable: Describable | None) -> consumer.TopicCatalog:
        """The topics a regular expression resolves against during a heartbeat: every topic, or those the
        requester may Describe (asked only when a refresh runs)."""
        names = self._topic_names
        if describable is None:
            return names
        return lambda: describable(tuple(names()))

    def consumer_group_heartbeat_now(
        self, req: cm.ConsumerGroupHeartbeatRequest, describable: Describable | None = None
    ) -> cm.ConsumerGroupHeartbeatResponse | Awaitable[cm.ConsumerGroupHeartbeatResponse]:
        """`consumer_group_heartbeat` without a future when its answer need not wait for a write: a steady
        member's heartbeat emits no records (its session timer re-armed is all), so with none pending ahead of it
        the answer is final now (the same handler, the same state change). A join without a member id (it needs
        a fresh uuid), a request without a group id and a member of a mixed group take the general way."""
        if (
            not req.group_id
            or (req.member_epoch == 0 and not req.member_id)
            or (self._mixed is not None and self._mixed.bridges(req.group_id))
        ):
            return self.consumer_group_heartbeat(req, describable)
        answer = self.runtime.run_now(
            CONSUMER_GROUP_HEARTBEAT,
            req.group_id,
            req,
            cm.ConsumerGroupHeartbeatResponse,
            self._consumer_heartbeat if describable is None else self._consumer_heartbeat_by(describable),
        )
        if isinstance(answer, cm.ConsumerGroupHeartbeatResponse):
            return _logged_refusal(req, answer) if answer.error_code else answer
        return self._logged_when_done(req, answer)

    def _consumer_heartbeat(
        self, st: CoordinatorState, req: cm.ConsumerGroupHeartbeatRequest, now_ms: int, token: int
    ) -> Result:
        return consumer_classic.handle_consumer_heartbeat(
            st, req, now_ms, token, self._topics, "", self._topic_names, self._topic_version()
        )

    def _consumer_heartbeat_by(
        self, describable: Describable
    ) -> Callable[[CoordinatorState, cm.ConsumerGroupHeartbeatRequest, int, int], Result]:
        catalog = self._catalog(describable)

        def handle(
            st: CoordinatorState, req: cm.ConsumerGroupHeartbeatRequest, now_ms: int, token: int
        ) -> Result:
            return consumer_classic.handle_consumer_heartbeat(
                st, req, now_ms, token, self._topics, "", catalog, self._topic_version()
            )

        return handle

    def _topic_version(self) -> int | None:
        return None if self._topics_version is None else self._topics_version()

    @staticmethod
    async def _logged_when_done(
        req: cm.ConsumerGroupHeartbeatRequest, pending: Awaitable[cm.ConsumerGroupHeartbeatResponse]
    ) -> cm.ConsumerGroupHeartbeatResponse:
        return _logged_refusal(req, await pending)

    async def consumer_group_describe(
        self, req: cm.ConsumerGroupDescribeRequest
    ) -> cm.ConsumerGroupDescribeResponse:
        def status(gid: str) -> ErrorCode | None:
            return self.runtime.status(CONSUMER_GROUP_DESCRIBE, gid)

        resp = await self.runtime.run(
            req,
            cm.ConsumerGroupDescribeResponse,
            lambda now, token: consumer.handle_consumer_describe(self.state, req, now, token, status),
        )
        mixed = self._mixed
        if mixed is None:
            return resp
        # A mixed group is a classic group in the records (or none: consumer-protocol and legacy members only),
        # which the handler finds no consumer group for: its three kinds of members come from the edge.
        groups = []
        for g in resp.groups:
            ours = mixed.bridges(g.group_id) and g.error_code in (0, ErrorCode.GROUP_ID_NOT_FOUND)
            groups.append(await mixed.describe(g.group_id) if ours else g)
        return replace(resp, groups=tuple(groups))


def _logged_refusal(
    req: cm.ConsumerGroupHeartbeatRequest, resp: cm.ConsumerGroupHeartbeatResponse
) -> cm.ConsumerGroupHeartbeatResponse:
    if resp.error_code in _REFUSALS_WORTH_A_LOG:
        # Fatal for the client (librdkafka stops consuming): say why on the server side too.
        log.warning(
            "group=%s member %s: ConsumerGroupHeartbeat refused, %s: %s",
            req.group_id, req.member_id, ErrorCode(resp.error_code).name, resp.error_message,
        )  # fmt: skip
    return resp
