"""The asyncio runtime under the group service: owns the live coordinator state, the clock, the timers, the parked
requests and the durable record log, and knows nothing of any one group API (Kafka's `CoordinatorRuntime`).

A request gets a token and a future; a pure handler (`zkcoord.group.handlers`, `zkcoord.group.consumer`) decides,
and the runtime carries the decision out: it appends the emitted records to the `RecordStore` (batched, in a worker
thread, in emission order), arms and cancels timers, and resolves futures. A response is released only once every
record emitted before or with it is durable, so an acknowledged OffsetCommit survives a crash and no response
reveals state that a crash could take back. If an append fails the runtime stops (fail-stop): the in-memory state is
ahead of the log, so every waiting and later request gets COORDINATOR_NOT_AVAILABLE until a new runtime reloads it.

Typed: `run(req, JoinGroupResponse, handle)` returns a `JoinGroupResponse` (checked, not cast), for the classic
handlers and the KIP-848 consumer handlers alike. The one observer, `touched(group_id)`, is handed to the
constructor: it is told after each request's decision and each fired timer which group they concerned.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from zkcoord.group import consumer
from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import GroupRequest, GroupResponse
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Cancel, Result, TimerKey
from zkcoord.ratelog import RateLimitedLog
from zkcoord.records.offsets import encode_records
from zkcoord.storage.store import RawRecord, RecordStore

log = logging.getLogger(__name__)

Request = GroupRequest | ConsumerGroupHeartbeatRequest | ConsumerGroupDescribeRequest
Response = GroupResponse | ConsumerGroupHeartbeatResponse | ConsumerGroupDescribeResponse
R = TypeVar("R", bound=Response)
Q = TypeVar("Q", bound=Request)
Handle = Callable[[int, int], Result]  # (now_ms, token) -> the pure handler's decision
_Entry = tuple[list[RawRecord], list[tuple[int, Response]]]


def error_response(req: Request, code: ErrorCode) -> Response:
    """The whole-request error answer of any request the runtime parks, classic or consumer protocol."""
    if isinstance(req, (ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest)):
        return consumer.error_response(req, code)
    return h.error_response(req, code)


def answer_as(answer: type[R], response: Response) -> R:
    """`response` as the type its request is answered with; a handler that answered another type is a bug."""
    if isinstance(response, answer):
        return response
    raise TypeError(f"expected a {answer.__name__}, the handler answered {type(response).__name__}")


def refusal(req: Request, answer: type[R], code: ErrorCode) -> R:
    """The typed whole-request error answer of `req`."""
    return answer_as(answer, error_response(req, code))


class CoordinatorRuntime:
    """One per group service. `clock()` returns seconds (like `time.time`); the core sees `int(clock() * 1000)`."""

    def __init__(
        self,
        config: GroupConfig,
        store: RecordStore,
        *,
        clock: Callable[[], float] = time.time,
        append_in_thread: bool = True,
        owns_group: Callable[[str], bool] | None = None,
        touched: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._clock = clock
        self._append_in_thread = append_in_thread
        self._owns = owns_group
        self._touched = touched
        self.state = CoordinatorState(config)
        self._active = False
        self._loading = False
        self._failed: BaseException | None = None
        self._token = 0
        self._waiting: dict[int, tuple[asyncio.Future[Response], Request]] = {}
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

    @property
    def serving(self) -> bool:
        """Started, loaded, and neither stopped nor failed."""
        return self._active and not self._loading

    @property
    def active(self) -> bool:
        return self._active

    @property
    def loading(self) -> bool:
        return self._loading

    async def start(self, loaded: Callable[[], None] | None = None) -> None:
        """Load: replay the store into state (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS), then call
        `loaded()` before the first request is served."""
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
            self.apply(result)
            log.info(
                "group service loaded %d records: %d groups (%.0f ms)",
                count,
                len(self.state.groups),
                (time.monotonic() - started) * 1000,
            )
            if loaded is not None:
                loaded()
        except BaseException:
            self._active = False
            raise
        finally:
            self._loading = False

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
                fut.set_result(error_response(req, ErrorCode.NOT_COORDINATOR))
            self._waiting.pop(token, None)

    def owns_group(self, group_id: str) -> bool:
        return True if self._owns is None else self._owns(group_id)

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def status(self, api_key: int, group_id: str | None) -> ErrorCode | None:
        """Why a request for `group_id` cannot be served now (loading, stopped, not its coordinator), or None."""
        return h.group_status_error(
            group_id,
            api_key,
            active=self._active,
            loading=self._loading,
            coordinator=group_id is None or self.owns_group(group_id),
        )

    # ------------------------------------------------------------------------------------------- requests

    async def run(self, req: Request, answer: type[R], handle: Handle, timeout_ms: int | None = None) -> R:
        """Decide `req` with `handle(now_ms, token)`, carry the decision out, and return the answer once it may be
        released; after `timeout_ms` (offsets.commit.timeout.ms) REQUEST_TIMED_OUT instead."""
        token = self._token = self._token + 1
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Response] = loop.create_future()
        self._waiting[token] = (fut, req)
        expiry = None if timeout_ms is None else loop.call_later(timeout_ms / 1000.0, self._time_out, token)
        try:
            result = handle(self.now_ms(), token)
        except Exception:
            log.exception("coordinator handler failed on %r", req)
            self._waiting.pop(token, None)
            return refusal(req, answer, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.apply(result)
        group_id = getattr(req, "group_id", None)
        if isinstance(group_id, str) and self._touched is not None:
            self._touched(group_id)
        try:
            return answer_as(answer, await fut)
        finally:
            self._waiting.pop(token, None)
            if expiry is not None:
                expiry.cancel()

    def run_now(
        self,
        api_key: int,
        group_id: str,
        req: Q,
        answer: type[R],
        handler: Callable[[CoordinatorState, Q, int, int], Result],
    ) -> R | Awaitable[R]:
        """The status check and `run` without a future when the answer need not wait for a write: with nothing
        pending ahead and a decision that is one answer and no records (a heartbeat's shape), the answer is final
        now (the same handler, the same state change). Anything else is carried out the general way and awaited.
        The hottest path (every heartbeat): a serving coordinator of a named group skips the status function (it
        would answer None), and `handler(state, req, now_ms, token)` is called directly, with no closure built."""
        serving = (
            group_id and self._active and not self._loading and (self._owns is None or self._owns(group_id))
        )
        if not serving:
            err = self.status(api_key, group_id)
            if err is not None:
                return refusal(req, answer, err)
        if self._queued or self._in_flight:  # released behind the pending write, as every response is
            return self.run(req, answer, lambda now, token: handler(self.state, req, now, token))
        token = self._token = self._token + 1
        try:
            result = handler(self.state, req, int(self._clock() * 1000), token)
        except Exception:
            log.exception("coordinator handler failed on %r", req)
            return refusal(req, answer, ErrorCode.UNKNOWN_SERVER_ERROR)
        responses = result.responses
        if result.records or len(responses) != 1 or responses[0][0] != token:
            fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
            self._waiting[token] = (fut, req)
            self.apply(result)
            return self._wait(token, answer, fut)
        if result.timers:
            self.apply(Result(timers=result.timers))
        response = responses[0][1]
        return response if type(response) is answer else answer_as(answer, response)

    async def _wait(self, token: int, answer: type[R], fut: asyncio.Future[Response]) -> R:
        try:
            return answer_as(answer, await fut)
        finally:
            self._waiting.pop(token, None)

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
            waiting[0].set_result(error_response(waiting[1], ErrorCode.REQUEST_TIMED_OUT))

    # ------------------------------------------------------------------------------------ carrying it out

    def apply(self, result: Result) -> None:
        """Carry out a decision made outside a request (a load, an unload, a deletion, an external rebalance)."""
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

    def _deliver(self, token: int, response: Response) -> None:
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
                            response = error_response(waiting[1], ErrorCode.COORDINATOR_NOT_AVAILABLE)
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
                self.apply(h.on_timer(self.state, key, now))
            except Exception:
                log.exception("coordinator timer %s failed", key)
            if self._touched is not None:
                self._touched(key.group_id)
        if fired:
            self._arm_wake()
        return fired

    def next_timer_ms(self) -> int | None:
        live = [d for d, _, k in self._heap if self._timers.get(k) == d]
        return min(live) if live else None
