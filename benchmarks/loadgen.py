"""Raw Kafka-protocol load generator: pipelined group-API requests over asyncio sockets to one node, timed.

Frames are encoded by zkcoord's protocol adapter (`encode_request`) once, then only their correlation id is
patched, so the client spends its time on the socket, not on encoding. Responses on a connection come back in
request order; every response's correlation id is checked against the request it answers. Every loop here is
bounded by a request count and a deadline; only loopback addresses are used.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from zkcoord.server import kafka_protocol as kp

JOIN_V = 5  # librdkafka's JoinGroup (v4+ asks for MEMBER_ID_REQUIRED)
SYNC_V = 3
HEARTBEAT_V = 3
COMMIT_V = 8  # kafka-python's OffsetCommit against the advertised 2.8 table (flexible)
FETCH_V = 7
DESCRIBE_V = 5

NONE = 0
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_CORR = struct.Struct(">i")

Callback = Callable[[bytes, float], None]


class LoadError(RuntimeError):
    """The node answered something the load generator did not expect (names the request and the answer)."""


def frame(api_key: int, version: int, **fields: Any) -> bytes:
    """A framed request with correlation id 0 (patched per send)."""
    return kp.encode_request(api_key, version, 0, "zkcoord-loadgen", **fields)


def decode(api_key: int, version: int, body: bytes) -> Any:
    """The response object for a response frame without its size prefix."""
    return kp.decode_response(api_key, version, body)[1]


# -- embedded consumer protocol (protocol type "consumer"), encoded by hand: it is not a Kafka API ----------------


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    return _I16.pack(0) + _I32.pack(len(topics)) + b"".join(_string(t) for t in topics) + _I32.pack(-1)


def assignment(parts: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [(topic, [partition])], null user data."""
    out = [_I16.pack(0), _I32.pack(len(parts))]
    for topic, partitions in parts:
        out.append(_string(topic))
        out.append(_I32.pack(len(partitions)))
        out.extend(_I32.pack(p) for p in partitions)
    out.append(_I32.pack(-1))
    return b"".join(out)


# -- one connection --------------------------------------------------------------------------------------------


class WireConnection(asyncio.Protocol):
    """A client socket: `send(frame, callback)` pipelines; callbacks run in order with (body, latency_s)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._inflight: deque[tuple[int, float, Callback]] = deque()
        # Requests sent by callbacks while a received chunk is being read: written together at its end, so the
        # client spends one send() per chunk, not one per request (it must not be the bottleneck it measures).
        self._out: list[bytes | bytearray] | None = None
        self._next_corr = 1
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    def send(self, template: bytes, callback: Callback) -> None:
        if self.transport is None or self.transport.is_closing():
            raise LoadError("connection is closed")
        corr = self._next_corr
        self._next_corr = (corr + 1) & 0x7FFFFFFF
        data = bytearray(template)
        _CORR.pack_into(data, 8, corr)
        self._inflight.append((corr, time.perf_counter(), callback))
        if self._out is not None:
            self._out.append(data)
        else:
            self.transport.write(data)

    def request(self, template: bytes) -> asyncio.Future[bytes]:
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def done(body: bytes, _latency: float) -> None:
            if not fut.done():
                fut.set_result(body)

        self.send(template, done)
        return fut

    def data_received(self, data: bytes) -> None:
        self._out = []
        try:
            self._read(data)
        finally:
            out, self._out = self._out, None
            if out and self.transport is not None and not self.transport.is_closing():
                self.transport.write(b"".join(out))

    def _read(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            body = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            now = time.perf_counter()
            if not self._inflight:
                raise LoadError("response with no request in flight")
            corr, sent, callback = self._inflight.popleft()
            (got,) = _CORR.unpack_from(body, 0)
            if got != corr:
                raise LoadError(f"correlation id {got} answers request {corr}: responses out of order")
            callback(body, now - sent)
        del buf[:pos]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def create_topic(conn: WireConnection, name: str, partitions: int, deadline_s: float = 60.0) -> str:
    """Create `name` (CreateTopics v7) and wait until this node's Metadata lists its `partitions` partitions (a
    cluster node learns a topic from ZooKeeper, and takes commits only for partitions it has); its topic id (32
    hex digits), as v7 answers it (KIP-516)."""
    creatable = kp._CLASSES[kp.CREATE_TOPICS][0].CreatableTopic
    topic = creatable(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
    created = decode(kp.CREATE_TOPICS, 7, await conn.request(
        frame(kp.CREATE_TOPICS, 7, topics=[topic], timeout_ms=30_000, validate_only=False)))  # fmt: skip
    if any(t.error_code for t in created.topics):
        raise LoadError(f"creating {name}: {created}")
    deadline = time.monotonic() + deadline_s
    while True:
        meta = decode(kp.METADATA, 1, await conn.request(frame(kp.METADATA, 1, topics=[name])))
        if any(t.name == name and t.error_code == 0 and len(t.partitions) == partitions for t in meta.topics):
            return str(created.topics[0].topic_id.hex)
        if time.monotonic() > deadline:
            raise LoadError(f"{name} not in the node's metadata after {deadline_s} s: {meta}")
        await asyncio.sleep(0.05)  # bounded poll of the node's metadata (a benchmark's set-up, not a test)


async def connect(host: str, port: int) -> WireConnection:
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise LoadError(f"loadgen only talks to loopback, not {host}")
    loop = asyncio.get_running_loop()
    _transport, proto = await loop.create_connection(WireConnection, host, port)
    return proto


# -- group members -----------------------------------------------------------------------------------------------


@dataclass
class Member:
    group_id: str
    conn: WireConnection
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: list[str] = field(default_factory=list)
    assignment: bytes = b""

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader


def join_frame(m: Member, metadata: bytes, session_ms: int, rebalance_ms: int) -> bytes:
    return frame(
        kp.JOIN_GROUP,
        JOIN_V,
        group_id=m.group_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        member_id=m.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[("range", metadata)],
    )


def sync_frame(m: Member, assignments: Sequence[tuple[str, bytes]]) -> bytes:
    return frame(
        kp.SYNC_GROUP,
        SYNC_V,
        group_id=m.group_id,
        generation_id=m.generation,
        member_id=m.member_id,
        group_instance_id=None,
        assignments=list(assignments),
    )


def heartbeat_frame(m: Member) -> bytes:
    return frame(
        kp.HEARTBEAT,
        HEARTBEAT_V,
        group_id=m.group_id,
        generation_id=m.generation,
        member_id=m.member_id,
        group_instance_id=None,
    )


def commit_frame(m: Member, topic: str, offsets: Sequence[tuple[int, int]]) -> bytes:
    return frame(
        kp.OFFSET_COMMIT,
        COMMIT_V,
        group_id=m.group_id,
        generation_id_or_member_epoch=m.generation,
        member_id=m.member_id,
        group_instance_id=None,
        topics=[(topic, [(p, o, -1, "") for p, o in offsets])],
    )


def heartbeat_error(body: bytes) -> int:
    """Heartbeat v1-v3 response: correlation id, throttle_time_ms, error_code."""
    return int(_I16.unpack_from(body, 8)[0])


def round_robin(members: Sequence[str], topic: str, partitions: int) -> list[tuple[str, bytes]]:
    """The leader's plan: partition p to member p mod n (sorted member ids), as ConsumerProtocolAssignment."""
    ordered = sorted(members)
    owned: dict[str, list[int]] = {m: [] for m in ordered}
    for p in range(partitions):
        owned[ordered[p % len(ordered)]].append(p)
    return [(m, assignment([(topic, owned[m])] if owned[m] else [])) for m in ordered]


async def join(m: Member, metadata: bytes, session_ms: int = 30_000, rebalance_ms: int = 60_000) -> Any:
    """One JoinGroup round trip (taking a MEMBER_ID_REQUIRED id and retrying once); returns the response."""
    for _ in range(2):
        body = await m.conn.request(join_frame(m, metadata, session_ms, rebalance_ms))
        resp = decode(kp.JOIN_GROUP, JOIN_V, body)
        if resp.error_code == MEMBER_ID_REQUIRED and not m.member_id:
            m.member_id = resp.member_id
            continue
        return resp
    raise LoadError(f"{m.group_id}: JoinGroup kept answering MEMBER_ID_REQUIRED")


def accept_join(m: Member, resp: Any) -> None:
    if resp.error_code != NONE:
        raise LoadError(f"{m.group_id}/{m.member_id}: JoinGroup error {resp.error_code}")
    m.member_id = resp.member_id
    m.generation = resp.generation_id
    m.leader = resp.leader
    m.members = [x.member_id for x in resp.members]


async def sync(m: Member, topic: str, partitions: int) -> int:
    plan = round_robin(m.members, topic, partitions) if m.is_leader else []
    body = await m.conn.request(sync_frame(m, plan))
    resp = decode(kp.SYNC_GROUP, SYNC_V, body)
    if resp.error_code == NONE:
        m.assignment = resp.assignment
    return int(resp.error_code)


async def form_group(
    members: Sequence[Member],
    topic: str,
    partitions: int,
    deadline: float,
    session_ms: int = 30_000,
    rebalance_ms: int = 60_000,
) -> None:
    """Join + sync every member until all are in one Stable generation (rejoining on REBALANCE_IN_PROGRESS).
    Some brokers (Tansu) hold every join for the whole `rebalance_ms`: pass a short one to them."""
    metadata = subscription([topic])

    async def run(m: Member) -> None:
        while time.monotonic() < deadline:
            resp = await join(m, metadata, session_ms, rebalance_ms)
            if resp.error_code == REBALANCE_IN_PROGRESS:
                continue
            accept_join(m, resp)
            err = await sync(m, topic, partitions)
            if err == NONE:
                return
            if err != REBALANCE_IN_PROGRESS:
                raise LoadError(f"{m.group_id}/{m.member_id}: SyncGroup error {err}")
        raise LoadError(f"{m.group_id}: not Stable before the deadline")

    while True:
        await asyncio.wait_for(
            asyncio.gather(*(run(m) for m in members)), max(0.001, deadline - time.monotonic())
        )
        if len({m.generation for m in members}) == 1:
            return
        # a late joiner opened a new generation after some members had synced: everyone rejoins it


# -- pipelined streams -------------------------------------------------------------------------------------------


@dataclass
class StreamResult:
    requests: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    first_error: str = ""

    def merge(self, other: StreamResult) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.latencies.extend(other.latencies)
        if other.first_error and not self.first_error:
            self.first_error = other.first_error


async def stream(
    conn: WireConnection,
    frames: Sequence[bytes],
    check: Callable[[bytes], str],
    window: int,
    max_requests: int,
    stop_at: float,
) -> StreamResult:
    """Keep `window` requests in flight on `conn`, cycling through `frames`, until `max_requests` were answered
    or the clock passes `stop_at` (perf_counter). `check(body)` returns "" or what was wrong."""
    result = StreamResult()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    sent = 0
    n_frames = len(frames)

    def on_response(body: bytes, latency: float) -> None:
        nonlocal sent
        result.requests += 1
        result.latencies.append(latency)
        problem = check(body)
        if problem:
            result.errors += 1
            if not result.first_error:
                result.first_error = problem
        if sent < max_requests and time.perf_counter() < stop_at:
            conn.send(frames[sent % n_frames], on_response)
            sent += 1
        elif conn.inflight == 0 and not done.done():
            done.set_result(None)

    start = time.perf_counter()
    for _ in range(min(window, max_requests)):
        conn.send(frames[sent % n_frames], on_response)
        sent += 1
    closed = conn.closed
    finished, _ = await asyncio.wait(
        [done, closed], timeout=max(0.0, stop_at - start) + 30.0, return_when=asyncio.FIRST_COMPLETED
    )
    if done not in finished:
        raise LoadError(f"stream ended without all answers ({result.requests} of {sent})")
    result.elapsed = time.perf_counter() - start
    return result


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


class SuccessCheck:
    """Checks responses cheaply: the first is decoded and must be all-success; later ones must match its bytes
    after the correlation id (a success answer to the same request shape is byte-identical), and a mismatch is
    decoded to name the error codes."""

    def __init__(self, api_key: int, version: int, errors: Callable[[Any], list[int]]) -> None:
        self.api_key = api_key
        self.version = version
        self.errors = errors
        self.reference: dict[int, bytes] = {}

    def __call__(self, body: bytes) -> str:
        tail = body[4:]
        known = self.reference.get(len(tail))
        if known is not None and known == tail:
            return ""
        codes = self.errors(decode(self.api_key, self.version, body))
        bad = sorted({c for c in codes if c != NONE})
        if bad:
            return f"{kp.API_NAMES.get(self.api_key, self.api_key)} error codes {bad}"
        self.reference[len(tail)] = bytes(tail)
        return ""


def heartbeat_check() -> SuccessCheck:
    return SuccessCheck(kp.HEARTBEAT, HEARTBEAT_V, lambda r: [r.error_code])


def commit_check() -> SuccessCheck:
    return SuccessCheck(
        kp.OFFSET_COMMIT,
        COMMIT_V,
        lambda r: [p.error_code for t in r.topics for p in t.partitions] or [-1],
    )
