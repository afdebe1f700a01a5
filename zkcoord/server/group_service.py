"""The asyncio edge of the classic group coordinator: owns the live state, the clock, the timers and the durable log.

Each request gets a token and a future; the pure handlers (`zkcoord.group.handlers`) decide, and this class carries
the decision out: it appends the emitted records to the `RecordStore` (batched, in a worker thread, in emission
order), arms and cancels timers, and resolves futures. A response is released only once every record emitted
before or with it is durable, so an acknowledged OffsetCommit survives a crash and no response reveals state that
a crash could take back. If an append fails the service stops (fail-stop): the in-memory state is ahead of the log,
so every waiting and later request gets COORDINATOR_NOT_AVAILABLE until a new service reloads the log.

With a `ZkOffsetBridge` (`serve --bridge-zk-offsets`), OffsetFetch answers the per-partition max of the
coordinator's offset and the legacy znode `/consumers/[group]/offsets/[topic]/[partition]` (a ZooKeeper failure is
reported as a retriable error, never hidden behind the coordinator's value), and every acknowledged commit of a
group member is mirrored to those znodes without ever moving one backwards (docs/migration.md §9).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from zkcoord.errors import ConfigError
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
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Cancel, Result, TimerKey
from zkcoord.records.offsets import decode_record, encode_records
from zkcoord.server.seams import GroupCoordinator
from zkcoord.storage.store import RawRecord, RecordStore
from zkcoord.zk.bridge_offsets import MirrorOutcome, ZkBridgeUnavailable, ZkOffsetsRead

log = logging.getLogger(__name__)

_Entry = tuple[list[RawRecord], list[tuple[int, GroupResponse]]]
TP = tuple[str, int]
LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


# ------------------------------------------------------------------------------------ the ZooKeeper offset bridge


def accepted_commits(req: OffsetCommitRequest, resp: OffsetCommitResponse) -> dict[TP, int]:
    """The offsets of `req` the coordinator acknowledged (error NONE), as (topic, partition) -> offset; a
    partition named twice keeps its highest offset, so the result never depends on request order."""
    errors = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
    out: dict[TP, int] = {}
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if errors.get(tp) == 0 and p.committed_offset >= 0:
                out[tp] = max(p.committed_offset, out.get(tp, p.committed_offset))
    return dict(sorted(out.items()))


def merge_fetch(
    resp: OffsetFetchResponse, zk: ZkOffsetsRead, *, all_partitions: bool
) -> tuple[OffsetFetchResponse, tuple[TP, ...]]:
    """Per partition, the max of the coordinator's committed offset and ZooKeeper's; returns the response and
    the partitions where ZooKeeper was ahead.

    A partition whose znode could not be used (`zk.errors`) answers COORDINATOR_LOAD_IN_PROGRESS, offset -1:
    the max is only known when both sides are, and a client retries that code instead of starting from an
    older offset. A ZooKeeper value that wins carries no metadata and leader epoch -1 (the coordinator's
    belong to its own, lower, offset). With `all_partitions` (a request for every committed partition),
    partitions only ZooKeeper has are added, topics and partitions sorted after the coordinator's."""
    ahead: list[TP] = []

    def merged(topic: str, part: OffsetFetchResponsePartition) -> OffsetFetchResponsePartition:
        tp = (topic, part.partition_index)
        if part.error_code != 0:
            return part
        if tp in zk.errors:
            return OffsetFetchResponsePartition(part.partition_index, -1, -1, "", LOAD_IN_PROGRESS)
        stored = zk.offsets.get(tp)
        if stored is not None and stored > part.committed_offset:
            ahead.append(tp)
            return OffsetFetchResponsePartition(part.partition_index, stored, -1, "", 0)
        return part

    topics = [
        OffsetFetchResponseTopic(t.name, tuple(merged(t.name, p) for p in t.partitions)) for t in resp.topics
    ]
    if all_partitions:
        known = {(t.name, p.partition_index) for t in resp.topics for p in t.partitions}
        extra: dict[str, list[OffsetFetchResponsePartition]] = {}
        for tp in sorted((set(zk.offsets) | set(zk.errors)) - known):
            missing = OffsetFetchResponsePartition(tp[1], -1, -1, "", 0)
            extra.setdefault(tp[0], []).append(merged(tp[0], missing))
        by_name = {t.name: i for i, t in enumerate(topics)}
        for name in sorted(extra):
            if name in by_name:
                old = topics[by_name[name]]
                topics[by_name[name]] = OffsetFetchResponseTopic(name, old.partitions + tuple(extra[name]))
            else:
                topics.append(OffsetFetchResponseTopic(name, tuple(extra[name])))
    return OffsetFetchResponse(resp.error_code, tuple(topics), resp.throttle_time_ms), tuple(ahead)


class ZkSide(Protocol):
    """What the bridge needs from ZooKeeper (zkcoord.zk.bridge_offsets.ZkOffsetBridgeStore); blocking calls."""

    @property
    def connected(self) -> bool: ...

    def read(self, group: str, partitions: Iterable[TP] | None) -> ZkOffsetsRead: ...

    def mirror(self, group: str, offsets: Mapping[TP, int]) -> MirrorOutcome: ...


@dataclass
class BridgeStats:
    """Counters of the bridge since start; `pending` is what is acknowledged but not yet in ZooKeeper."""

    mirrored: int = 0  # partitions written
    unchanged: int = 0  # already at the value
    kept_higher: int = 0  # a znode was ahead (a legacy member committed further): left as it was
    refused: int = 0  # never mirrorable (illegal legacy name, negative offset)
    mirror_failures: int = 0  # failed write rounds (each one retried)
    fetch_zk_ahead: int = 0  # fetched partitions answered from ZooKeeper
    fetch_failures: int = 0  # fetches answered LOAD_IN_PROGRESS because ZooKeeper could not be read
    pending: int = 0
    last_error: str = ""


class ZkOffsetBridge:
    """Process-wide (one per `serve`, shared by every GroupService, so cluster mode's services that come and go
    share one ZooKeeper session and one queue). Start and close it on the serving loop.

    Mirror: acknowledged offsets are queued per (group, topic, partition), keeping the highest, and a writer
    task writes them in the background (never-regress, batched multi-ops). A commit response waits up to
    `ack_wait_ms` for its own offsets to land, so tools reading ZooKeeper right after a commit see it; it is
    acknowledged either way (the coordinator's store is the store of record). A failed round is logged, counted
    and retried with backoff (`retry_backoff_ms` doubling up to `max_retry_backoff_ms`); while ZooKeeper fails,
    commits do not wait at all. On close, what is still pending gets one last chance within `close_timeout_ms`,
    and whatever stays unmirrored is logged (a restarted coordinator re-mirrors every group's offsets on load,
    and `zkcoord migrate verify` lists any lag).
    """

    def __init__(
        self,
        zk: ZkSide,
        *,
        ack_wait_ms: int = 1000,
        fetch_timeout_ms: int = 5000,
        retry_backoff_ms: int = 100,
        max_retry_backoff_ms: int = 5000,
        close_timeout_ms: int = 5000,
    ) -> None:
        for name, value in (
            ("ack_wait_ms", ack_wait_ms),
            ("fetch_timeout_ms", fetch_timeout_ms),
            ("retry_backoff_ms", retry_backoff_ms),
            ("max_retry_backoff_ms", max_retry_backoff_ms),
            ("close_timeout_ms", close_timeout_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an int >= 0, got {value!r}")
        if fetch_timeout_ms == 0:
            raise ConfigError("fetch_timeout_ms must be > 0")
        self.zk = zk
        self.ack_wait_ms = ack_wait_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_retry_backoff_ms = max_retry_backoff_ms
        self.close_timeout_ms = close_timeout_ms
        self.stats = BridgeStats()
        self._pending: dict[str, dict[TP, int]] = {}
        self._waiters: list[tuple[asyncio.Future[bool], str, tuple[TP, ...]]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self._failing = False
        self._backoff_ms = retry_backoff_ms
        self._close_rounds = 0

    @property
    def healthy(self) -> bool:
        """False from a failed round until the next round that succeeds."""
        return not self._failing

    async def start(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._writer is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._writer), self.close_timeout_ms / 1000)
            except TimeoutError:
                self._writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._writer
        left = sum(len(v) for v in self._pending.values())
        if left:
            log.error(
                "zk offset bridge closed with %d offsets of %d groups not mirrored (last error: %s); "
                "a coordinator that loads these groups mirrors them again, `zkcoord migrate verify` lists them",
                left,
                len(self._pending),
                self.stats.last_error,
            )
        for fut, _, _ in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    # -- mirror ------------------------------------------------------------------------------------------------

    def submit(self, group: str, offsets: Mapping[TP, int]) -> asyncio.Future[bool]:
        """Queue `offsets` for the znodes of `group`; the future says whether they landed (or were already met)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if not offsets:
            fut.set_result(True)
            return fut
        queued = self._pending.setdefault(group, {})
        for tp, offset in offsets.items():
            queued[tp] = max(offset, queued.get(tp, offset))
        self.stats.pending = sum(len(v) for v in self._pending.values())
        self._waiters.append((fut, group, tuple(sorted(offsets))))
        self._wake.set()
        return fut

    async def mirror_commit(self, req: OffsetCommitRequest, resp: OffsetCommitResponse) -> None:
        """Mirror what `resp` acknowledged of `req`, for members of a broker-managed group (generation >= 0).

        Standalone committers (generation -1: legacy members in dual commit, `migrate` seeding) are left out:
        they write ZooKeeper themselves with versioned writes, which a coordinator write in between would make
        fail; their ZooKeeper side is theirs to keep."""
        if req.generation_id < 0:
            return
        offsets = accepted_commits(req, resp)
        if not offsets:
            return
        done = self.submit(req.group_id, offsets)
        if self.ack_wait_ms and self.healthy:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(done), self.ack_wait_ms / 1000)

    async def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until nothing is pending (tests); False on timeout."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self._pending or self._waiters:
            if asyncio.get_running_loop().time() > deadline:
                return False
            self._wake.set()
            await asyncio.sleep(0.01)
        return True

    async def _write_loop(self) -> None:
        while True:
            if not self._pending:
                if self._closing:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            batch, self._pending = self._pending, {}
            waiters, self._waiters = self._waiters, []
            results = await asyncio.to_thread(self._write_all, batch)
            failed_any = False
            for group, (outcome, error) in results.items():
                if error is not None or outcome.failed:
                    failed_any = True
                    retry = (
                        batch[group] if error is not None else {tp: batch[group][tp] for tp in outcome.failed}
                    )
                    queued = self._pending.setdefault(group, {})
                    for tp, offset in retry.items():
                        queued[tp] = max(offset, queued.get(tp, offset))
            self.stats.pending = sum(len(v) for v in self._pending.values())
            for fut, group, tps in waiters:
                outcome, error = results[group]
                if not fut.done():
                    fut.set_result(error is None and not any(tp in outcome.failed for tp in tps))
            if failed_any:
                self.stats.mirror_failures += 1
                if not self._failing:
                    log.warning("zk offset bridge: mirroring failed (%s); retrying", self.stats.last_error)
                self._failing = True
                if self._closing:
                    # one last chance on close, then give up and report what is left
                    self._close_rounds += 1
                    if self._close_rounds > 1:
                        return
                delay = self._backoff_ms / 1000
                self._backoff_ms = min(max(1, self._backoff_ms * 2), self.max_retry_backoff_ms)
                with contextlib.suppress(TimeoutError):
                    # woken early only by close(); new commits join the next round
                    await asyncio.wait_for(self._until_closing(), delay)
            else:
                if self._failing:
                    log.warning("zk offset bridge: mirroring recovered")
                self._failing = False
                self._backoff_ms = self.retry_backoff_ms

    async def _until_closing(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()

    def _write_all(
        self, batch: Mapping[str, Mapping[TP, int]]
    ) -> dict[str, tuple[MirrorOutcome, str | None]]:
        """One round in a worker thread: each group's offsets (sorted) as never-regress multi-ops."""
        results: dict[str, tuple[MirrorOutcome, str | None]] = {}
        for group in sorted(batch):
            try:
                outcome = self.zk.mirror(group, dict(sorted(batch[group].items())))
            except ZkBridgeUnavailable as exc:
                self.stats.last_error = str(exc)
                results[group] = (MirrorOutcome(), str(exc))
                continue
            except Exception as exc:  # a bug or an unexpected kazoo state must not kill the writer
                log.exception("zk offset bridge: mirroring group %s failed", group)
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                results[group] = (MirrorOutcome(), self.stats.last_error)
                continue
            self.stats.mirrored += len(outcome.written)
            self.stats.unchanged += len(outcome.unchanged)
            self.stats.kept_higher += len(outcome.kept_higher)
            self.stats.refused += len(outcome.refused)
            for tp, (stored, refused) in sorted(outcome.kept_higher.items()):
                log.info("group=%s %s/%d: znode %d ahead of the commit %d; kept", group, *tp, stored, refused)
            for tp, reason in sorted(outcome.refused.items()):
                log.warning("group=%s %s/%d: not mirrored: %s", group, *tp, reason)
            if outcome.failed:
                self.stats.last_error = next(iter(outcome.failed.values()))
            results[group] = (outcome, None)
        return results

    # -- fetch ------------------------------------------------------------------------------------------------

    async def fetch_merged(self, req: OffsetFetchRequest, resp: OffsetFetchResponse) -> OffsetFetchResponse:
        """`resp` (the coordinator's answer) merged with ZooKeeper; ZooKeeper unreachable => the whole
        answer is COORDINATOR_LOAD_IN_PROGRESS (the client retries), never the coordinator's value alone."""
        if resp.error_code != 0:
            return resp
        wanted = (
            None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
        )
        try:
            zk = await asyncio.wait_for(
                asyncio.to_thread(self.zk.read, req.group_id, wanted), self.fetch_timeout_ms / 1000
            )
        except (ZkBridgeUnavailable, TimeoutError) as exc:
            self.stats.fetch_failures += 1
            reason = str(exc) or "ZooKeeper read timed out"
            self.stats.last_error = reason
            log.warning(
                "group=%s OffsetFetch: ZooKeeper side unavailable (%s); answering LOAD_IN_PROGRESS",
                req.group_id,
                reason,
            )
            return h.error_response(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)  # type: ignore[return-value]
        if zk.errors:
            self.stats.fetch_failures += 1
            for tp, reason in sorted(zk.errors.items()):
                log.warning(
                    "group=%s %s/%d: OffsetFetch answers LOAD_IN_PROGRESS: %s", req.group_id, *tp, reason
                )
        merged, ahead = merge_fetch(resp, zk, all_partitions=req.topics is None)
        self.stats.fetch_zk_ahead += len(ahead)
        return merged


_process_bridge: ZkOffsetBridge | None = None


def install_zk_offset_bridge(bridge: ZkOffsetBridge | None) -> None:
    """Make every GroupService created afterwards in this process use `bridge` (None: stop doing so).

    Why process-wide: services are built by the node and, in cluster mode, by the cluster routing whenever an
    offsets partition moves here; the bridge is one serve option that neither needs to know about."""
    global _process_bridge
    _process_bridge = bridge


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
        zk_bridge: ZkOffsetBridge | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._clock = clock
        self._new_uuid = new_uuid
        self._append_in_thread = append_in_thread
        self._owns = owns_group
        self.zk_bridge = zk_bridge if zk_bridge is not None else _process_bridge
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
        if self.zk_bridge is None:
            return
        for group_id in sorted(self.state.view.offsets):
            group = self.state.groups.get(group_id)
            if group is None or (group.generation <= 0 and group.protocol_type is None):
                continue  # only standalone committers: their ZooKeeper side is theirs (see mirror_commit)
            offsets = {tp: v.offset for tp, v in self.state.view.offsets[group_id].items() if v.offset >= 0}
            self.zk_bridge.submit(group_id, dict(sorted(offsets.items())))

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
        member_uuid = self._new_uuid()
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
        if self.zk_bridge is not None:
            await self.zk_bridge.mirror_commit(req, resp)
        return resp

    async def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        err = self._status(h.OFFSET_FETCH, req.group_id)
        if err is not None:
            return h.error_response(req, err)  # type: ignore[return-value]
        resp: OffsetFetchResponse = await self._run(
            req, lambda now, token: h.handle_offset_fetch(self.state, req, now, token)
        )
        if self.zk_bridge is not None:
            resp = await self.zk_bridge.fetch_merged(req, resp)
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
