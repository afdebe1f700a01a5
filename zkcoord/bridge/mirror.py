"""The coordinator's offset mirror (`zkcoord serve --bridge-zk-offsets`): every acknowledged commit of a group
member is mirrored to the legacy znode `/consumers/[group]/offsets/[topic]/[partition]` without ever moving one
backwards, and OffsetFetch answers the per-partition max of the coordinator's offset and that znode (a ZooKeeper
failure is reported as a retriable error, never hidden behind the coordinator's value). docs/migration.md §9.

The group service knows it only as its `OffsetMirror` protocol (zkcoord.server.group_service): the mirror is
built by whoever starts the node and handed to it, never switched on by a global.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from zkcoord.bridge.policy import max_of_stores
from zkcoord.bridge.zk_store import ZkBridgeUnavailable
from zkcoord.errors import ConfigError
from zkcoord.group.errors import ErrorCode
from zkcoord.group.handlers import error_response
from zkcoord.group.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from zkcoord.group.model import OffsetKey
from zkcoord.ratelog import RateLimitedLog
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk.offset_store import OffsetsRead, WriteReport

log = logging.getLogger(__name__)
# A client retries a LOAD_IN_PROGRESS fetch every retry.backoff.ms (100 ms): one line per fetch was ~10 lines/s
# for as long as a znode stayed malformed. Every event is still counted (stats.fetch_failures, _say.events).
_say = RateLimitedLog(log)

LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def accepted_commits(req: OffsetCommitRequest, resp: OffsetCommitResponse) -> dict[TopicPartition, int]:
    """The offsets of `req` the coordinator acknowledged (error NONE), as (topic, partition) -> offset; a
    partition named twice keeps its highest offset, so the result never depends on request order."""
    errors = {
        TopicPartition(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
    }
    out: dict[TopicPartition, int] = {}
    for t in req.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if errors.get(tp) == 0 and p.committed_offset >= 0:
                out[tp] = max(p.committed_offset, out.get(tp, p.committed_offset))
    return dict(sorted(out.items()))


def merge_fetch(
    resp: OffsetFetchResponse, zk: OffsetsRead, *, all_partitions: bool
) -> tuple[OffsetFetchResponse, tuple[TopicPartition, ...]]:
    """Per partition, the max of the coordinator's committed offset and ZooKeeper's; returns the response and
    the partitions where ZooKeeper was ahead.

    A partition whose znode could not be used (`zk.errors`) answers COORDINATOR_LOAD_IN_PROGRESS, offset -1:
    the max is only known when both sides are, and a client retries that code instead of starting from an
    older offset. A ZooKeeper value that wins carries no metadata and leader epoch -1 (the coordinator's
    belong to its own, lower, offset). With `all_partitions` (a request for every committed partition),
    partitions only ZooKeeper has are added, topics and partitions sorted after the coordinator's."""
    ahead: list[TopicPartition] = []

    def merged(topic: str, part: OffsetFetchResponsePartition) -> OffsetFetchResponsePartition:
        tp = TopicPartition(topic, part.partition_index)
        if part.error_code != 0:
            return part
        if tp in zk.errors:
            return OffsetFetchResponsePartition(part.partition_index, -1, -1, "", LOAD_IN_PROGRESS)
        best = max_of_stores(zk.offsets.get(tp), part.committed_offset)
        if best is not None and best != part.committed_offset:
            ahead.append(tp)
            return OffsetFetchResponsePartition(part.partition_index, best, -1, "", 0)
        return part

    topics = [
        OffsetFetchResponseTopic(t.name, tuple(merged(t.name, p) for p in t.partitions)) for t in resp.topics
    ]
    if all_partitions:
        known = {TopicPartition(t.name, p.partition_index) for t in resp.topics for p in t.partitions}
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
    """What the bridge needs from ZooKeeper (zkcoord.bridge.zk_store.ZkOffsetBridgeStore); blocking calls."""

    @property
    def connected(self) -> bool: ...

    def read(self, group: str, partitions: Iterable[TopicPartition] | None) -> OffsetsRead: ...

    def mirror(self, group: str, offsets: Mapping[TopicPartition, int]) -> WriteReport: ...


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
        self._pending: dict[str, dict[TopicPartition, int]] = {}
        self._waiters: list[tuple[asyncio.Future[bool], str, tuple[TopicPartition, ...]]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self._failing = False
        self._in_flight = False  # a round is being written (its offsets are neither pending nor settled)
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

    def submit(
        self, group: str, offsets: Mapping[TopicPartition, int] | Mapping[OffsetKey, int]
    ) -> asyncio.Future[bool]:
        """Queue `offsets` for the znodes of `group`; the future says whether they landed (or were already met).

        The coordinator's own offset map is keyed by plain pairs (`zkcoord.group.model.OffsetKey`, kept plain
        for load speed): they become TopicPartition here, where they enter the bridge."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if not offsets:
            fut.set_result(True)
            return fut
        queued = self._pending.setdefault(group, {})
        given = sorted(TopicPartition(*tp) for tp in offsets)
        for tp in given:
            offset = offsets[tp]
            queued[tp] = max(offset, queued.get(tp, offset))
        self.stats.pending = sum(len(v) for v in self._pending.values())
        self._waiters.append((fut, group, tuple(given)))
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
        while self._pending or self._waiters or self._in_flight:
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
            self._in_flight = (
                True  # until a failed round's offsets are queued again: flush must not see "nothing"
            )
            try:
                results = await asyncio.to_thread(self._write_all, batch)
            except BaseException:
                self._in_flight = False
                raise
            failed_any = False
            for group, (outcome, error) in results.items():
                if error is not None or outcome.errors:
                    failed_any = True
                    retry = (
                        batch[group] if error is not None else {tp: batch[group][tp] for tp in outcome.errors}
                    )
                    queued = self._pending.setdefault(group, {})
                    for tp, offset in retry.items():
                        queued[tp] = max(offset, queued.get(tp, offset))
            self._in_flight = False
            self.stats.pending = sum(len(v) for v in self._pending.values())
            for fut, group, tps in waiters:
                outcome, error = results[group]
                if not fut.done():
                    fut.set_result(error is None and not any(tp in outcome.errors for tp in tps))
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
        self, batch: Mapping[str, Mapping[TopicPartition, int]]
    ) -> dict[str, tuple[WriteReport, str | None]]:
        """One round in a worker thread: each group's offsets (sorted) as never-regress multi-ops."""
        results: dict[str, tuple[WriteReport, str | None]] = {}
        for group in sorted(batch):
            try:
                outcome = self.zk.mirror(group, dict(sorted(batch[group].items())))
            except ZkBridgeUnavailable as exc:
                self.stats.last_error = str(exc)
                results[group] = (WriteReport(), str(exc))
                continue
            except Exception as exc:  # a bug or an unexpected kazoo state must not kill the writer
                log.exception("zk offset bridge: mirroring group %s failed", group)
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                results[group] = (WriteReport(), self.stats.last_error)
                continue
            self.stats.mirrored += len(outcome.written)
            self.stats.unchanged += len(outcome.unchanged)
            self.stats.kept_higher += len(outcome.kept_higher)
            self.stats.refused += len(outcome.refused)
            for tp, (stored, refused) in sorted(outcome.kept_higher.items()):
                log.info("group=%s %s/%d: znode %d ahead of the commit %d; kept", group, *tp, stored, refused)
            for tp, reason in sorted(outcome.refused.items()):
                log.warning("group=%s %s/%d: not mirrored: %s", group, *tp, reason)
            if outcome.errors:
                self.stats.last_error = next(iter(outcome.errors.values()))
            results[group] = (outcome, None)
        return results

    # -- fetch ------------------------------------------------------------------------------------------------

    async def fetch_merged(self, req: OffsetFetchRequest, resp: OffsetFetchResponse) -> OffsetFetchResponse:
        """`resp` (the coordinator's answer) merged with ZooKeeper; ZooKeeper unreachable => the whole
        answer is COORDINATOR_LOAD_IN_PROGRESS (the client retries), never the coordinator's value alone."""
        if resp.error_code != 0:
            return resp
        wanted = (
            None
            if req.topics is None
            else [TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes]
        )
        try:
            zk = await asyncio.wait_for(
                asyncio.to_thread(self.zk.read, req.group_id, wanted), self.fetch_timeout_ms / 1000
            )
        except (ZkBridgeUnavailable, TimeoutError) as exc:
            self.stats.fetch_failures += 1
            reason = str(exc) or "ZooKeeper read timed out"
            self.stats.last_error = reason
            _say.log(
                logging.WARNING,
                "fetch-zk-unavailable",
                "group=%s OffsetFetch: ZooKeeper side unavailable (%s); answering LOAD_IN_PROGRESS",
                req.group_id,
                reason,
            )
            answer = error_response(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            assert isinstance(answer, OffsetFetchResponse)
            return answer
        if zk.errors:
            self.stats.fetch_failures += 1
            for tp, malformed in sorted(zk.errors.items()):
                _say.log(
                    logging.WARNING,
                    "fetch-zk-malformed",
                    "group=%s %s/%d: OffsetFetch answers LOAD_IN_PROGRESS: %s",
                    req.group_id,
                    *tp,
                    malformed,
                )
        merged, ahead = merge_fetch(resp, zk, all_partitions=req.topics is None)
        self.stats.fetch_zk_ahead += len(ahead)
        return merged
