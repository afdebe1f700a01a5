"""Hand-written wire codecs for the hottest group APIs: Heartbeat, OffsetCommit and ConsumerGroupHeartbeat requests
read straight into `zkcoord.group` values, and OffsetCommit and ConsumerGroupHeartbeat responses packed straight
from them.

Guarantee: for every frame a reader here accepts, the value is equal to what the generic path (kafka-python's
generated decoder, then `kafka_protocol.group_requests`; for ConsumerGroupHeartbeat the field-by-field reader of
`zkcoord.server.consumer_protocol`) makes of it, and every packed answer is byte-identical to what the generic
encoder gives (all checked by property tests against the adapter). A reader returns
None for anything it is not sure of (a null where the schema forbids one, tagged fields, bad UTF-8, a length that
runs past the end, trailing bytes, a version it does not know): the caller then takes the generic path, which
decodes the frame or raises the precise error. So the fast path can only ever be faster, never different.

Why: the generic path builds a kafka-python object per request and a second, zkcoord-side value from it, field by
field; for a 100-partition OffsetCommit that is a few hundred objects and most of the request's CPU.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from zkcoord.group import messages as gm
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

HEARTBEAT_VERSIONS = range(0, 5)  # 4+ flexible
CONSUMER_HEARTBEAT_VERSIONS = range(0, 2)  # all flexible; v1 adds SubscribedTopicRegex
MAX_STRING = 32767  # Kafka's string limit, as zkcoord.server.consumer_protocol.MAX_STRING
OFFSET_COMMIT_VERSIONS = range(
    2, 10
)  # 8+ flexible (9 as 8: the member epoch rides in the generation); v0/v1 (ZooKeeper-era shapes) stay on the generic path

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RETENTION = struct.Struct(">q")
_PART_V2 = struct.Struct(">iq")  # partition_index, committed_offset
_PART_V6 = struct.Struct(">iqi")  # + committed_leader_epoch


class _Bad(Exception):
    """Internal: the frame is not one the fast path is sure of (the caller falls back to the generic path)."""


# -- reading ----------------------------------------------------------------------------------------------------


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise _Bad


def _string(buf: bytes, pos: int, compact: bool, nullable: bool) -> tuple[str | None, int]:
    if compact:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0:
        if not nullable or n != -1:
            raise _Bad
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _Bad
    return buf[pos:end].decode("utf-8"), end


def _no_tags(buf: bytes, pos: int) -> int:
    # Any tagged field: the generic path knows what to keep and what to drop.
    if buf[pos] != 0:
        raise _Bad
    return pos + 1


def _array_len(buf: bytes, pos: int, compact: bool) -> tuple[int, int]:
    if compact:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
    if n < 0:
        raise _Bad  # these arrays are not nullable
    return n, pos


_UNIFORM_V8_SIZE = (
    18  # partition_index, committed_offset, committed_leader_epoch, b"\x01" (""), b"\x00" (no tags)
)
_UNIFORM_V8: dict[int, struct.Struct] = {}


def _uniform_v8_partitions(buf: bytes, pos: int, count: int) -> list[gm.OffsetCommitRequestPartition] | None:
    """The usual flexible commit, every partition with empty metadata and no tagged fields, in one unpack; None
    when any partition differs (then they are read one by one)."""
    if count == 0 or pos + count * _UNIFORM_V8_SIZE > len(buf):
        return None
    s = _UNIFORM_V8.get(count)
    if s is None:
        s = struct.Struct(">" + "iqibb" * count)
        if len(_UNIFORM_V8) < 1024:
            _UNIFORM_V8[count] = s
    values = s.unpack_from(buf, pos)
    if values[3::5].count(1) != count or values[4::5].count(0) != count:
        return None
    # tuple.__new__ straight, skipping the NamedTuple's Python-level __new__ (the fields are complete here).
    new, Partition = tuple.__new__, gm.OffsetCommitRequestPartition
    return [
        new(Partition, (index, offset, epoch, "", -1))
        for index, offset, epoch in zip(values[0::5], values[1::5], values[2::5], strict=True)
    ]


def decode_heartbeat(buf: bytes, pos: int, version: int) -> gm.HeartbeatRequest | None:
    """A Heartbeat request body from byte `pos` of a whole frame; None: use the generic path."""
    if version not in HEARTBEAT_VERSIONS:
        return None
    flexible = version >= 4
    try:
        group_id, pos = _string(buf, pos, flexible, False)
        generation = _I32.unpack_from(buf, pos)[0]
        member_id, pos = _string(buf, pos + 4, flexible, False)
        instance: str | None = None
        if version >= 3:
            instance, pos = _string(buf, pos, flexible, True)
        if flexible:
            pos = _no_tags(buf, pos)
    except (_Bad, IndexError, struct.error, UnicodeDecodeError):
        return None
    if pos != len(buf):
        return None
    assert group_id is not None and member_id is not None
    return gm.HeartbeatRequest(version, group_id, generation, member_id, instance)


_INT32S: dict[int, struct.Struct] = {}  # count -> that many big-endian int32


def _int32s(count: int) -> struct.Struct:
    s = _INT32S.get(count)
    if s is None:
        s = struct.Struct(f">{count}i")
        if len(_INT32S) < 1024:  # bounded: a frame cannot grow it past that
            _INT32S[count] = s
    return s


def _cstring(buf: bytes, pos: int) -> tuple[str | None, int]:
    """A compact nullable string whose length fits one varint byte (up to 126 bytes): the usual id or name."""
    n = buf[pos] - 1
    if n < 0:
        return None, pos + 1
    if n >= 0x7F:  # a longer string (or a multi-byte varint): read it the long way
        return _long_cstring(buf, pos)
    end = pos + 1 + n
    if end > len(buf):
        raise _Bad
    return buf[pos + 1 : end].decode("utf-8"), end


def _long_cstring(buf: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = _uvarint(buf, pos)
    n -= 1
    if n < 0:
        return None, pos
    end = pos + n
    if n > MAX_STRING or end > len(buf):
        raise _Bad  # the generic reader names the limit or the truncation
    return buf[pos:end].decode("utf-8"), end


# A steady member sends the same body on every heartbeat (the correlation id is in the header): the values of the
# last bodies read, keyed by (version, body bytes). Bounded in entries and in key size (MEMO_BODY_BYTES), cleared
# whole when full; the values are frozen, so handing one out twice is the same as reading it twice.
MEMO_ENTRIES = 4096
MEMO_BODY_BYTES = 512
_read_memo: dict[tuple[int, bytes], ConsumerGroupHeartbeatRequest] = {}


def decode_consumer_heartbeat(buf: bytes, pos: int, version: int) -> ConsumerGroupHeartbeatRequest | None:
    """A ConsumerGroupHeartbeat request body from byte `pos` of a whole frame; None: use the generic reader
    (`consumer_protocol.decode_heartbeat`, which decodes the frame or names what is wrong with it). The client id
    and host are left empty: the adapter sets them from the request header and the connection."""
    if len(buf) - pos > MEMO_BODY_BYTES:
        return _read_consumer_heartbeat(buf, pos, version)
    key = (version, buf[pos:])
    value = _read_memo.get(key)
    if value is None:
        value = _read_consumer_heartbeat(buf, pos, version)
        if value is not None:
            if len(_read_memo) >= MEMO_ENTRIES:
                _read_memo.clear()
            _read_memo[key] = value
    return value


def _read_consumer_heartbeat(buf: bytes, pos: int, version: int) -> ConsumerGroupHeartbeatRequest | None:
    if version not in CONSUMER_HEARTBEAT_VERSIONS:
        return None
    try:
        group_id, pos = _cstring(buf, pos)
        member_id, pos = _cstring(buf, pos)
        if group_id is None or member_id is None:
            return None
        epoch = _I32.unpack_from(buf, pos)[0]
        instance, pos = _cstring(buf, pos + 4)
        rack, pos = _cstring(buf, pos)
        rebalance = _I32.unpack_from(buf, pos)[0]
        pos += 4
        names: tuple[str, ...] | None = None
        n, pos = _uvarint(buf, pos)
        if n:
            if n - 1 > len(buf) - pos:
                return None
            got = []
            for _ in range(n - 1):
                name, pos = _cstring(buf, pos)
                if name is None:
                    return None
                got.append(name)
            names = tuple(got)
        regex: str | None = None
        if version >= 1:
            regex, pos = _cstring(buf, pos)
        assignor, pos = _cstring(buf, pos)
        owned: tuple[tuple[str, tuple[int, ...]], ...] | None = None
        n, pos = _uvarint(buf, pos)
        if n:
            if (n - 1) * 18 > len(buf) - pos:
                return None
            topics = []
            for _ in range(n - 1):
                raw_id = buf[pos : pos + 16]
                count, pos = _uvarint(buf, pos + 16)
                if count == 0:  # a null partition list: not nullable, the generic reader names it
                    return None
                count -= 1
                if count * 4 > len(buf) - pos:
                    return None
                parts = _int32s(count).unpack_from(buf, pos)
                pos += count * 4
                if buf[pos] != 0:
                    raise _Bad  # tagged fields
                pos += 1
                topics.append((raw_id.hex(), parts))
            owned = tuple(topics)
        pos = _no_tags(buf, pos)
    except (_Bad, IndexError, struct.error, UnicodeDecodeError):
        return None
    if pos != len(buf):
        return None
    return ConsumerGroupHeartbeatRequest(
        version, group_id, member_id, epoch, instance, rack, rebalance, names, regex, assignor, owned
    )


def decode_offset_commit(buf: bytes, pos: int, version: int) -> gm.OffsetCommitRequest | None:
    """An OffsetCommit request body from byte `pos` of a whole frame; None: use the generic path."""
    if version not in OFFSET_COMMIT_VERSIONS:
        return None
    flexible = version >= 8
    Partition = gm.OffsetCommitRequestPartition
    try:
        group_id, pos = _string(buf, pos, flexible, False)
        generation = _I32.unpack_from(buf, pos)[0]
        member_id, pos = _string(buf, pos + 4, flexible, False)
        instance: str | None = None
        if version >= 7:
            instance, pos = _string(buf, pos, flexible, True)
        retention = -1
        if version <= 4:
            retention = _RETENTION.unpack_from(buf, pos)[0]
            pos += 8
        n_topics, pos = _array_len(buf, pos, flexible)
        if n_topics > len(buf) - pos:
            return None  # a lying count: the generic path names it
        topics = []
        with_epoch = version >= 6
        fixed = _PART_V6 if with_epoch else _PART_V2
        fixed_size = fixed.size
        unpack_fixed = fixed.unpack_from
        for _ in range(n_topics):
            name, pos = _string(buf, pos, flexible, False)
            n_parts, pos = _array_len(buf, pos, flexible)
            if n_parts * fixed_size > len(buf) - pos:
                return None
            parts = _uniform_v8_partitions(buf, pos, n_parts) if flexible and with_epoch else None
            if parts is not None:
                pos += n_parts * _UNIFORM_V8_SIZE
                n_parts = 0  # read in one go
            else:
                parts = []
            for _ in range(n_parts):
                if with_epoch:
                    index, offset, epoch = unpack_fixed(buf, pos)
                else:
                    index, offset = unpack_fixed(buf, pos)
                    epoch = -1
                pos += fixed_size
                if flexible and buf[pos] == 1 and buf[pos + 1] == 0:
                    meta: str | None = ""  # the usual commit: empty metadata, no tagged fields
                    pos += 2
                else:
                    meta, pos = _string(buf, pos, flexible, True)
                    if flexible:
                        pos = _no_tags(buf, pos)
                parts.append(Partition(index, offset, epoch, meta, -1))
            if flexible:
                pos = _no_tags(buf, pos)
            assert name is not None
            topics.append(gm.OffsetCommitRequestTopic(name, tuple(parts)))
        if flexible:
            pos = _no_tags(buf, pos)
    except (_Bad, IndexError, struct.error, UnicodeDecodeError):
        return None
    if pos != len(buf):
        return None
    assert group_id is not None and member_id is not None
    return gm.OffsetCommitRequest(
        api_version=version,
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        topics=tuple(topics),
        group_instance_id=instance,
        retention_time_ms=retention,
    )


# -- packing ----------------------------------------------------------------------------------------------------

_HEAD = struct.Struct(">ii")  # size, correlation id
_HEAD_FLEX = struct.Struct(">iib")  # + empty response-header tagged fields
_THROTTLE_ZERO = b"\x00\x00\x00\x00"
_PARTS: dict[tuple[int, bool], struct.Struct] = {}  # (count, flexible) -> the partitions' fixed part at once


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _parts_struct(count: int, flexible: bool) -> struct.Struct:
    s = _PARTS.get((count, flexible))
    if s is None:
        s = struct.Struct(">" + ("ihb" if flexible else "ih") * count)
        if len(_PARTS) < 4096:
            _PARTS[(count, flexible)] = s
    return s


def offset_commit_response(
    version: int, correlation_id: int, topics: Sequence[gm.OffsetCommitResponseTopic]
) -> bytes | None:
    """The whole response frame (size prefix included) at `version`; None for a version not packed here."""
    if version not in OFFSET_COMMIT_VERSIONS:
        return None
    flexible = version >= 8
    out = [_THROTTLE_ZERO] if version >= 3 else []
    append = out.append
    if flexible:
        append(_uvarint_bytes(len(topics) + 1))
    else:
        append(_I32.pack(len(topics)))
    for t in topics:
        raw = t.name.encode("utf-8")
        parts = t.partitions
        n = len(parts)
        flat: list[int] = []
        if flexible:
            append(_uvarint_bytes(len(raw) + 1))
            append(raw)
            append(_uvarint_bytes(n + 1))
            for p in parts:
                flat += (p.partition_index, p.error_code, 0)
            append(_parts_struct(n, True).pack(*flat))
            append(b"\x00")  # the topic's tagged fields
        else:
            append(_I16.pack(len(raw)))
            append(raw)
            append(_I32.pack(n))
            for p in parts:
                flat += (p.partition_index, p.error_code)
            append(_parts_struct(n, False).pack(*flat))
    if flexible:
        append(b"\x00")  # the body's tagged fields
        body = b"".join(out)
        return _HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + body
    body = b"".join(out)
    return _HEAD.pack(len(body) + 4, correlation_id) + body


_CGH_HEAD = struct.Struct(">iibih")  # size, correlation id, no header tags, throttle 0, error code
_CGH_EPOCHS = struct.Struct(">ii")  # member epoch, heartbeat interval


def _cstring_bytes(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode("utf-8")
    return _uvarint_bytes(len(raw) + 1) + raw


_answer_memo: dict[
    tuple[str | None, int, int], bytes
] = {}  # the steady answers' bodies, bounded as _read_memo


def consumer_heartbeat_response(
    version: int, correlation_id: int, resp: ConsumerGroupHeartbeatResponse
) -> bytes | None:
    """The whole ConsumerGroupHeartbeat response frame (size prefix included); None for a version not packed here.
    The usual answer (no error message, no assignment) is three packs and a join."""
    if version not in CONSUMER_HEARTBEAT_VERSIONS:
        return None
    if resp.assignment is None and resp.error_message is None:
        # The steady answer: its body after the error code depends on (member id, epoch, interval) only.
        key = (resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms)
        body = _answer_memo.get(key)
        if body is None:
            body = _cstring_bytes(resp.member_id) + _CGH_EPOCHS.pack(key[1], key[2])
            body = b"\x00" + body + b"\xff\x00"  # null message; null Assignment, body tags
            if len(_answer_memo) >= MEMO_ENTRIES:
                _answer_memo.clear()
            if len(body) <= MEMO_BODY_BYTES:
                _answer_memo[key] = body
        return _CGH_HEAD.pack(len(body) + 11, correlation_id, 0, 0, resp.error_code) + body
    tail = [
        _cstring_bytes(resp.error_message),
        _cstring_bytes(resp.member_id),
        _CGH_EPOCHS.pack(resp.member_epoch, resp.heartbeat_interval_ms),
    ]
    assignment = resp.assignment
    if assignment is None:
        tail.append(b"\xff\x00")  # a null Assignment struct (int8 -1), then the body's tagged fields
    else:
        tail.append(b"\x01")
        tail.append(_uvarint_bytes(len(assignment) + 1))
        for topic_id, parts in assignment:
            tail.append(bytes.fromhex(topic_id))
            tail.append(_uvarint_bytes(len(parts) + 1))
            tail.append(_int32s(len(parts)).pack(*parts))
            tail.append(b"\x00")  # the topic's tagged fields
        tail.append(b"\x00\x00")  # the Assignment struct's tagged fields, then the body's
    body = b"".join(tail)
    # 4 (correlation id) + 1 (header tags) + 4 (throttle) + 2 (error code) before the tail
    return _CGH_HEAD.pack(len(body) + 11, correlation_id, 0, 0, resp.error_code) + body
