"""The asyncio edge of the classic group coordinator: owns the live state, the clock, the timers and the durable log.

Each request gets a token and a future; the pure handlers (`zkcoord.group.handlers`) decide, and this class carries
the decision out: it appends the emitted records to the `RecordStore` (batched, in a worker thread, in emission
order), arms and cancels timers, and resolves futures. A response is released only once every record emitted
before or with it is durable, so an acknowledged OffsetCommit survives a crash and no response reveals state that
a crash could take back. If an append fails the service stops (fail-stop): the in-memory state is ahead of the log,
so every waiting and later request gets COORDINATOR_NOT_AVAILABLE until a new service reloads the log.

An `OffsetMirror` handed to the constructor (zkcoord.bridge.ZkOffsetBridge with `serve --bridge-zk-offsets`) sees
every acknowledged commit and merges every OffsetFetch with the legacy znodes; without one, nothing leaves the
coordinator's own store.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
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
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Cancel, Result, TimerKey
from zkcoord.records.offsets import decode_record, encode_records
from zkcoord.server.seams import GroupCoordinator
from zkcoord.storage.store import RawRecord, RecordStore

log = logging.getLogger(__name__)

_Entry = tuple[list[RawRecord], list[tuple[int, GroupResponse]]]
TP = tuple[str, int]
LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


class OffsetMirror(Protocol):
    """What the service needs of an offset mirror (zkcoord.bridge.ZkOffsetBridge, `serve --bridge-zk-offsets`):
    re-mirror loaded offsets, mirror an acknowledged commit, merge a fetch with the other store."""

    def submit(self, group: str, offsets: Mapping[TP, int]) -> asyncio.Future[bool]: ...

    async def mirror_commit(self, req: OffsetCommitRequest, resp: OffsetCommitResponse) -> None: ...

    async def fetch_merged(
        self, req: OffsetFetchRequest, resp: OffsetFetchResponse
    ) -> OffsetFetchResponse: ...


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
    ) -> None:
        self.config = config
        self.store = store
        self._clock = clock
        self._new_uuid = new_uuid
        self._append_in_thread = append_in_thread
        self._owns = owns_group
        self.offset_mirror = offset_mirror
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

    # ------------------------------------------------------------------------------------------ lifecycle

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def start(self) -> None:
        """Load: replay the store into state. Requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS."""
        self._active = True
        self._loading = True
        try:
            raw = await asyncio.to_thread(lambda: list(self.store.load()))
            records = [decode_record(k, v) for k, v in raw]
            self._apply(h.load(self.state, records, self.now_ms()))
            log.info("group service loaded %d records: %d groups", len(records), len(self.state.groups))
            self._remirror_loaded()
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
                fut.set_result(h.error_response(req, ErrorCode.NOT_COORDINATOR))
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

    async def _run(self, req: GroupRequest, call: Callable[[int, int], Result]) -> Any:
        token = self._token = self._token + 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = (fut, req)
        try:
            result = call(self.now_ms(), token)
        except Exception:
            log.exception("coordinator handler failed on %r", req)
            self._waiting.pop(token, None)
            return h.error_response(req, ErrorCode.UNKNOWN_SERVER_ERROR)
        self._apply(result)
        try:
            return await fut
        finally:
            self._waiting.pop(token, None)

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse:
        err = self._status(h.JOIN_GROUP, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        member_uuid = self._new_uuid() if req.member_id == "" else ""  # only a new member gets an id
        resp: JoinGroupResponse = await self._run(
            req, lambda now, token: h.handle_join(self.state, req, now, token, member_uuid)
        )
        return resp

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse:
        err = self._status(h.SYNC_GROUP, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        resp: SyncGroupResponse = await self._run(
            req, lambda now, token: h.handle_sync(self.state, req, now, token)
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
        """Returns only after the committed offsets are durable in the store."""
        err = self._status(h.OFFSET_COMMIT, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        resp: OffsetCommitResponse = await self._run(
            req, lambda now, token: h.handle_offset_commit(self.state, req, now, token)
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
                            response = h.error_response(waiting[1], ErrorCode.COORDINATOR_NOT_AVAILABLE)
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
        if fired:
            self._arm_wake()
        return fired

    def next_timer_ms(self) -> int | None:
        live = [d for d, _, k in self._heap if self._timers.get(k) == d]
        return min(live) if live else None
