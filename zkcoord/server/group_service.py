"""The asyncio edge of the classic group coordinator: owns the live state, the clock, the timers and the durable log.

Each request gets a token and a future; the pure handlers (`zkcoord.group.handlers`) decide, and this class carries
the decision out: it appends the emitted records to the `RecordStore` (batched, in a worker thread, in emission
order), arms and cancels timers, and resolves futures. A response is released only once every record emitted
before or with it is durable, so an acknowledged OffsetCommit survives a crash and no response reveals state that
a crash could take back. If an append fails the service stops (fail-stop): the in-memory state is ahead of the log,
so every waiting and later request gets COORDINATOR_NOT_AVAILABLE until a new service reloads the log.

An `OffsetMirror` handed to the constructor (zkcoord.bridge.ZkOffsetBridge with `serve --bridge-zk-offsets`) sees
every acknowledged commit and merges every OffsetFetch with the legacy znodes; without one, nothing leaves the
coordinator's own store. A `MembershipBridge` (zkcoord.bridge.membership.MixedGroupBridge, `serve
--bridge-zk-groups`) makes the groups it matches mixed groups: JoinGroup keeps only legacy-compatible protocols,
the leader's SyncGroup assignment is replaced by the bridge's (held in ZooKeeper first), member departures release
owner znodes, legacy membership changes start a rebalance, and legacy members' generation -1 commits are stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from zkcoord.errors import ZkcoordError
from zkcoord.group import consumer, consumer_classic
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import CoordinatorState, subscription_topics
from zkcoord.group.results import Cancel, Result, TimerKey
from zkcoord.group.state import GroupState
from zkcoord.ratelog import RateLimitedLog
from zkcoord.records.offsets import encode_records
from zkcoord.server.seams import GroupCoordinator
from zkcoord.storage.store import RawRecord, RecordStore

log = logging.getLogger(__name__)

_Entry = tuple[list[RawRecord], list[tuple[int, GroupResponse]]]
TP = tuple[str, int]
LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
_REFUSALS_WORTH_A_LOG = frozenset(
    int(c) for c in (ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.GROUP_ID_NOT_FOUND)
)
CONSUMER_GROUP_HEARTBEAT = 68  # api keys, for the common status checks
CONSUMER_GROUP_DESCRIBE = 69


def _error_response(req: Any, code: ErrorCode) -> Any:
    """The whole-request error answer of any request the service parks, classic or consumer protocol."""
    if isinstance(req, (ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest)):
        return consumer.error_response(req, code)
    return h.error_response(req, code)


class CoordinatorUnavailable(ZkcoordError):
    """The group coordinator cannot carry out an internal change now (loading, stopped, or failed)."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class OffsetMirror(Protocol):
    """What the service needs of an offset mirror (zkcoord.bridge.ZkOffsetBridge, `serve --bridge-zk-offsets`):
    re-mirror loaded offsets, mirror an acknowledged commit, merge a fetch with the other store."""

    def submit(self, group: str, offsets: Mapping[TP, int]) -> asyncio.Future[bool]: ...

    async def mirror_commit(self, req: OffsetCommitRequest, resp: OffsetCommitResponse) -> None: ...

    async def fetch_merged(
        self, req: OffsetFetchRequest, resp: OffsetFetchResponse
    ) -> OffsetFetchResponse: ...


class MembershipBridge(Protocol):
    """What the service needs of the mixed-group bridge (zkcoord.bridge.membership.MixedGroupBridge,
    `serve --bridge-zk-groups`). Members are passed as (member id, client id, subscribed topics)."""

    incomplete: dict[str, bool]

    def bridges(self, group_id: str) -> bool: ...

    def usable_protocols(self, names: Iterable[str]) -> tuple[str, ...]: ...

    async def check_join(self, group: str, topics: Sequence[str], protocol: str) -> None: ...

    def watch(self, group: str, topics: Sequence[str], on_change: Callable[[], None]) -> None: ...

    async def assign(
        self,
        group: str,
        protocol: str,
        members: Sequence[tuple[str, str, tuple[str, ...]]],
        timeout_ms: int,
        metadata: Mapping[str, bytes] | None = None,
    ) -> dict[str, bytes]: ...

    async def preregister(self, group: str, member: tuple[str, str, tuple[str, ...]]) -> None: ...

    async def members_changed(self, group: str, present: Iterable[str]) -> None: ...

    async def legacy_owns(self, group: str, tps: Sequence[tuple[str, int]]) -> bool: ...


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
    ) -> None:
        self.config = config
        self._topics = topics
        self.store = store
        self._clock = clock
        self._new_uuid = new_uuid
        self._append_in_thread = append_in_thread
        self._owns = owns_group
        self.offset_mirror = offset_mirror
        self.membership_bridge = membership_bridge
        self._reported: dict[str, tuple[str, ...]] = {}  # bridged group -> members last told to the bridge
        self._bridge_tasks: set[asyncio.Future[Any]] = set()
        self.state = CoordinatorState(config)
        self._active = False
        self._loading = False
        self._failed: BaseException | None = None
        self._token = 0
        self._waiting: dict[int, tuple[asyncio.Future[Any], GroupRequest]] = {}
        self._timers: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = 0
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at: int | None = None
        self._queued: list[_Entry] = []  # emitted, not yet handed to the store
        self._in_flight: list[_Entry] = []  # being appended now
        self._writer: asyncio.Task[None] | None = None
        self._say = RateLimitedLog(log, burst=10, window_s=60.0)  # a store outage times out every commit

    # ------------------------------------------------------------------------------------------ lifecycle

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def start(self) -> None:
        """Load: replay the store into state. Requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS."""
        self._active = True
        self._loading = True
        try:
            now_ms = self.now_ms()

            def load() -> tuple[CoordinatorState, Result, int]:
                # Off the event loop, into a state of its own (requests meanwhile see the empty one), one record
                # at a time: no list of raw or decoded records beside the state being built.
                state = CoordinatorState(self.config)
                result, count = h.load_raw(state, self.store.load(), now_ms)
                return state, result, count

            started = time.monotonic()
            self.state, result, count = await asyncio.to_thread(load)
            self._apply(result)
            log.info(
                "group service loaded %d records: %d groups (%.0f ms)",
                count,
                len(self.state.groups),
                (time.monotonic() - started) * 1000,
            )
            self._remirror_loaded()
            for group_id in sorted(self.state.groups):
                self._report_members(group_id)
        except BaseException:
            self._active = False
            raise
        finally:
            self._loading = False

    def _remirror_loaded(self) -> None:
        """Queue the offsets of every loaded broker-managed group for the bridge: what a crash left unmirrored
        is mirrored now (never-regress, and a znode already at the value costs one read, no write)."""
        if self.offset_mirror is None:
            return
        for group_id in sorted(self.state.view.offsets):
            group = self.state.groups.get(group_id)
            if group is None or (group.generation <= 0 and group.protocol_type is None):
                continue  # only standalone committers: their ZooKeeper side is theirs (see mirror_commit)
            offsets = {tp: v.offset for tp, v in self.state.view.offsets[group_id].items() if v.offset >= 0}
            self.offset_mirror.submit(group_id, dict(sorted(offsets.items())))

    async def close(self) -> None:
        """Stop serving: parked requests are answered NOT_COORDINATOR (as on partition unload); pending writes finish."""
        self._active = False
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        for token, (fut, req) in list(self._waiting.items()):
            if not fut.done():
                fut.set_result(_error_response(req, ErrorCode.NOT_COORDINATOR))
            self._waiting.pop(token, None)

    def unload_groups(self) -> None:
        """Drop every group `owns_group` no longer covers (cluster mode: its offsets partition moved away)."""
        self._apply(h.unload_groups(self.state, self.owns_group, self.now_ms()))

    def owns_group(self, group_id: str) -> bool:
        return True if self._owns is None else self._owns(group_id)

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    # ------------------------------------------------------------------------------------------- requests

    def _status(self, api_key: int, group_id: str | None) -> ErrorCode | None:
        return h.group_status_error(
            group_id,
            api_key,
            active=self._active,
            loading=self._loading,
            coordinator=group_id is None or self.owns_group(group_id),
        )

    async def _run(
        self, req: GroupRequest, call: Callable[[int, int], Result], timeout_ms: int | None = None
    ) -> Any:
        token = self._token = self._token + 1
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._waiting[token] = (fut, req)
        expiry = None if timeout_ms is None else loop.call_later(timeout_ms / 1000.0, self._time_out, token)
        try:
            result = call(self.now_ms(), token)
        except Exception:
            log.exception("coordinator handler failed on %r", req)
            self._waiting.pop(token, None)
            return _error_response(req, ErrorCode.UNKNOWN_SERVER_ERROR)
        self._apply(result)
        group_id = getattr(req, "group_id", None)
        if isinstance(group_id, str):
            self._report_members(group_id)
        try:
            return await fut
        finally:
            self._waiting.pop(token, None)
            if expiry is not None:
                expiry.cancel()

    def _time_out(self, token: int) -> None:
        """A request's records were not stored in time (offsets.commit.timeout.ms): REQUEST_TIMED_OUT now; the
        write goes on, and its late response finds nobody waiting."""
        waiting = self._waiting.get(token)
        if waiting is not None and not waiting[0].done():
            self._say.log(
                logging.WARNING,
                "commit_timeout",
                "%s of group %s not stored within offsets.commit.timeout.ms=%d: REQUEST_TIMED_OUT",
                type(waiting[1]).__name__,
                getattr(waiting[1], "group_id", "?"),
                self.config.offsets_commit_timeout_ms,
            )
            waiting[0].set_result(h.error_response(waiting[1], ErrorCode.REQUEST_TIMED_OUT))

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse:
        err = self._status(h.JOIN_GROUP, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        if consumer.is_consumer_group(
            self.state, req.group_id
        ):  # a classic member hosted in a consumer group
            uuid = self._new_uuid() if req.member_id == "" else ""
            return await self._run(  # type: ignore[no-any-return]
                req,
                lambda now, token: consumer_classic.handle_join(
                    self.state, req, now, token, uuid, self._topics
                ),
            )
        if self._bridged(req.group_id):
            refused = await self._bridge_join(req)
            if isinstance(refused, JoinGroupResponse):
                return refused
            req = refused
        member_uuid = self._new_uuid() if req.member_id == "" else ""  # only a new member gets an id
        resp: JoinGroupResponse = await self._run(
            req, lambda now, token: h.handle_join(self.state, req, now, token, member_uuid)
        )
        return resp

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse:
        err = self._status(h.SYNC_GROUP, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        if self._bridged(req.group_id):
            bridged = await self._bridge_sync(req)
            if isinstance(bridged, SyncGroupResponse):
                return bridged
            req = bridged
        synced = req
        resp: SyncGroupResponse = await self._run(
            req, lambda now, token: h.handle_sync(self.state, synced, now, token)
        )
        return resp

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        err = self._status(h.HEARTBEAT, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        resp: HeartbeatResponse = await self._run(
            req, lambda now, token: h.handle_heartbeat(self.state, req, now, token)
        )
        return resp

    def heartbeat_now(self, req: HeartbeatRequest) -> HeartbeatResponse | Awaitable[HeartbeatResponse]:
        """`heartbeat` without a future when its answer need not wait for a write: a heartbeat emits no records,
        so with none pending ahead of it the answer is final now (the same handler, the same state change)."""
        err = self._status(h.HEARTBEAT, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        if self._queued or self._in_flight:
            return self.heartbeat(req)  # released behind the pending write, as every response is
        token = self._token = self._token + 1
        try:
            result = h.handle_heartbeat(self.state, req, self.now_ms(), token)
        except Exception:
            log.exception("coordinator handler failed on %r", req)
            return h.error_response(req, ErrorCode.UNKNOWN_SERVER_ERROR)  # type: ignore[return-value]
        if result.records or len(result.responses) != 1 or result.responses[0][0] != token:
            # Not the shape a heartbeat has today: carry it out the general way and wait for the answer.
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiting[token] = (fut, req)
            self._apply(result)
            return self._wait(token, fut)
        if result.timers:
            self._apply(Result(timers=result.timers))
        return result.responses[0][1]  # type: ignore[return-value]

    async def _wait(self, token: int, fut: asyncio.Future[Any]) -> Any:
        try:
            return await fut
        finally:
            self._waiting.pop(token, None)

    async def leave_group(self, req: LeaveGroupRequest) -> LeaveGroupResponse:
        err = self._status(h.LEAVE_GROUP, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        resp: LeaveGroupResponse = await self._run(
            req, lambda now, token: h.handle_leave(self.state, req, now, token)
        )
        return resp

    async def offset_commit(self, req: OffsetCommitRequest) -> OffsetCommitResponse:
        """Returns only after the committed offsets are durable in the store, or REQUEST_TIMED_OUT for every
        partition once offsets.commit.timeout.ms has passed without that."""
        err = self._status(h.OFFSET_COMMIT, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        handler = h.handle_offset_commit
        if consumer.is_consumer_group(self.state, req.group_id):
            handler = h.handle_consumer_group_commit
        elif self._bridged(req.group_id) and await self._legacy_member_commit(req):
            handler = h.handle_legacy_member_commit
        # Kafka's offsets.commit.timeout.ms: the append (ZooKeeper in cluster mode) gets that long, then the
        # commit is answered REQUEST_TIMED_OUT; the write goes on and, if it lands, the offsets hold.
        resp: OffsetCommitResponse = await self._run(
            req,
            lambda now, token: handler(self.state, req, now, token),
            timeout_ms=self.config.offsets_commit_timeout_ms,
        )
        if self.offset_mirror is not None:
            await self.offset_mirror.mirror_commit(req, resp)
        return resp

    async def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        err = self._status(h.OFFSET_FETCH, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        resp: OffsetFetchResponse = await self._run(
            req, lambda now, token: h.handle_offset_fetch(self.state, req, now, token)
        )
        if self.offset_mirror is not None:
            resp = await self.offset_mirror.fetch_merged(req, resp)
        return resp

    async def describe_groups(self, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
        def status(gid: str) -> ErrorCode | None:
            return self._status(h.DESCRIBE_GROUPS, gid)

        resp: DescribeGroupsResponse = await self._run(
            req, lambda now, token: h.handle_describe(self.state, req, now, token, status)
        )
        return resp

    async def list_groups(self, req: ListGroupsRequest) -> ListGroupsResponse:
        if not self._active:
            return ListGroupsResponse(int(ErrorCode.COORDINATOR_NOT_AVAILABLE), ())
        code = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) if self._loading else 0
        resp: ListGroupsResponse = await self._run(
            req, lambda now, token: h.handle_list(self.state, req, now, token, code)
        )
        return resp

    async def delete_groups(self, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
        def status(gid: str) -> ErrorCode | None:
            return self._status(h.DELETE_GROUPS, gid)

        resp: DeleteGroupsResponse = await self._run(
            req, lambda now, token: h.handle_delete(self.state, req, now, token, status)
        )
        return resp

    # ------------------------------------------------------------------- the consumer protocol (KIP-848)

    async def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat: answered once the records it emitted are durable, as every response is."""
        err = self._status(CONSUMER_GROUP_HEARTBEAT, req.group_id) if req.group_id else None
        if err is not None:
            return ConsumerGroupHeartbeatResponse(int(err))
        if req.group_id and self._bridged(req.group_id):
            return ConsumerGroupHeartbeatResponse(
                int(ErrorCode.UNSUPPORTED_VERSION),
                f"group {req.group_id} is a mixed group (--bridge-zk-groups): consumer-protocol members are not "
                "served in mixed groups yet; use group.protocol=classic",
            )
        new_id = self._new_uuid() if req.member_epoch == 0 and not req.member_id else ""
        resp: ConsumerGroupHeartbeatResponse = await self._run(
            req,  # type: ignore[arg-type]
            lambda now, token: consumer_classic.handle_consumer_heartbeat(
                self.state, req, now, token, self._topics, new_id
            ),
        )
        if resp.error_code in _REFUSALS_WORTH_A_LOG:
            # Fatal for the client (librdkafka stops consuming): say why on the server side too.
            log.warning(
                "group=%s member %s: ConsumerGroupHeartbeat refused, %s: %s",
                req.group_id, req.member_id, ErrorCode(resp.error_code).name, resp.error_message,
            )  # fmt: skip
        return resp

    async def consumer_group_describe(
        self, req: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        def status(gid: str) -> ErrorCode | None:
            return self._status(CONSUMER_GROUP_DESCRIBE, gid)

        resp: ConsumerGroupDescribeResponse = await self._run(
            req,  # type: ignore[arg-type]
            lambda now, token: consumer.handle_consumer_describe(self.state, req, now, token, status),
        )
        return resp

    # ----------------------------------------------------------------------------------- mixed groups

    async def partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Drop every group's committed offsets of these deleted partitions (Kafka's handleDeletedPartitions),
        returning once the tombstones are durable; CoordinatorUnavailable when they cannot be (the service is
        loading, stopped, or its append failed), so the caller does not report a deletion that a restart undoes."""
        if not self._active or self._loading:
            raise CoordinatorUnavailable("the group coordinator is not serving (loading or stopped)")
        self._apply(h.delete_partition_offsets(self.state, partitions, self.now_ms()))
        await self.flush()
        if self._failed is not None:
            raise CoordinatorUnavailable(f"the group coordinator's append failed: {self._failed!r}")

    def _bridged(self, group_id: str) -> bool:
        return self.membership_bridge is not None and self.membership_bridge.bridges(group_id)

    def request_rebalance(self, group_id: str) -> None:
        """A legacy member of a mixed group joined, left or lost its session (or a topic grew): rebalance."""
        if self._active and not self._loading and self.owns_group(group_id):
            log.info("group=%s legacy membership changed: rebalancing the broker-protocol side", group_id)
            self._apply(h.handle_external_rebalance(self.state, group_id, self.now_ms()))

    async def _bridge_join(self, req: JoinGroupRequest) -> JoinGroupRequest | JoinGroupResponse:
        """Keep only the protocols the legacy side knows; refuse a member that disagrees with the legacy ones."""
        bridge = self.membership_bridge
        assert bridge is not None
        try:
            usable = bridge.usable_protocols(name for name, _ in req.protocols)
            topics = tuple(subscription_topics(dict(req.protocols)[usable[0]]) or ())
            await bridge.check_join(req.group_id, topics, usable[0])
        except Exception as exc:
            # The member's own protocol or subscription disagrees: fatal, as Kafka answers it. Anything else (a
            # ZooKeeper failure) is not this member's fault: a retriable answer, it joins again after its backoff.
            refused = getattr(exc, "code", None) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            code = (
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL if refused else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
            log.error("group=%s member %r refused from the mixed group (%s): %s",
                      req.group_id, req.member_id, code.name, exc)  # fmt: skip
            return h.error_response(req, code)  # type: ignore[return-value]
        bridge.watch(req.group_id, topics, lambda: self.request_rebalance(req.group_id))
        group = self.state.groups.get(req.group_id)
        if (
            req.member_id
            and group is not None
            and req.member_id in group.pending_members
            and group.state is not GroupState.EMPTY
            and group.initial_join is None
        ):
            # The member id is known (KIP-394's second JoinGroup): register it now, so the legacy members
            # rebalance while this side joins, instead of after its SyncGroup. Not into an Empty group, whose
            # first rebalance waits group.initial.rebalance.delay.ms: the legacy members keep consuming meanwhile.
            try:
                await bridge.preregister(req.group_id, (req.member_id, req.client_id, topics))
            except Exception as exc:
                log.warning(
                    "group=%s member %s: early registration failed (%s)", req.group_id, req.member_id, exc
                )
        return replace(req, protocols=tuple((n, m) for n, m in req.protocols if n in usable))

    async def _bridge_sync(self, req: SyncGroupRequest) -> SyncGroupRequest | SyncGroupResponse:
        """The leader's SyncGroup: the bridge's assignment (held in ZooKeeper) replaces the leader's."""
        bridge = self.membership_bridge
        assert bridge is not None
        group = self.state.groups.get(req.group_id)
        if (
            group is None
            or group.state is not GroupState.COMPLETING_REBALANCE
            or group.generation != req.generation_id
            or group.leader_id != req.member_id
            or group.protocol_name is None
        ):
            return req
        protocol = group.protocol_name
        members = [
            (m.member_id, m.client_id, tuple(subscription_topics(m.metadata(protocol)) or ()))
            for m in group.members.values()
        ]
        # Members do not heartbeat while their JoinGroup/SyncGroup is answered, so the wait for previous owners
        # stays well inside the shortest session; what is not held by then goes to a later rebalance.
        shortest = min(m.session_timeout_ms for m in group.members.values())
        timeout_ms = max(500, min(group.rebalance_timeout_ms(), shortest) // 2)
        try:
            await self._mirror_settled(req.group_id, timeout_ms)
            # The members' subscriptions: a KIP-429 member says in it which partitions it still owns.
            subscriptions = {m.member_id: m.metadata(protocol) for m in group.members.values()}
            assignments = await bridge.assign(req.group_id, protocol, members, timeout_ms, subscriptions)
        except Exception as exc:
            log.error(
                "group=%s gen=%d hand-over failed: %s; rebalancing", req.group_id, req.generation_id, exc
            )
            self.request_rebalance(req.group_id)
            return h.error_response(req, ErrorCode.REBALANCE_IN_PROGRESS)  # type: ignore[return-value]
        if bridge.incomplete.get(req.group_id):
            # A previous owner did not let go in time: try again once its owner znode can be taken.
            loop = asyncio.get_running_loop()
            loop.call_later(1.0, self.request_rebalance, req.group_id)
        return replace(req, assignments=tuple(assignments.items()))

    async def _legacy_member_commit(self, req: OffsetCommitRequest) -> bool:
        """A generation -1 commit into a live mixed group: a legacy member's, if it owns every partition."""
        group = self.state.groups.get(req.group_id)
        if req.generation_id >= 0 or req.member_id or group is None:
            return False
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return False
        bridge = self.membership_bridge
        assert bridge is not None
        tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        try:
            return await bridge.legacy_owns(req.group_id, tps)
        except Exception as exc:
            log.warning("group=%s legacy commit: ZooKeeper ownership unknown (%s)", req.group_id, exc)
            return False

    async def _mirror_settled(self, group_id: str, timeout_ms: int) -> None:
        """Before partitions are handed to legacy members (who read only ZooKeeper), the group's committed
        offsets are in ZooKeeper: resubmitted to the offset mirror (never-regress, so a no-op when they landed)
        and waited for, bounded. Without a mirror, legacy members see only what is already there."""
        if self.offset_mirror is None:
            return
        stored = self.state.view.offsets.get(group_id, {})
        offsets = {tp: v.offset for tp, v in sorted(stored.items()) if v.offset >= 0}
        if offsets:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.shield(self.offset_mirror.submit(group_id, offsets)), timeout_ms / 1000
                )

    def _report_members(self, group_id: str) -> None:
        """Tell the bridge when a mixed group's member list changed (a departed member's znodes go)."""
        if not group_id or not self._bridged(group_id):
            return
        group = self.state.groups.get(group_id)
        present = (*group.members, *group.pending_members) if group is not None else ()
        if self._reported.get(group_id) == present:
            return
        if group is not None and group.members and self.membership_bridge is not None:
            # (Re)bind the legacy-change watch to this service: after a reload or a coordinator move the
            # previous service's callback would rebalance nothing.
            topics = sorted(group.subscribed_topics or group.compute_subscribed_topics() or ())
            group_id_ = group_id
            self.membership_bridge.watch(group_id, topics, lambda: self.request_rebalance(group_id_))
        self._reported[group_id] = present
        bridge = self.membership_bridge
        assert bridge is not None

        async def report() -> None:
            try:
                await self._mirror_settled(group_id, 5000)
                await bridge.members_changed(group_id, present)
            except Exception:
                log.exception("group=%s: releasing departed members' znodes failed", group_id)
                self._reported.pop(group_id, None)  # the next event retries

        task = asyncio.ensure_future(report())
        self._bridge_tasks.add(task)
        task.add_done_callback(self._bridge_tasks.discard)

    # ------------------------------------------------------------------------------------ carrying it out

    def _apply(self, result: Result) -> None:
        for op in result.timers:
            if isinstance(op, Cancel):
                self._timers.pop(op.key, None)
            else:
                self._timers[op.key] = op.deadline_ms
                self._seq += 1
                heapq.heappush(self._heap, (op.deadline_ms, self._seq, op.key))
        if result.timers:
            self._arm_wake()
        if result.records:
            self._queued.append((encode_records(result.records), list(result.responses)))
            self._kick_writer()
        elif result.responses:
            # Released behind any write still pending, so no response shows state that is not yet durable.
            if self._queued:
                self._queued[-1][1].extend(result.responses)
            elif self._in_flight:
                self._in_flight[-1][1].extend(result.responses)
            else:
                for token, response in result.responses:
                    self._deliver(token, response)

    def _deliver(self, token: int, response: GroupResponse) -> None:
        waiting = self._waiting.get(token)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(response)

    def _kick_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def _write_loop(self) -> None:
        while self._queued:
            self._in_flight, self._queued = self._queued, []
            batch = [raw for records, _ in self._in_flight for raw in records]
            error: BaseException | None = self._failed
            if error is None:
                try:
                    if self._append_in_thread:
                        await asyncio.to_thread(self.store.append, batch)
                    else:
                        self.store.append(batch)
                except Exception as exc:
                    log.exception("group service: append of %d records failed; stopping", len(batch))
                    error = self._failed = exc
                    self._active = False
            entries, self._in_flight = self._in_flight, []
            for _, responses in entries:
                for token, response in responses:
                    if error is not None:
                        waiting = self._waiting.get(token)
                        if waiting is not None:
                            response = _error_response(waiting[1], ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    self._deliver(token, response)

    async def flush(self) -> None:
        """Wait until everything emitted so far is durable (tests, shutdown)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    # --------------------------------------------------------------------------------------------- timers

    def _arm_wake(self) -> None:
        heap = self._heap
        while heap and self._timers.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)  # stale: cancelled or re-armed
        if not heap or not self._active:
            return
        first = heap[0][0]
        if self._wake is not None and self._wake_at is not None and self._wake_at <= first:
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = first
        delay = max(0.0, (first - self.now_ms()) / 1000.0)
        self._wake = asyncio.get_running_loop().call_later(delay, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        self._wake_at = None
        self.fire_due_timers()
        self._arm_wake()

    def fire_due_timers(self) -> int:
        """Fire every timer due at the clock's now; returns how many fired (tests drive a fake clock with it)."""
        fired = 0
        now = self.now_ms()
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            if self._timers.get(key) != deadline:
                continue
            del self._timers[key]
            fired += 1
            try:
                self._apply(h.on_timer(self.state, key, now))
            except Exception:
                log.exception("coordinator timer %s failed", key)
            self._report_members(key.group_id)
        if fired:
            self._arm_wake()
        return fired

    def next_timer_ms(self) -> int | None:
        live = [d for d, _, k in self._heap if self._timers.get(k) == d]
        return min(live) if live else None
