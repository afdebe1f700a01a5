"""Request frames in and response frames out: the request header, the body decoded through the codec table (bounded
first by the prescan, or read by the fast paths), the response header, and every way a frame can be wrong as a
`ProtocolError` subclass naming what was wrong; the wire layer decides whether it can answer (UNSUPPORTED_VERSION,
ApiVersions v0 fallback) or must close the connection.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from zkcoord.api_keys import ApiKey, api_name
from zkcoord.errors import ZkcoordError
from zkcoord.group import messages as gm
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest
from zkcoord.group.errors import ErrorCode
from zkcoord.security.acl import Session
from zkcoord.server import consumer_protocol, fastpath, prescan
from zkcoord.server.kafka_protocol import codecs
from zkcoord.server.kafka_protocol.codecs import ACCEPTED

# Error codes the wire layer itself produces (from the one enum).
UNSUPPORTED_VERSION = ErrorCode.UNSUPPORTED_VERSION
INVALID_REQUEST = ErrorCode.INVALID_REQUEST

# Assigned, not imported: CPython 3.11 compiles a method call on a name bound by an import as an attribute load
# (a bound method built per call, 30 ns on the heartbeat path).
_CODECS = codecs.CODECS

# Plain ints for the per-request comparisons.
_PRODUCE = int(ApiKey.PRODUCE)
_HEARTBEAT = int(ApiKey.HEARTBEAT)
_OFFSET_COMMIT = int(ApiKey.OFFSET_COMMIT)
_CONSUMER_GROUP_HEARTBEAT = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)

# -- errors ---------------------------------------------------------------------------------------------------


class ProtocolError(ZkcoordError, ValueError):
    """A request frame the server cannot serve; `correlation_id` is None when even the header is unreadable."""

    code = INVALID_REQUEST

    def __init__(
        self, reason: str, api_key: int = -1, api_version: int = -1, correlation_id: int | None = None
    ):
        name = api_name(api_key)
        where = f"{name} v{api_version}" if api_key >= 0 else "request"
        super().__init__(f"{where}: {reason}")
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedFrame(ProtocolError):
    """The request header is truncated or garbled; the connection must be closed."""


class UnknownApiKey(ProtocolError):
    """An API this server does not implement; Kafka closes the connection."""


class UnsupportedVersion(ProtocolError):
    """A known API at a version outside the accepted window; answered with UNSUPPORTED_VERSION where possible."""

    code = UNSUPPORTED_VERSION


class MalformedBody(ProtocolError):
    """The body does not decode at the version in its header (truncated, trailing bytes, bad lengths)."""


# -- decoding -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestFrame:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # kafka-python's request object; for Heartbeat/OffsetCommit the zkcoord value (see the fast paths)
    flexible: bool
    session: Session | None = None  # who sent it (principal, client address); None: User:ANONYMOUS


HEAD = struct.Struct(">hhih")
_CLIENT_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf):
            raise IndexError("uvarint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError("uvarint longer than 5 bytes")


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """(api_key, api_version, correlation_id) if the frame has them, else None."""
    if len(frame) < 8:
        return None
    key, version, corr = struct.unpack_from(">hhi", frame, 0)
    return key, version, corr


def decode_request(frame: bytes | bytearray | memoryview, session: Session | None = None) -> RequestFrame:
    """Decode one request frame (without its 4-byte size prefix), sent by `session`'s principal."""
    buf = memoryview(frame)
    if len(buf) < 10:
        peek = peek_header(buf)
        raise MalformedFrame(
            f"frame of {len(buf)} bytes is shorter than a request header (10 bytes)",
            *(peek if peek else (-1, -1, None)),
        )
    key, version, corr, cid_len = HEAD.unpack_from(buf, 0)
    codec = _CODECS.get((key, version))
    if codec is None:
        if key not in ACCEPTED:
            raise UnknownApiKey(f"api key {key} is not supported", key, version, corr)
        lo, hi = ACCEPTED[key]
        raise UnsupportedVersion(
            f"version {version} is outside the supported range {lo}-{hi}", key, version, corr
        )
    pos = 10
    client_id: str | None = None
    try:
        if cid_len >= 0:
            if pos + cid_len > len(buf):
                raise IndexError(f"client_id of {cid_len} bytes runs past the frame end")
            client_id = bytes(buf[pos : pos + cid_len]).decode("utf-8")
            pos += cid_len
        elif cid_len != -1:
            raise ValueError(f"client_id length {cid_len}")
        header_tags = 0
        if codec.flexible:
            ntags, pos = read_uvarint(buf, pos)
            if ntags > prescan.MAX_TAGGED_FIELDS:
                raise ValueError(
                    f"{ntags} tagged fields, more than {prescan.MAX_TAGGED_FIELDS} in one request"
                )
            header_tags = ntags
            for _ in range(ntags):
                _tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                pos += size
            if pos > len(buf):
                raise IndexError("header tagged fields run past the frame end")
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise MalformedFrame(f"bad request header: {exc}", key, version, corr) from exc
    fast = _fast_request(key, version, frame, pos)
    if fast is not None:
        return RequestFrame(key, version, corr, client_id, fast, codec.flexible, session)
    if codec.plan is None:  # a hand-written codec (consumer_protocol), bounded on its own
        try:
            body = codec.decode(buf, pos)[0]
        except consumer_protocol.BodyError as exc:
            raise MalformedBody(f"body does not decode: {exc}", key, version, corr) from exc
        return RequestFrame(key, version, corr, client_id, body, codec.flexible, session)
    try:
        # Bounded before the generic decoder runs: lengths against bytes left, forbidden nulls, and nested
        # unknown tagged fields dropped (kafka-python copies the rest of the frame per non-empty section).
        unknown_tags = codec.plan.scan(buf, pos, prescan.MAX_TAGGED_FIELDS - header_tags)
    except prescan.PrescanError as exc:
        raise MalformedBody(f"body does not decode: {exc}", key, version, corr) from exc
    if unknown_tags:
        buf = memoryview(prescan.strip_unknown_tags(buf, unknown_tags))
    try:
        body, end = codec.decode(buf, pos)
    except Exception as exc:  # kafka-python raises struct.error, IndexError, ValueError, ... on bad input
        raise MalformedBody(f"body does not decode: {type(exc).__name__}: {exc}", key, version, corr) from exc
    if end != len(buf):
        what = "is truncated" if end > len(buf) else f"has {len(buf) - end} trailing bytes"
        raise MalformedBody(
            f"body {what} (frame {len(buf)} bytes, decoded to byte {end})", key, version, corr
        )
    return RequestFrame(key, version, corr, client_id, body, codec.flexible, session)


def expects_response(req: RequestFrame) -> bool:
    """False only for Produce with acks=0, which Kafka never answers."""
    return not (req.api_key == _PRODUCE and req.body.acks == 0)


def valid_client_software(req: RequestFrame) -> bool:
    """ApiVersions v3+: client_software_name/version must match Kafka's pattern (else INVALID_REQUEST)."""
    if req.api_version < 3:
        return True
    name = req.body.client_software_name or ""
    ver = req.body.client_software_version or ""
    return bool(_CLIENT_SOFTWARE.match(name)) and bool(_CLIENT_SOFTWARE.match(ver))


def produce_acks(frame: bytes | bytearray | memoryview) -> int:
    """The `acks` of a Produce request frame (without its size prefix), read without decoding the records:
    header (client id, tagged fields from v9), then v3+'s transactional id. acks=0 gets no response."""
    buf = memoryview(frame)
    try:
        _key, version, _corr, cid_len = HEAD.unpack_from(buf, 0)
        pos = 10 + max(cid_len, 0)
        flexible = version >= 9
        if flexible:
            ntags, pos = read_uvarint(buf, pos)
            for _ in range(ntags):
                _tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                pos += size
        if version >= 3:
            if flexible:
                n, pos = read_uvarint(buf, pos)
                pos += max(n - 1, 0)
            else:
                (n,) = struct.unpack_from(">h", buf, pos)
                pos += 2 + max(n, 0)
        (acks,) = struct.unpack_from(">h", buf, pos)
    except (struct.error, IndexError, ValueError) as exc:
        raise MalformedFrame(f"Produce header does not decode: {exc}", _PRODUCE) from exc
    return int(acks)


# -- fast paths: Heartbeat, OffsetCommit and ConsumerGroupHeartbeat without the generic per-field machinery -----
# zkcoord.server.fastpath reads these requests straight into zkcoord values (the frame's `body` is then that
# value, which `group_requests` passes through; a ConsumerGroupHeartbeat is the same value its generic reader
# makes) and packs OffsetCommit and ConsumerGroupHeartbeat answers; anything it is not sure of comes back None and
# takes the generic path. Equality with the generic path is a property test.

FAST_VALUES = (gm.HeartbeatRequest, gm.OffsetCommitRequest)


def _fast_request(
    key: int, version: int, frame: bytes | bytearray | memoryview, pos: int
) -> gm.HeartbeatRequest | gm.OffsetCommitRequest | ConsumerGroupHeartbeatRequest | None:
    if key == _HEARTBEAT:
        return fastpath.decode_heartbeat(frame if type(frame) is bytes else bytes(frame), pos, version)
    if key == _OFFSET_COMMIT:
        return fastpath.decode_offset_commit(frame if type(frame) is bytes else bytes(frame), pos, version)
    if key == _CONSUMER_GROUP_HEARTBEAT:
        return fastpath.decode_consumer_heartbeat(
            frame if type(frame) is bytes else bytes(frame), pos, version
        )
    return None


# -- encoding -------------------------------------------------------------------------------------------------


RESP_HEAD = struct.Struct(">ii")
RESP_HEAD_FLEX = struct.Struct(">iib")


def frame_response(key: int, version: int, correlation_id: int, body: bytes | bytearray) -> bytes:
    codec = _CODECS.get((key, version))
    flexible = codec.response_flexible if codec else False
    if flexible:
        return RESP_HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + bytes(body)
    return RESP_HEAD.pack(len(body) + 4, correlation_id) + bytes(body)


def encode(req: RequestFrame, resp: Any) -> bytes:
    return frame_response(
        req.api_key, req.api_version, req.correlation_id, resp.encode(version=req.api_version)
    )


def response_class(req: RequestFrame) -> Any:
    return _CODECS[(req.api_key, req.api_version)].response_cls


def frame_v0(correlation_id: int, body: bytes | bytearray) -> bytes:
    return RESP_HEAD.pack(len(body) + 4, correlation_id) + bytes(body)
