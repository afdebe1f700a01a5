"""The asyncio Kafka wire listener: length-prefixed frames in, responses out in request order per connection.

Guarantees: a frame larger than `socket_request_max_bytes` (or with a negative size) closes the connection
before anything of its declared size is allocated; an unknown ApiVersions version gets the KIP-511 v0 fallback;
other unsupported versions get UNSUPPORTED_VERSION where the response has a top-level error code; unknown APIs,
garbled headers and undecodable bodies close the connection. Bad input is logged with its peer and never takes
the server down. Responses are written in request order even when some (Fetch waits, group barriers) complete
later than requests pipelined behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable

from zkcoord.server import kafka_protocol as kp

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

Dispatch = Callable[[kp.RequestFrame], "bytes | Awaitable[bytes | None] | None"]
# (api_key, api_version, seconds from decoded request to ready response): the metrics hook.
RequestObserver = Callable[[int, int, float], None]


class _Connection:
    __slots__ = ("closed", "peer", "pending", "wakeup", "writer")

    def __init__(self, writer: asyncio.StreamWriter, peer: str) -> None:
        self.writer = writer
        self.peer = peer
        # Items in request order: a ready response (bytes/None) or a future still being computed.
        self.pending: deque[bytes | asyncio.Future[bytes | None] | None] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False


class WireServer:
    """Serves `dispatch` on host:port. `start()` binds (port 0 picks a free one, see `.port`)."""

    def __init__(
        self,
        dispatch: Dispatch,
        host: str,
        port: int,
        max_request_bytes: int = 100 * 1024 * 1024,
        observe: RequestObserver | None = None,
    ) -> None:
        self.dispatch = dispatch
        self.observe = observe
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        self.requests = 0
        self.rejected = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=1 << 20)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        conn = _Connection(writer, peer)
        self.connections += 1
        writer_task = asyncio.create_task(self._write_loop(conn))
        try:
            await self._read_loop(reader, conn)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # server shutdown: end this connection quietly (asyncio would log a cancelled handler task)
        except Exception:
            log.exception("connection %s: unexpected error, closing", peer)
        finally:
            conn.closed = True
            conn.wakeup.set()
            try:
                await asyncio.wait_for(writer_task, 5.0)
            except (TimeoutError, asyncio.CancelledError, ConnectionError):
                writer_task.cancel()
            except Exception:
                log.exception("connection %s: writer failed", peer)
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _read_loop(self, reader: asyncio.StreamReader, conn: _Connection) -> None:
        max_bytes = self.max_request_bytes
        while not conn.closed:
            head = await reader.readexactly(4)
            (size,) = _SIZE.unpack(head)
            if size < 0 or size > max_bytes:
                self.rejected += 1
                log.warning(
                    "connection %s: frame of %d bytes is outside 0..%d (socket.request.max.bytes), closing",
                    conn.peer,
                    size,
                    max_bytes,
                )
                return
            frame = await reader.readexactly(size)
            self.requests += 1
            transport = conn.writer.transport
            if transport.get_write_buffer_size() > 4 * 1024 * 1024:
                await (
                    conn.writer.drain()
                )  # a client that pipelines but does not read must not grow our buffer
            if not self._handle_frame(frame, conn):
                return

    def _handle_frame(self, frame: bytes, conn: _Connection) -> bool:
        """Queue the response to one frame; False when the connection must be closed."""
        try:
            req = kp.decode_request(frame)
        except kp.UnsupportedVersion as exc:
            self.rejected += 1
            assert exc.correlation_id is not None
            if exc.api_key == kp.API_VERSIONS:
                log.info("connection %s: %s; answering with the v0 fallback", conn.peer, exc)
                self._enqueue(conn, kp.api_versions_fallback(exc.correlation_id))
                return True
            reply = kp.unsupported_version_response(exc.api_key, exc.api_version, exc.correlation_id)
            if reply is None:
                log.warning(
                    "connection %s: %s; cannot encode an error at that version, closing", conn.peer, exc
                )
                return False
            log.warning("connection %s: %s; answered UNSUPPORTED_VERSION", conn.peer, exc)
            self._enqueue(conn, reply)
            return True
        except kp.ProtocolError as exc:
            self.rejected += 1
            log.warning("connection %s: %s; closing", conn.peer, exc)
            return False
        started = time.perf_counter()
        try:
            result = self.dispatch(req)
        except Exception:
            _log_handler_failure(conn, req)
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
            log.error("connection %s: handler for api %d gave no response", conn.peer, req.api_key)
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
            _log_handler_failure(conn, req)
            return kp.error_response(req, -1)
        finally:
            if self.observe is not None:
                self.observe(req.api_key, req.api_version, time.perf_counter() - started)

    def _enqueue(self, conn: _Connection, item: bytes | asyncio.Future[bytes | None]) -> None:
        if not conn.pending and isinstance(item, bytes):
            conn.writer.write(item)  # nothing ahead of it: write straight away (the hot path)
            return
        conn.pending.append(item)
        conn.wakeup.set()

    async def _write_loop(self, conn: _Connection) -> None:
        writer = conn.writer
        pending = conn.pending
        while True:
            if not pending:
                if conn.closed:
                    return
                await writer.drain()
                conn.wakeup.clear()
                await conn.wakeup.wait()
                continue
            item = pending[0]
            if isinstance(item, asyncio.Future):
                if conn.closed and not item.done():
                    item.cancel()
                    pending.clear()
                    return
                try:
                    data = await item
                except asyncio.CancelledError:
                    pending.clear()
                    return
            else:
                data = item
            pending.popleft()
            if data:
                writer.write(data)


def _log_handler_failure(conn: _Connection, req: kp.RequestFrame) -> None:
    """Log the exception being handled as a failed request (the client gets an UNKNOWN_SERVER_ERROR reply)."""
    log.exception(
        "connection %s: %s v%d (correlation %d) failed",
        conn.peer,
        kp.API_NAMES.get(req.api_key, req.api_key),
        req.api_version,
        req.correlation_id,
    )
