"""The asyncio Kafka wire listener: length-prefixed frames in, responses out in request order per connection.

Guarantees: a frame larger than `socket_request_max_bytes` (or with a negative size) closes the connection
before anything of its declared size is allocated; an unknown ApiVersions version gets the KIP-511 v0 fallback;
other unsupported versions get UNSUPPORTED_VERSION where the response has a top-level error code; unknown APIs,
garbled headers and undecodable bodies close the connection. Bad input is logged with its peer and never takes
the server down. Responses are written in request order even when some (Fetch waits, group barriers) complete
later than requests pipelined behind them; when the server closes a connection over a bad frame, the answers
owed to the requests before it are written first (at most 5 s), as in Kafka, which reads a connection's next
request only after answering the last.

Limits (zkcoord.server.limits.ConnectionLimits): connections beyond max.connections / max.connections.per.ip
are closed on accept; on a SASL listener a frame larger than sasl.server.max.receive.size before the login
completes closes the connection on its size prefix, as Kafka does; a connection silent for
connections.max.idle.ms with nothing owed to it, or whose frame is not complete request.read.timeout.ms after its
size arrived, is closed; frames being read by all connections together hold at most queued.max.request.bytes (a
reader waits for room instead of allocating).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import struct
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable

from zkcoord.errors import ConfigError
from zkcoord.ratelog import RateLimitedLog
from zkcoord.security.acl import Session
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.limits import ConnectionLimits
from zkcoord.server.listener_security import ListenerSecurity, SaslAuthenticator

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Frames one connection may handle before letting the others read (round-robin across ready connections):
# small enough that a pipelining client cannot hold the loop, large enough that the yield costs little.
_FRAMES_PER_TURN = 8

Dispatch = Callable[[kp.RequestFrame], "bytes | Awaitable[bytes | None] | None"]
# (api_key, api_version, seconds from decoded request to ready response): the metrics hook.
RequestObserver = Callable[[int, int, float], None]


class _CloseConnection(Exception):
    """Raised by a response future whose request can get no answer: the writer closes the connection there."""


class _Connection:
    __slots__ = (
        "auth",
        "burst",
        "closed",
        "flush",
        "ip",
        "last_active",
        "out",
        "out_soon",
        "peer",
        "pending",
        "reading_since",
        "room",
        "session",
        "wakeup",
        "writer",
    )

    def __init__(self, writer: asyncio.StreamWriter, peer: str, ip: str, now: float) -> None:
        self.writer = writer
        self.peer = peer
        self.ip = ip
        # Items in request order: a ready response (bytes/None) or a future still being computed.
        self.pending: deque[bytes | asyncio.Future[bytes | None] | None] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.flush = False  # on close, send the answers still owed first (the server chose to close)
        self.last_active = now  # loop time of the last complete frame (or of the accept)
        self.reading_since: float | None = None  # loop time a frame's size arrived, until its body has
        self.burst = 0  # frames handled since this connection last let the others read
        self.room = asyncio.Event()  # set when pending drops below max.in.flight.per.connection
        self.auth: SaslAuthenticator | None = None  # a SASL listener's login, until it completes
        self.session = Session(host=ip)  # who the requests are from: the principal once logged in
        # Ready answers with nothing owed ahead of them, written together once the reader yields (see _enqueue).
        self.out: list[bytes] = []
        self.out_soon = False


class WireServer:
    """Serves `dispatch` on host:port. `start()` binds (port 0 picks a free one, see `.port`)."""

    def __init__(
        self,
        dispatch: Dispatch,
        host: str,
        port: int,
        max_request_bytes: int = 100 * 1024 * 1024,
        limits: ConnectionLimits | None = None,
        observe: RequestObserver | None = None,
        security: ListenerSecurity | None = None,
    ) -> None:
        self.dispatch = dispatch
        self.security = security  # TLS and/or SASL this listener requires (None: PLAINTEXT)
        self.observe = observe
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.limits = limits if limits is not None else ConnectionLimits()
        if self.limits.queued_max_request_bytes < max_request_bytes:
            raise ConfigError(
                f"queued.max.request.bytes {self.limits.queued_max_request_bytes} is below "
                f"socket.request.max.bytes {max_request_bytes}: a largest frame could never be read"
            )
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._live: set[_Connection] = set()
        self._per_ip: Counter[str] = Counter()
        self._queued_bytes = 0
        self._room = asyncio.Event()
        self.connections = 0
        self.requests = 0
        self.rejected = 0
        # Why connections ended early, by reason: refused_total, refused_per_ip, idle, slow_frame,
        # sasl_receive_size.
        self.closed_by_limit: Counter[str] = Counter()
        # Client-caused events, each kind at most 10 lines a minute; errors/log_suppressed count them all.
        self._say = RateLimitedLog(log, burst=10, window_s=60.0)
        self.errors = self._say.events
        self.log_suppressed = self._say.suppressed

    async def start(self) -> None:
        tls = self.security.tls if self.security is not None else None
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=1 << 20, ssl=tls)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._sweeper = asyncio.create_task(self._sweep())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    def _refuse(self, writer: asyncio.StreamWriter, peer: str, ip: str) -> bool:
        """Close a new connection over max.connections / max.connections.per.ip; True when refused."""
        lim = self.limits
        if len(self._live) >= lim.max_connections:
            reason, what = "refused_total", f"max.connections {lim.max_connections}"
        elif self._per_ip[ip] >= lim.max_connections_per_ip:
            reason, what = "refused_per_ip", f"max.connections.per.ip {lim.max_connections_per_ip}"
        else:
            return False
        self.closed_by_limit[reason] += 1
        self._say.log(logging.WARNING, reason, "connection %s: %s reached, closing", peer, what)
        writer.close()
        return True

    async def _sweep(self) -> None:
        """Close idle connections and slow senders; runs every quarter of the shorter timeout."""
        lim = self.limits
        idle_s = lim.connections_max_idle_ms / 1000
        slow_s = lim.request_read_timeout_ms / 1000
        tick = min(max(min(idle_s, slow_s) / 4, 0.01), 1.0)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            for conn in list(self._live):
                if conn.reading_since is not None and now - conn.reading_since > slow_s:
                    reason = "slow_frame"
                    what = f"frame not complete after request.read.timeout.ms {lim.request_read_timeout_ms}"
                elif conn.reading_since is None and not conn.pending and now - conn.last_active > idle_s:
                    reason = "idle"
                    what = f"idle for connections.max.idle.ms {lim.connections_max_idle_ms}"
                else:
                    continue
                self.closed_by_limit[reason] += 1
                self._say.log(logging.WARNING, reason, "connection %s: %s, closing", conn.peer, what)
                conn.closed = True
                conn.writer.close()

    async def _reserve(self, size: int) -> None:
        """Wait until `size` more request bytes fit in queued.max.request.bytes (always room for one frame)."""
        limit = self.limits.queued_max_request_bytes
        while self._queued_bytes and self._queued_bytes + size > limit:
            self._room.clear()
            await self._room.wait()
        self._queued_bytes += size

    def _release(self, size: int) -> None:
        self._queued_bytes -= size
        self._room.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        ip = str(peername[0]) if isinstance(peername, tuple) else peer
        if self._refuse(writer, peer, ip):
            return
        # The TLS handshake is done here: an SSL listener's principal is the client certificate's (or ANONYMOUS).
        tls = writer.get_extra_info("ssl_object")
        session = self.security.session(tls, ip, peer) if self.security is not None else Session(host=ip)
        if session is None:
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        conn = _Connection(writer, peer, ip, asyncio.get_running_loop().time())
        conn.session = session
        if self.security is not None:
            conn.auth = self.security.authenticator(peer)
        self._live.add(conn)
        self._per_ip[ip] += 1
        self.connections += 1
        writer_task = asyncio.create_task(self._write_loop(conn))
        try:
            await self._read_loop(reader, conn)
            # The server chose to close (a bad frame): as in Kafka, which reads a connection's next request only
            # after answering the last, the requests before it still get their answers (bounded below).
            conn.flush = True
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # server shutdown: end this connection quietly (asyncio would log a cancelled handler task)
        except Exception:
            self._say.log(
                logging.ERROR, "unexpected", "connection %s: unexpected error, closing", peer, exc_info=True
            )
        finally:
            conn.closed = True
            conn.wakeup.set()
            conn.room.set()
            try:
                await asyncio.wait_for(writer_task, 5.0)
            except (TimeoutError, asyncio.CancelledError, ConnectionError):
                writer_task.cancel()
            except Exception:
                self._say.log(
                    logging.ERROR, "unexpected", "connection %s: writer failed", peer, exc_info=True
                )
            writer.close()
            self._live.discard(conn)
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]
            if task is not None:
                self._tasks.discard(task)

    async def _read_loop(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        max_bytes = self.max_request_bytes
        sasl_max = self.limits.sasl_server_max_receive_size
        loop = asyncio.get_running_loop()
        while not conn.closed:
            head = await reader.readexactly(4)
            conn.last_active = loop.time()
            (size,) = _SIZE.unpack(head)
            if size < 0 or size > max_bytes:
                self.rejected += 1
                self._say.log(
                    logging.WARNING,
                    "frame_size",
                    "connection %s: frame of %d bytes is outside 0..%d (socket.request.max.bytes), closing",
                    conn.peer,
                    size,
                    max_bytes,
                )
                return
            if conn.auth is not None and not conn.auth.authenticated and size > sasl_max:
                # Kafka's SaslServerAuthenticator reads every frame before the login with this bound and fails
                # the login on the size prefix ("invalid receive size"): nothing of the body is read or kept.
                self.rejected += 1
                self.closed_by_limit["sasl_receive_size"] += 1
                self._say.log(
                    logging.WARNING,
                    "sasl_receive_size",
                    "connection %s: frame of %d bytes before the SASL login is larger than %d "
                    "(sasl.server.max.receive.size), closing",
                    conn.peer,
                    size,
                    sasl_max,
                )
                return
            await self._reserve(size)
            try:
                conn.reading_since = loop.time()
                frame = await reader.readexactly(size)
            finally:
                conn.reading_since = None
                self._release(size)
            conn.last_active = loop.time()
            self.requests += 1
            transport = conn.writer.transport
            if transport.get_write_buffer_size() > 4 * 1024 * 1024:
                await (
                    conn.writer.drain()
                )  # a client that pipelines but does not read must not grow our buffer
            if conn.auth is not None and not conn.auth.authenticated:
                if not await self._authenticate(frame, conn):
                    return
                continue
            if not self._handle_frame(frame, conn):
                return
            await self._take_turns(conn)

    async def _take_turns(self, conn: _Connection) -> None:
        """Fairness: pause reading while this connection has max.in.flight.per.connection answers owed, and
        let the other connections read every _FRAMES_PER_TURN frames."""
        bound = self.limits.max_in_flight_per_connection
        while len(conn.pending) >= bound and not conn.closed:
            conn.room.clear()
            await conn.room.wait()
        conn.burst += 1
        if conn.burst >= _FRAMES_PER_TURN:
            conn.burst = 0
            await asyncio.sleep(0)

    async def _authenticate(self, frame: bytes, conn: _Connection) -> bool:
        """A frame on a SASL listener before the login completed: ApiVersions is served as always, the SASL
        requests go to the connection's authenticator; False when the connection must be closed."""
        assert conn.auth is not None
        head = kp.peek_header(frame)
        if head is not None and head[0] == kp.API_VERSIONS:
            return self._handle_frame(frame, conn)
        try:
            req = kp.decode_request(frame)
        except kp.ProtocolError as exc:
            self.rejected += 1
            self._say.log(
                logging.WARNING, "malformed", "connection %s: %s before login; closing", conn.peer, exc
            )
            return False
        step = await conn.auth.step(req)
        if conn.auth.principal is not None:
            conn.session = Session(conn.auth.principal, conn.ip)
        if step.reply is not None:
            self._enqueue(conn, step.reply)
        if step.close:
            # Kafka answers a failed login, then closes after connection.failed.authentication.delay.ms.
            await conn.writer.drain()
            if step.close_delay_s > 0:
                await asyncio.sleep(step.close_delay_s)
            return False
        return True

    def _handle_frame(self, frame: bytes, conn: _Connection) -> bool:
        """Queue the response to one frame; False when the connection must be closed."""
        try:
            req = kp.decode_request(frame, conn.session)
        except kp.UnsupportedVersion as exc:
            self.rejected += 1
            assert exc.correlation_id is not None
            if exc.api_key == kp.API_VERSIONS:
                self._say.log(
                    logging.INFO, "api_versions_fallback", "connection %s: %s; answering v0", conn.peer, exc
                )
                self._enqueue(conn, kp.api_versions_fallback(exc.correlation_id))
                return True
            reply = kp.unsupported_version_response(exc.api_key, exc.api_version, exc.correlation_id)
            if reply is None:
                self._say.log(
                    logging.WARNING,
                    "unsupported_version",
                    "connection %s: %s; cannot encode an error at that version, closing",
                    conn.peer,
                    exc,
                )
                return False
            self._say.log(
                logging.WARNING, "unsupported_version", "connection %s: %s; answered error 35", conn.peer, exc
            )
            self._enqueue(conn, reply)
            return True
        except kp.ProtocolError as exc:
            self.rejected += 1
            self._say.log(logging.WARNING, "malformed", "connection %s: %s; closing", conn.peer, exc)
            return False
        started = time.perf_counter()
        try:
            result = self.dispatch(req)
        except Exception:
            self._log_handler_failure(conn, req)
            reply = kp.error_response(req, -1)
            if reply is None:
                return False
            result = reply
        if inspect.isawaitable(result):
            self._enqueue(conn, asyncio.ensure_future(self._guard(req, result, conn, started)))
            return True
        if self.observe is not None:
            self.observe(req.api_key, req.api_version, time.perf_counter() - started)
        if result is not None:
            self._enqueue(conn, result)
        elif kp.expects_response(req):
            self._say.log(
                logging.ERROR,
                "no_response",
                "connection %s: handler for api %d gave no response",
                conn.peer,
                req.api_key,
            )
            return False
        return True

    async def _guard(
        self, req: kp.RequestFrame, aw: Awaitable[bytes | None], conn: _Connection, started: float
    ) -> bytes | None:
        try:
            return await aw
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log_handler_failure(conn, req)
            reply = kp.error_response(req, -1)
            if reply is None and kp.expects_response(req):
                self._say.log(
                    logging.WARNING,
                    "no_response",
                    "connection %s: no error answer exists at that version, closing",
                    conn.peer,
                )
                raise _CloseConnection from None
            return reply
        finally:
            if self.observe is not None:
                self.observe(req.api_key, req.api_version, time.perf_counter() - started)

    def _log_handler_failure(self, conn: _Connection, req: kp.RequestFrame) -> None:
        """Log the exception being handled as a failed request (the client gets UNKNOWN_SERVER_ERROR or a close)."""
        self._say.log(
            logging.ERROR,
            "handler_failure",
            "connection %s: %s v%d (correlation %d) failed",
            conn.peer,
            kp.API_NAMES.get(req.api_key, req.api_key),
            req.api_version,
            req.correlation_id,
            exc_info=True,
        )

    def _enqueue(self, conn: _Connection, item: bytes | asyncio.Future[bytes | None]) -> None:
        if not conn.pending and isinstance(item, bytes):
            # Nothing ahead of it (the hot path): the answers to the frames a pipelining client sent in one
            # go leave in one write when the reader yields, not in a send() each.
            conn.out.append(item)
            if not conn.out_soon:
                conn.out_soon = True
                asyncio.get_running_loop().call_soon(self._write_out, conn)
            return
        conn.pending.append(item)
        conn.wakeup.set()

    @staticmethod
    def _write_out(conn: _Connection) -> None:
        """Write the collected ready answers; they precede anything pending, so every other write calls this first."""
        conn.out_soon = False
        if conn.out:
            data = conn.out[0] if len(conn.out) == 1 else b"".join(conn.out)
            conn.out.clear()
            if not conn.writer.transport.is_closing():
                conn.writer.write(data)

    async def _write_loop(self, conn: _Connection) -> None:
        writer = conn.writer
        pending = conn.pending
        while True:
            if not pending:
                self._write_out(conn)
                if conn.closed:
                    return
                await writer.drain()
                conn.wakeup.clear()
                await conn.wakeup.wait()
                continue
            item = pending[0]
            if isinstance(item, asyncio.Future):
                if conn.closed and not conn.flush and not item.done():
                    item.cancel()
                    pending.clear()
                    return
                try:
                    data = await item
                except (asyncio.CancelledError, _CloseConnection):
                    pending.clear()
                    writer.close()  # the reader loop sees the close and ends the connection
                    return
            else:
                data = item
            pending.popleft()
            conn.room.set()
            chunks = [data] if data else []
            # The answers queued behind it that are ready already leave in the same write: a batch of commits is
            # answered all at once (after one append), and a send() each would cost more than the answers.
            while pending:
                ready = pending[0]
                if isinstance(ready, asyncio.Future):
                    if not ready.done() or ready.cancelled() or ready.exception() is not None:
                        break  # not ready, or the connection must close there: the loop above decides
                    ready = ready.result()
                pending.popleft()
                if ready:
                    chunks.append(ready)
            if chunks:
                self._write_out(conn)
                writer.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
