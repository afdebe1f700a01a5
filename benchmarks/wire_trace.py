"""A loopback TCP relay in front of one node that logs every group request (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) and its answer with timestamps, as the coordinator receives and sends them (for the benches' `--trace`).

The node is started with `--advertise` set to the relay's address, so clients reach the coordinator only through
it. Frames pass unchanged; the relay only reads them. Loopback only; one thread per direction per connection.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from typing import Any

from zkcoord.api_keys import ApiKey
from zkcoord.group.consumer_classic import parse_assignment, parse_subscription
from zkcoord.server.kafka_protocol import decode_response
from zkcoord.server.kafka_protocol.frames import decode_request

log = logging.getLogger("wire")
GROUP_KEYS = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP}
MAX_FRAME = 64 << 20  # a larger size: the connection is relayed unread from there on (bounded buffer)


def _parts(assignment: bytes) -> str:
    try:
        return str(sorted(p for ps in parse_assignment(assignment).values() for p in ps))
    except Exception as exc:  # a trace must not stop the relay; say what did not decode
        return f"<undecodable {exc}>"


def _owned(metadata: bytes) -> str:
    try:
        _v, _topics, owned, _gen = parse_subscription(metadata)
        return str(sorted(p for ps in owned.values() for p in ps))
    except Exception as exc:
        return f"<undecodable {exc}>"


def describe_request(key: int, body: Any) -> str:
    if key == ApiKey.JOIN_GROUP:
        protos = ",".join(f"{p.name} owned={_owned(p.metadata)}" for p in body.protocols)
        return (
            f"JoinGroup member={body.member_id or '-'} rebalance_timeout={body.rebalance_timeout_ms} {protos}"
        )
    if key == ApiKey.SYNC_GROUP:
        given = "; ".join(f"{a.member_id}={_parts(a.assignment)}" for a in body.assignments)
        return f"SyncGroup member={body.member_id} gen={body.generation_id}" + (
            f" leader: {given}" if given else ""
        )
    if key == ApiKey.HEARTBEAT:
        return f"Heartbeat member={body.member_id} gen={body.generation_id}"
    members = getattr(body, "members", None) or [body]
    return "LeaveGroup " + ",".join(str(getattr(m, "member_id", "?")) for m in members)


def describe_response(key: int, r: Any) -> str:
    if key == ApiKey.JOIN_GROUP:
        leader = f" leader, {len(r.members)} members" if r.members else ""
        return f"JoinGroup answer error={r.error_code} gen={r.generation_id} member={r.member_id}{leader}"
    if key == ApiKey.SYNC_GROUP:
        return f"SyncGroup answer error={r.error_code} assignment={_parts(r.assignment)}"
    return f"{ApiKey(key).name.title().replace('_', '')} answer error={r.error_code}"


class WireTrace:
    """Accepts on 127.0.0.1:`port` (0: any free port) and relays each connection to `target`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="wire-trace", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._conns += [client, upstream]
            pending: dict[int, tuple[int, int, str]] = {}  # correlation id -> (key, version, client id)
            name = f"{client.getpeername()[1]}"
            threading.Thread(
                target=self._pump, args=(client, upstream, pending, name, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, pending, name, False), daemon=True
            ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pending: dict[int, tuple[int, int, str]], conn: str,
        requests: bool,
    ) -> None:  # fmt: skip
        buf = b""
        reading = True  # False once the stream is not Kafka frames: relayed unread from then on
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if not requests:  # an answer goes on at once; a request is read first (its answer needs that)
                    dst.sendall(data)
                buf = buf + data if reading else b""
                while reading and len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if size < 0 or size > MAX_FRAME:
                        reading, buf = False, b""
                    elif len(buf) < 4 + size:
                        break
                    else:
                        frame, buf = buf[4 : 4 + size], buf[4 + size :]
                        self._read(frame, pending, conn, requests)
                if requests:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _read(
        self, frame: bytes, pending: dict[int, tuple[int, int, str]], conn: str, requests: bool
    ) -> None:
        if requests:
            if len(frame) < 8:
                return
            key, version, corr = struct.unpack_from(">hhi", frame)
            if key not in GROUP_KEYS:
                return
            try:
                req = decode_request(frame)
            except Exception as exc:
                log.info("conn %s: group request key %d did not decode: %s", conn, key, exc)
                return
            pending[corr] = (key, version, req.client_id or "-")
            log.info("%s -> %s", req.client_id, describe_request(key, req.body))
            return
        corr = struct.unpack_from(">i", frame)[0]
        if corr not in pending:
            return
        key, version, client = pending.pop(corr)
        try:
            _corr, resp = decode_response(key, version, frame)
        except Exception as exc:
            log.info("%s <- answer to key %d did not decode: %s", client, key, exc)
            return
        log.info("%s <- %s", client, describe_response(key, resp))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
        self.server.close()
        for s in conns:
            s.close()
