"""One client connection through the proxy: request frames forwarded to one real broker byte for byte, answers
written back in request order, pipelined, each forwarded byte copied once in user space.

Both sockets are read by an `asyncio.BufferedProtocol` (`_Frames`): the kernel copies received bytes straight
into a preallocated buffer of the proxy (256 KiB, or one frame's size for a larger frame), whole frames are cut
out of it as memoryviews, and consecutive forwarded frames go to the other socket in one `transport.write` of a
view of that same buffer (asyncio copies only what the socket does not take at once, or what TLS encrypts).
Per frame only the 4-byte size and the header's api key, version and correlation id are read. The only other
copy is of a frame split across two buffers: the part received before its size showed it would not fit is moved
to the next buffer (counted in `_Frames.carried`): a receive reaches at most 4 KiB (TAIL) past the end of the
frame being received, and a frame of 64 KiB or more is received up to its end and no further, so at most 4 KiB
of a frame is ever moved.

Decoded are only: the answers that carry broker addresses (Metadata, FindCoordinator, DescribeCluster: rewritten
to the proxy's ports), ApiVersions answers (capped to what the proxy can decode or answer), Produce's acks (acks=0
gets no answer), and the group-API requests when the proxy coordinates some groups (those of its groups are
answered here, in order with the forwarded ones, ConsumerGroupHeartbeat/Describe included: the proxy lists those
two in ApiVersions whatever the broker says; a TxnOffsetCommit or OffsetDelete naming one of them is refused here,
never forwarded; a ConsumerGroupHeartbeat of another group, on a connection whose broker does not list the API,
is answered UNSUPPORTED_VERSION here, where the broker would close the connection).

Bounded: a frame larger than the limit closes the connection before any of it is buffered (requests:
`max_request_bytes`; answers: MAX_ANSWER_BYTES); at most `max_in_flight` answers are owed per connection (reading
pauses at the bound); when a side's socket has more than 1 MiB of unsent bytes (HIGH_WATER: asyncio's
pause_writing), the other side is not read until it drains below 256 KiB (acks=0 Produce frames included: they
owe no answer, so only this bounds them).

Security and the upstream connection: nothing is connected upstream when a client connects. The upstream
connection (TLS, then the proxy's own SASL login: zkcoord.proxy.upstream) is opened at the first frame to
forward, and the proxy logs in there only once the client has logged in to the proxy: on a SASL listener the
ApiVersions a client sends before its login is forwarded on the opened connection before the proxy's login (a
broker answers ApiVersions before SaslHandshake, as Kafka's clients rely on), so a client that never logs in never
makes the proxy log in to a broker. On a SASL listener the client logs in to the proxy (the authenticator `serve`
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
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, cast

from zkcoord.errors import ZkcoordError
from zkcoord.proxy.upstream import PLAINTEXT, UpstreamSecurity
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
CHUNK = 256 * 1024  # a receive buffer; a larger frame gets a buffer of its own size
BIG_FRAME = 64 * 1024  # a frame this large is received up to its end and no further
TAIL = 4096  # how far past the end of a smaller frame one receive may reach
KEEP = (
    4 * CHUNK
)  # a buffer larger than this (made for one large frame) is dropped once its frames are handed on
HIGH_WATER = 1 << 20  # unsent bytes on a socket above which the other side is not read
# The largest answer frame taken from a broker (a Fetch answer is bounded by fetch.max.bytes, 50 MiB by default).
MAX_ANSWER_BYTES = 256 * 1024 * 1024

_PENDING: Any = object()  # an answer slot not filled yet


class LocalGroups(Protocol):
    """What a connection needs of the proxy's own coordinator: which groups it answers, and the answer."""

    def coordinates(self, group_id: str) -> bool: ...

    def answer(self, req: kp.RequestFrame) -> bytes | Awaitable[bytes | None] | None: ...

    def coordinators(self) -> list[tuple[int, str, int]]:
        """The proxy nodes a FindCoordinator may name (node id, host, port): listed in Metadata too."""
        ...


class _Slot:
    """One answer owed to the client, in request order: bytes, a (buffer, start, end) view, None (nothing to
    write), or _PENDING."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: Any = _PENDING


class _Frames(asyncio.BufferedProtocol):
    """Whole frames of one socket, received into the proxy's own buffers and handed to `on_frame` as (buffer,
    start, end) of the framed bytes (size prefix included). `on_frame` returns False to keep the frame for later
    (the link then holds the reading with "link" and calls `parse` when it may go on)."""

    def __init__(
        self,
        on_frame: Callable[[memoryview, int, int], bool],
        check_size: Callable[[int], None],
        link: Link,
    ) -> None:
        self.on_frame, self.check_size, self.link = on_frame, check_size, link
        self.transport: asyncio.Transport | None = None
        self.buf = memoryview(bytearray(CHUNK))
        self.start = 0  # the first byte not handed on
        self.end = 0  # the end of what was received
        self.need = 0  # the framed size of the frame at `start`, once its size prefix is read (0: not yet)
        # Why reading is paused: "peer" (the other socket is full), "link" (a step of the link), "in_flight".
        self.holds: set[str] = set()
        self.carried = 0  # bytes moved from one buffer to the next (a frame split across them)
        self._parsing = False

    # -- asyncio's side ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        transport.set_write_buffer_limits(high=HIGH_WATER)
        if self.holds:
            transport.pause_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the kernel puts the next bytes: after those received, up to the end of the frame being received
        plus TAIL bytes of the next ones (so the size of a frame is known before much of it is received, and a
        frame that does not fit in this buffer moves at most TAIL bytes to the next one); a frame of BIG_FRAME
        bytes or more is received up to its end and no further."""
        pending = self.end - self.start
        if not pending and len(self.buf) > KEEP:  # a large frame's own buffer is not kept for the next ones
            self.buf, self.start, self.end = memoryview(bytearray(CHUNK)), 0, 0
        elif not pending and self.start and self.link.released(self):
            self.start = self.end = 0  # every frame of the buffer is written on: receive into it again
        size = len(self.buf)
        if (
            (self.need and self.need > size - self.start)
            or (not self.need and size - self.end < TAIL)
            or self.end == size
        ):
            self._move(max(CHUNK, self.need))
            size = len(self.buf)
        if not self.need:
            stop = self.end + TAIL
        elif self.need >= BIG_FRAME:
            stop = self.start + self.need
        else:
            stop = self.start + self.need + TAIL
        return self.buf[self.end : min(max(stop, self.end + 1), size)]

    def _move(self, size: int) -> None:
        """Continue in a buffer of `size` bytes (this one again if nothing in it waits to be written), the bytes
        received after the last whole frame moved to its start."""
        pending = self.end - self.start
        kept = bytes(self.buf[self.start : self.end])
        if size > len(self.buf) or not self.link.released(self):
            self.buf = memoryview(bytearray(size))
        self.buf[:pending] = kept
        self.carried += pending
        self.start, self.end = 0, pending

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        self.parse()

    def eof_received(self) -> bool:
        return False  # close: a half-closed Kafka connection is a closed one

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.lost(exc)

    def pause_writing(self) -> None:
        self.link.other(self).hold("peer")

    def resume_writing(self) -> None:
        self.link.other(self).release("peer")

    # -- the link's side -----------------------------------------------------------------------------------

    def parse(self) -> None:
        if self._parsing:
            return
        self._parsing = True
        buf = self.buf
        try:
            while "link" not in self.holds and "in_flight" not in self.holds:
                pending = self.end - self.start
                if pending < 4:
                    break
                if not self.need:
                    (size,) = _SIZE.unpack_from(buf, self.start)
                    self.check_size(size)
                    self.need = size + 4
                if pending < self.need:
                    break
                s, e = self.start, self.start + self.need
                self.start, self.need = e, 0
                if not self.on_frame(buf, s, e):
                    self.start, self.need = s, e - s
                    break
                if self.transport is None or self.transport.is_closing():
                    break
            self.link.flush()
        except (kp.ProtocolError, ZkcoordError) as exc:
            self.link.fail(exc)
        finally:
            self._parsing = False

    def hold(self, reason: str) -> None:
        if not self.holds and self.transport is not None:
            self.transport.pause_reading()
        self.holds.add(reason)

    def release(self, reason: str) -> None:
        if reason not in self.holds:
            return
        self.holds.discard(reason)
        if reason != "peer":
            self.parse()
        if not self.holds and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


class Link:
    """Serves one accepted client connection against the broker at `upstream` until either side closes. Its
    `client` is the protocol of the accepted socket (`listen` attaches it); `run` returns when the link ends."""

    def __init__(
        self,
        upstream: tuple[str, int],
        address_of: kp.AddressOf,
        caps: dict[int, int],
        local: LocalGroups | None,
        max_request_bytes: int,
        max_in_flight: int = 1000,
        security: UpstreamSecurity = PLAINTEXT,
        session: Session | None = None,
        auth: SaslAuthenticator | None = None,
    ) -> None:
        self.upstream = upstream
        self.address_of = address_of
        self.caps = caps
        self.local = local
        self.max_request_bytes = max_request_bytes
        self.max_in_flight = max_in_flight
        self.security = security
        self.session = session if session is not None else Session()
        self.auth = auth
        own = {**(SASL_VERSIONS if auth is not None else {}), **(kp.CONSUMER_GROUP_VERSIONS if local else {})}
        self.own_versions = own or None  # listed whatever the broker says: the proxy answers these itself
        self._served: frozenset[int] = frozenset()  # the API keys the broker's ApiVersions answer listed
        if auth is None:  # no SASL here: clients must not try (a SaslHandshake would close the connection)
            self.caps = {**caps, kp.SASL_HANDSHAKE: -1, kp.SASL_AUTHENTICATE: -1}
        self.client = _Frames(self._from_client, self._check_request, self)
        self.broker: _Frames | None = None  # once the upstream connection is opened and logged in
        self.peer: Any = None
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None  # opened, not switched
        self._logged_in = not security.sasl  # the proxy's own login upstream
        self._order: deque[_Slot] = deque()  # answers owed to the client, in request order
        self._expect: deque[tuple[int, int, int, _Slot]] = deque()  # forwarded: correlation id, key, version
        self._up_run: tuple[memoryview, int, int] | None = None  # forwarded frames not yet written upstream
        self._down_run: tuple[memoryview, int, int] | None = None  # answers not yet written to the client
        self._parked = 0  # answers waiting in `_order` as views of the broker side's buffer
        self._task: asyncio.Task[bool] | None = None
        self._side_tasks: set[asyncio.Future[Any]] = set()
        self._idle: asyncio.Event = asyncio.Event()  # set while no answer is owed to the client
        self._idle.set()
        self.done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            failure = await self.done
            if failure is not None and not isinstance(failure, ConnectionError):
                log.warning("proxy: client %s: connection closed: %r", self.peer, failure)
        finally:
            for task in [self._task, *self._side_tasks]:
                if task is not None:
                    task.cancel()
            for transport in (self.client.transport, self.broker.transport if self.broker else None):
                if transport is not None:
                    transport.close()
            if self._stream is not None:
                self._stream[1].close()

    def _finish(self, failure: BaseException | None = None) -> None:
        if not self.done.done():
            self.done.set_result(failure)

    def fail(self, exc: BaseException) -> None:
        self._finish(exc)
        for side in (self.client, self.broker):
            if side is not None and side.transport is not None:
                side.hold("link")

    def lost(self, exc: Exception | None) -> None:
        self._finish(exc)

    def other(self, side: _Frames) -> _Frames:
        if side is self.client:
            return self.broker if self.broker is not None else side
        return self.client

    def released(self, side: _Frames) -> bool:
        """No view of `side`'s buffer is still waiting to be written (so it may be received into again)."""
        if side is self.client:
            peer = self.broker.transport if self.broker is not None else None
            return self._up_run is None and (peer is None or not peer.get_write_buffer_size())
        out = self.client.transport
        return (
            not self._parked and self._down_run is None and (out is None or not out.get_write_buffer_size())
        )

    def _block(self, step: Coroutine[Any, Any, bool]) -> None:
        """Stop taking client frames until `step` is done; it returns False to end the link."""
        self.flush()
        self.client.hold("link")
        self._task = task = asyncio.get_running_loop().create_task(step)

        def after(t: asyncio.Task[bool]) -> None:
            if self._task is t:
                self._task = None
            if t.cancelled():
                return
            failure = t.exception()
            if failure is not None:
                self.fail(failure)
            elif not t.result():
                self._finish()
            else:
                self.client.release("link")

        task.add_done_callback(after)

    # -- client -> broker --------------------------------------------------------------------------------------

    def _check_request(self, size: int) -> None:
        limit = self.max_request_bytes
        login = self.auth is not None and not self.auth.authenticated
        if login:
            limit = min(limit, SASL_MAX_RECEIVE_SIZE)
        if not 8 <= size <= limit:
            raise kp.MalformedFrame(f"frame size {size} outside 8..{limit}{' before the SASL login' * login}")

    def _from_client(self, buf: memoryview, s: int, e: int) -> bool:
        key, version, corr = _HEAD.unpack_from(buf, s + 4)
        login = self.auth is not None and not self.auth.authenticated
        if key in _SASL_KEYS or (login and key != kp.API_VERSIONS):
            self._block(self._login(bytes(buf[s + 4 : e]), key))
            return True
        if self.local is not None and key in _GROUP_KEYS and self._answer_locally(bytes(buf[s + 4 : e])):
            return True
        if self.broker is None:
            if login:  # ApiVersions before the client's login: on the opened connection, before the proxy's
                self._block(self._versions_before_login(bytes(buf[s:e]), corr, version))
                return True
            self._block(self._open_upstream())
            return False  # forwarded once the upstream connection is ready
        if not (key == kp.PRODUCE and kp.produce_acks(buf[s + 4 : e]) == 0):  # acks=0: no answer owed
            self._expect.append((corr, key, version, self._owe()))
        run = self._up_run
        if run is not None and run[0] is buf and run[2] == s:
            self._up_run = (buf, run[1], e)
        else:
            self._write_up()
            self._up_run = (buf, s, e)
        return True

    def _write_up(self) -> None:
        run, self._up_run = self._up_run, None
        if run is not None and self.broker is not None and self.broker.transport is not None:
            self.broker.transport.write(run[0][run[1] : run[2]])

    def _answer_locally(self, frame: bytes) -> bool:
        assert self.local is not None
        if _HEAD.unpack_from(frame)[0] in kp.OFFSET_WRITE_APIS:
            return self._refuse(kp.offset_write_refusal(frame, self.local.coordinates))
        try:
            req = kp.decode_request(frame, self.session)
        except kp.ProtocolError:
            return False  # the broker answers (or closes) as it would without the proxy
        if req.api_key in kp.CONSUMER_GROUP_APIS:
            if kp.consumer_group_split(req, self.local.coordinates) == "forward":
                if (
                    req.api_key == kp.CONSUMER_GROUP_HEARTBEAT
                    and kp.CONSUMER_GROUP_HEARTBEAT not in self._served
                ):
                    return self._refuse(kp.unserved_heartbeat(req))  # the broker would close the connection
                return False
        else:
            ids = kp.group_ids(req)
            if not ids or not all(self.local.coordinates(g) for g in ids):
                return False
        slot = self._owe()
        answer = self.local.answer(req)
        if isinstance(answer, (bytes, type(None))):
            self._fill(slot, answer)
        else:
            task = asyncio.ensure_future(answer)
            self._side_tasks.add(task)
            task.add_done_callback(lambda t: self._settle(slot, t))
        return True

    def _settle(self, slot: _Slot, task: asyncio.Future[bytes | None]) -> None:
        self._side_tasks.discard(task)
        if task.cancelled():
            return
        failure = task.exception()
        if failure is not None:
            self.fail(failure)
        else:
            self._fill(slot, task.result())
            self.flush()

    def _refuse(self, refusal: bytes | None) -> bool:
        """Queue the proxy's own refusal of a request (True); None: nothing to refuse, forward it (False)."""
        if refusal is None:
            return False
        self._fill(self._owe(), refusal)
        return True

    def _owe(self) -> _Slot:
        slot = _Slot()
        self._order.append(slot)
        self._idle.clear()
        if len(self._order) >= self.max_in_flight:
            self.client.hold("in_flight")
        return slot

    async def _open_upstream(self) -> bool:
        """Open the upstream connection (if the client's ApiVersions did not already), log in there, and switch
        it to the buffered protocol. False (after a logged warning): the client's connection is closed."""
        try:
            if self._stream is None:
                self._stream = await self.security.open(*self.upstream)
            if not self._logged_in:
                await self.security.login(*self._stream)
                self._logged_in = True
        except (OSError, ZkcoordError, asyncio.IncompleteReadError) as exc:
            _say.log(logging.WARNING, "upstream", "proxy: client %s: broker %s:%d: connection or login failed: %s",
                     self.peer, *self.upstream, exc)  # fmt: skip
            return False
        reader, writer = self._stream
        if reader._buffer:  # type: ignore[attr-defined]  # nothing was asked that is not answered
            raise kp.MalformedFrame("the broker sent bytes nobody asked for")
        broker = _Frames(self._from_broker, self._check_answer, self)
        transport = cast(asyncio.Transport, writer.transport)
        transport.set_protocol(broker)
        broker.connection_made(transport)
        self.broker = broker  # the StreamWriter stays referenced (self._stream): its finalizer would close it
        if "peer" in broker.holds:
            transport.pause_reading()
        return True

    async def _versions_before_login(self, framed: bytes, corr: int, version: int) -> bool:
        """A SASL listener's client asks ApiVersions before its login: asked on the upstream connection before
        the proxy logs in there (a broker answers ApiVersions unauthenticated)."""
        slot = self._owe()
        try:
            if self._stream is None:
                self._stream = await self.security.open(*self.upstream)
            reader, writer = self._stream
            writer.write(framed)
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            self._check_answer(size)
            frame = await reader.readexactly(size)
        except (OSError, ZkcoordError, asyncio.IncompleteReadError) as exc:
            _say.log(logging.WARNING, "upstream", "proxy: client %s: broker %s:%d: connection failed: %s",
                     self.peer, *self.upstream, exc)  # fmt: skip
            return False
        (answered,) = _CORR.unpack_from(frame)
        if answered != corr:
            raise kp.MalformedFrame(f"broker answered correlation id {answered}, expected {corr}")
        self._served = kp.listed_api_keys(version, frame)
        self._fill(slot, kp.cap_api_versions(version, frame, self.caps, self.own_versions))
        self.flush()
        return True

    async def _login(self, frame: bytes, key: int) -> bool:
        """A frame of the client's login, or one a client may not send now; False: close the connection (after
        the answers owed, and after Kafka's delay for a failed login)."""
        if self.auth is None or self.auth.state not in (AuthState.HANDSHAKE, AuthState.AUTHENTICATE):
            _say.log(logging.INFO, "sasl_state", "proxy: client %s: %s %s, closing", self.peer,
                     kp.API_NAMES.get(key, key),
                     "on a listener without SASL" if self.auth is None else "after the SASL login")  # fmt: skip
            await self._flush_owed()
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
            self._refuse(step.reply)
            self.flush()
        if not step.close:
            return True
        await self._flush_owed()  # the refusal is written before the close
        if step.close_delay_s > 0:
            await asyncio.sleep(step.close_delay_s)
        return False

    async def _flush_owed(self) -> None:
        """Before the proxy closes the connection: the answers owed to the requests before are written first, as
        Kafka does (at most 5 s: a broker that never answers does not keep the connection)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), 5.0)

    # -- broker -> client --------------------------------------------------------------------------------------

    @staticmethod
    def _check_answer(size: int) -> None:
        if not 4 <= size <= MAX_ANSWER_BYTES:
            raise kp.MalformedFrame(
                f"broker answered a frame of {size} bytes, expected 4..{MAX_ANSWER_BYTES}"
            )

    def _from_broker(self, buf: memoryview, s: int, e: int) -> bool:
        (corr,) = _CORR.unpack_from(buf, s + 4)
        if not self._expect:
            raise kp.MalformedFrame(f"broker answered correlation id {corr}, nothing was asked")
        want, key, version, slot = self._expect.popleft()
        if corr != want:
            raise kp.MalformedFrame(f"broker answered correlation id {corr}, expected {want}")
        if key in kp.ADDRESS_APIS:
            extra = self.local.coordinators() if self.local is not None else ()
            slot.data = kp.rewrite_addresses(key, version, bytes(buf[s + 4 : e]), self.address_of, extra)
        elif key == kp.API_VERSIONS:
            frame = bytes(buf[s + 4 : e])
            self._served = kp.listed_api_keys(version, frame)
            slot.data = kp.cap_api_versions(version, frame, self.caps, self.own_versions)
        else:
            slot.data = (buf, s, e)
            self._parked += 1
        if slot is self._order[0]:
            self._take_ready()
        return True

    def _fill(self, slot: _Slot, data: Any) -> None:
        slot.data = data
        if slot is self._order[0]:
            self._take_ready()

    def _take_ready(self) -> None:
        """Move the answers now first in line to the client's write run (views of one buffer joined)."""
        order = self._order
        out = self.client.transport
        while order and order[0].data is not _PENDING:
            data = order.popleft().data
            if data is None:
                continue
            if isinstance(data, tuple):
                self._parked -= 1
                run = self._down_run
                if run is not None and run[0] is data[0] and run[2] == data[1]:
                    self._down_run = (run[0], run[1], data[2])
                    continue
                self._write_down()
                self._down_run = data
            else:
                self._write_down()
                if out is not None:
                    out.write(data)
        if len(order) < self.max_in_flight and "in_flight" in self.client.holds:
            self.client.release("in_flight")
        if not order:
            self._idle.set()

    def _write_down(self) -> None:
        run, self._down_run = self._down_run, None
        if run is not None and self.client.transport is not None:
            self.client.transport.write(run[0][run[1] : run[2]])

    def flush(self) -> None:
        """Write what the frames handed on so far left in the runs (called at the end of each received batch)."""
        self._write_up()
        self._write_down()


MakeLink = Callable[[asyncio.Transport], Link | None]


class _Accepted(asyncio.BufferedProtocol):
    """An accepted socket: `make_link` decides its Link (None: close it), whose client side then reads it."""

    def __init__(self, make_link: MakeLink, links: set[asyncio.Task[None]]) -> None:
        self.make_link, self.links = make_link, links
        self.inner: _Frames | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        link = self.make_link(transport)
        if link is None:
            transport.close()
            return
        link.peer = transport.get_extra_info("peername")
        self.inner = link.client
        link.client.connection_made(transport)
        task = asyncio.get_running_loop().create_task(link.run())
        self.links.add(task)
        task.add_done_callback(self.links.discard)

    def get_buffer(self, sizehint: int) -> memoryview:
        assert self.inner is not None
        return self.inner.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        assert self.inner is not None
        self.inner.buffer_updated(nbytes)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


async def listen(
    host: str,
    port: int,
    make_link: MakeLink,
    links: set[asyncio.Task[None]],
    ssl: Any = None,
) -> asyncio.Server:
    """A listener whose every accepted connection is served by the Link `make_link` gives it (its `run` task
    kept in `links` while it lasts)."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _Accepted(make_link, links), host, port, ssl=ssl)
