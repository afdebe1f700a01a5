"""One client connection through the proxy: request frames forwarded to one real broker byte for byte, answers
written back in request order, pipelined.

Per frame only the 4-byte size and the header's api key, version and correlation id are read; the same bytes go
upstream (one copy: out of the stream buffer). Decoded are only: the answers that carry broker addresses
(Metadata, FindCoordinator, DescribeCluster: rewritten to the proxy's ports), ApiVersions answers (capped to what
the proxy can decode or answer), Produce's acks (acks=0 gets no answer), and the group-API requests when the proxy
coordinates some groups (those of its groups are answered here, in order with the forwarded ones; a
ConsumerGroupHeartbeat/Describe, TxnOffsetCommit or OffsetDelete naming one of them is refused here, never
forwarded).

Bounded: a frame larger than the limit closes the connection before it is read; at most `max_in_flight` answers
are owed per connection (reading pauses at the bound); past 1 MiB buffered toward the broker, reading waits for
it to drain (acks=0 Produce frames included: they owe no answer, so only this bounds them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from zkcoord.server import kafka_protocol as kp

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_CORR = struct.Struct(">i")
_GROUP_KEYS = frozenset({*kp.GROUP_APIS, *kp.CONSUMER_GROUP_APIS, *kp.OFFSET_WRITE_APIS, kp.FIND_COORDINATOR})

Answer = bytes | tuple[bytes, bytes] | None


class LocalGroups(Protocol):
    """What a connection needs of the proxy's own coordinator: which groups it answers, and the answer."""

    def coordinates(self, group_id: str) -> bool: ...

    def answer(self, req: kp.RequestFrame) -> bytes | Awaitable[bytes | None] | None: ...

    def coordinators(self) -> list[tuple[int, str, int]]:
        """The proxy nodes a FindCoordinator may name (node id, host, port): listed in Metadata too."""
        ...


class Link:
    """Serves one accepted client connection against `upstream` until either side closes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: tuple[str, int],
        address_of: kp.AddressOf,
        caps: dict[int, int],
        local: LocalGroups | None,
        max_request_bytes: int,
        max_in_flight: int = 1000,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.upstream = upstream
        self.address_of = address_of
        self.caps = caps
        self.local = local
        self.max_request_bytes = max_request_bytes
        self.max_in_flight = max_in_flight
        self._answers: asyncio.Queue[asyncio.Future[Answer]] = asyncio.Queue()
        self._expect: deque[tuple[int, int, int, asyncio.Future[Answer]]] = deque()
        self._room = asyncio.Event()
        self._room.set()
        self._owed = 0
        self.peer = writer.get_extra_info("peername")

    async def run(self) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError as exc:
            log.warning("proxy: client %s: broker %s:%d unreachable: %r", self.peer, *self.upstream, exc)
            self.writer.close()
            return
        tasks = [
            asyncio.create_task(self._requests(up_writer)),
            asyncio.create_task(self._responses(up_reader)),
            asyncio.create_task(self._write()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                failure = task.exception()
                if failure is not None and not isinstance(
                    failure, (asyncio.IncompleteReadError, ConnectionError)
                ):
                    log.warning("proxy: client %s: connection closed: %r", self.peer, failure)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            for w in (up_writer, self.writer):
                w.close()
            for w in (up_writer, self.writer):
                with contextlib.suppress(Exception):
                    await w.wait_closed()

    # -- client -> broker --------------------------------------------------------------------------------------

    async def _requests(self, up: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        read = self.reader.readexactly
        while True:
            if self._owed >= self.max_in_flight:
                self._room.clear()
                await self._room.wait()
            head = await read(4)
            (size,) = _SIZE.unpack(head)
            if not 8 <= size <= self.max_request_bytes:
                raise kp.MalformedFrame(f"frame size {size} outside 8..{self.max_request_bytes}")
            frame = await read(size)
            key, version, corr = _HEAD.unpack_from(frame)
            if self.local is not None and key in _GROUP_KEYS:
                answered = self._answer_locally(frame, loop)
                if answered:
                    continue
            if not (key == kp.PRODUCE and kp.produce_acks(frame) == 0):  # acks=0: no answer owed
                fut: asyncio.Future[Answer] = loop.create_future()
                self._expect.append((corr, key, version, fut))
                self._owe(fut)
            up.write(head)
            up.write(frame)
            if up.transport.get_write_buffer_size() > 1 << 20:
                await up.drain()

    def _answer_locally(self, frame: bytes, loop: asyncio.AbstractEventLoop) -> bool:
        assert self.local is not None
        if _HEAD.unpack_from(frame)[0] in kp.OFFSET_WRITE_APIS:
            return self._refuse(kp.offset_write_refusal(frame, self.local.coordinates), loop)
        try:
            req = kp.decode_request(frame)
        except kp.ProtocolError:
            return False  # the broker answers (or closes) as it would without the proxy
        if req.api_key in kp.CONSUMER_GROUP_APIS:
            return self._refuse(kp.consumer_group_refusal(req, self.local.coordinates), loop)
        ids = kp.group_ids(req)
        if not ids or not all(self.local.coordinates(g) for g in ids):
            return False
        fut: asyncio.Future[Answer] = loop.create_future()
        self._owe(fut)
        answer = self.local.answer(req)
        if isinstance(answer, (bytes, type(None))):
            fut.set_result(answer)
        else:
            task = asyncio.ensure_future(answer)
            task.add_done_callback(lambda t: _settle(fut, t))
        return True

    def _refuse(self, refusal: bytes | None, loop: asyncio.AbstractEventLoop) -> bool:
        """Queue the proxy's own refusal of a request (True); None: nothing to refuse, forward it (False)."""
        if refusal is None:
            return False
        fut: asyncio.Future[Answer] = loop.create_future()
        fut.set_result(refusal)
        self._owe(fut)
        return True

    def _owe(self, fut: asyncio.Future[Answer]) -> None:
        self._owed += 1
        self._answers.put_nowait(fut)

    # -- broker -> client --------------------------------------------------------------------------------------

    async def _responses(self, up: asyncio.StreamReader) -> None:
        read = up.readexactly
        while True:
            head = await read(4)
            (size,) = _SIZE.unpack(head)
            if size < 4:
                raise kp.MalformedFrame(f"broker answered a frame of {size} bytes")
            frame = await read(size)
            (corr,) = _CORR.unpack_from(frame)
            if not self._expect:
                raise kp.MalformedFrame(f"broker answered correlation id {corr}, nothing was asked")
            want, key, version, fut = self._expect.popleft()
            if corr != want:
                raise kp.MalformedFrame(f"broker answered correlation id {corr}, expected {want}")
            if key in kp.ADDRESS_APIS:
                extra = self.local.coordinators() if self.local is not None else ()
                fut.set_result(kp.rewrite_addresses(key, version, frame, self.address_of, extra))
            elif key == kp.API_VERSIONS:
                fut.set_result(kp.cap_api_versions(version, frame, self.caps))
            else:
                fut.set_result((head, frame))

    async def _write(self) -> None:
        out = self.writer
        while True:
            fut = await self._answers.get()
            answer = await fut
            self._owed -= 1
            if not self._room.is_set() and self._owed < self.max_in_flight:
                self._room.set()
            if answer is None:
                pass
            elif isinstance(answer, tuple):
                out.write(answer[0])
                out.write(answer[1])
            else:
                out.write(answer)
            if self._answers.empty():
                await out.drain()


def _settle(fut: asyncio.Future[Answer], task: asyncio.Future[bytes | None]) -> None:
    if fut.done():
        return
    if task.cancelled():
        fut.cancel()
    elif task.exception() is not None:
        fut.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        fut.set_result(task.result())


Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
