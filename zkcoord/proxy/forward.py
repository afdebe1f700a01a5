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

Security: the upstream connection is opened (TLS, the proxy's own SASL login: zkcoord.proxy.upstream) before
anything is read from the client. On a SASL listener the client logs in to the proxy (the authenticator `serve`
uses: zkcoord.server.listener_security): before that only ApiVersions (forwarded, with the proxy's SaslHandshake
and SaslAuthenticate windows) and the login frames are served, each at most sasl.server.max.receive.size; any
other frame closes the connection, unanswered, as Kafka does. SaslHandshake/SaslAuthenticate frames are never
forwarded (after the login, or on a listener without SASL, one closes the connection). The locally answered group
requests carry the client's principal, so the authorizer decides them as `serve` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from zkcoord.errors import ZkcoordError
from zkcoord.ratelog import RateLimitedLog
from zkcoord.security.acl import Session
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.listener_security import AuthState, SaslAuthenticator

log = logging.getLogger(__name__)
_say = RateLimitedLog(
    log, burst=10, window_s=60.0
)  # client- and broker-caused events: few lines, all counted

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_CORR = struct.Struct(">i")
_GROUP_KEYS = frozenset({*kp.GROUP_APIS, *kp.CONSUMER_GROUP_APIS, *kp.OFFSET_WRITE_APIS, kp.FIND_COORDINATOR})
_SASL_KEYS = frozenset({kp.SASL_HANDSHAKE, kp.SASL_AUTHENTICATE})
# Kafka's sasl.server.max.receive.size default: the largest frame read from a client before its login completes.
SASL_MAX_RECEIVE_SIZE = 524288
# The SASL windows a SASL listener of the proxy answers in ApiVersions (its own login, never the broker's).
SASL_VERSIONS = {
    kp.SASL_HANDSHAKE: kp.ADVERTISED[kp.SASL_HANDSHAKE],
    kp.SASL_AUTHENTICATE: kp.ADVERTISED[kp.SASL_AUTHENTICATE],
}
Connect = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]

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
        connect: Connect | None = None,
        session: Session | None = None,
        auth: SaslAuthenticator | None = None,
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
        self._idle = asyncio.Event()  # set while no answer is owed to the client
        self._idle.set()
        self.peer = writer.get_extra_info("peername")
        self.connect: Connect = connect if connect is not None else _plain_connect
        self.session = session if session is not None else Session()
        self.auth = auth
        self.own_versions = SASL_VERSIONS if auth is not None else None
        if auth is None:  # no SASL here: clients must not try (a SaslHandshake would close the connection)
            self.caps = {**caps, kp.SASL_HANDSHAKE: -1, kp.SASL_AUTHENTICATE: -1}

    async def run(self) -> None:
        try:
            up_reader, up_writer = await self.connect(*self.upstream)
        except (OSError, ZkcoordError, asyncio.IncompleteReadError) as exc:
            _say.log(logging.WARNING, "upstream", "proxy: client %s: broker %s:%d: connection or login failed: %s",
                     self.peer, *self.upstream, exc)  # fmt: skip
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
            limit = self.max_request_bytes
            login = self.auth is not None and not self.auth.authenticated
            if login:
                limit = min(limit, SASL_MAX_RECEIVE_SIZE)
            if not 8 <= size <= limit:
                raise kp.MalformedFrame(
                    f"frame size {size} outside 8..{limit}{' before the SASL login' * login}"
                )
            frame = await read(size)
            key, version, corr = _HEAD.unpack_from(frame)
            if key in _SASL_KEYS or (login and key != kp.API_VERSIONS):
                if not await self._login(frame, key, loop):
                    return
                continue
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
            req = kp.decode_request(frame, self.session)
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
        self._idle.clear()
        self._answers.put_nowait(fut)

    async def _login(self, frame: bytes, key: int, loop: asyncio.AbstractEventLoop) -> bool:
        """A frame of the client's login, or one a client may not send now; False: close the connection (after
        the answers owed, and after Kafka's delay for a failed login)."""
        if self.auth is None or self.auth.state not in (AuthState.HANDSHAKE, AuthState.AUTHENTICATE):
            _say.log(logging.INFO, "sasl_state", "proxy: client %s: %s %s, closing", self.peer,
                     kp.API_NAMES.get(key, key),
                     "on a listener without SASL" if self.auth is None else "after the SASL login")  # fmt: skip
            await self._flush()
            return False
        try:
            req = kp.decode_request(frame)
        except kp.ProtocolError as exc:
            _say.log(
                logging.WARNING, "malformed", "proxy: client %s: %s before login; closing", self.peer, exc
            )
            return False
        step = await self.auth.step(req)
        if self.auth.principal is not None:
            self.session = Session(self.auth.principal, self.session.host)
        if step.reply is not None:
            self._refuse(step.reply, loop)
        if not step.close:
            return True
        await self._flush()  # the refusal is written before the close
        if step.close_delay_s > 0:
            await asyncio.sleep(step.close_delay_s)
        return False

    async def _flush(self) -> None:
        """Before the proxy closes the connection: the answers owed to the requests before are written first, as
        Kafka does (at most 5 s: a broker that never answers does not keep the connection)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), 5.0)

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
                fut.set_result(kp.cap_api_versions(version, frame, self.caps, self.own_versions))
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
                if not self._owed:
                    self._idle.set()


def _settle(fut: asyncio.Future[Answer], task: asyncio.Future[bytes | None]) -> None:
    if fut.done():
        return
    if task.cancelled():
        fut.cancel()
    elif task.exception() is not None:
        fut.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        fut.set_result(task.result())


async def _plain_connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port)


Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
