"""Message sets of magic 0 and 1 (Kafka's LegacyRecord, the formats of clients before 0.11): decode with every
CRC-32 checked and every inflation bounded, encode, convert up to one RecordBatch v2 for storing, and convert
stored batches down to what an old Fetch version asks for.

Layout of one message: offset int64 | size int32 (bytes after it) | crc uint32 (CRC-32 of what follows) |
magic int8 | attributes int8 (codec in the low 3 bits, bit 3 = LogAppendTime in magic 1) | timestamp int64 (magic 1
only) | key bytes (int32 length, -1 = null) | value bytes. A compressed message (a "wrapper") holds a whole message
set, compressed, as its value: in magic 0 the inner messages carry absolute offsets, in magic 1 relative ones
(0..n-1, the wrapper's offset being the last inner message's). Kafka's LogValidator refuses a compressed inner
message (no nesting), an inner magic differing from its wrapper's, and any CRC mismatch; so do we, with its error
codes (`CorruptBatch` and its subclasses from `zkcoord.records.batch`).

Guarantees: every function here either returns whole, checked messages or raises a `CorruptBatch` subclass naming
what was wrong and where; no input inflates past the caller's `max_inflated` (gzip is read with a bounded
decompressor, snappy checks each block's stated length first, lz4 is read in bounded chunks); no I/O, no clock
(time is a parameter). lz4 wrappers of magic 0 are read as Kafka reads them, their frame header checksum ignored
(Kafka 0.8.2-0.9 computed it wrongly, KAFKA-3160); those of magic 1 are standard frames, checked.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from zkcoord.records import lz4, snappy
from zkcoord.records.batch import (
    CONTROL_BIT,
    GZIP,
    LZ4,
    NO_COMPRESSION,
    NO_TIMESTAMP,
    SNAPPY,
    TIMESTAMP_TYPE_BIT,
    AppendRules,
    BatchTooLarge,
    CorruptBatch,
    InvalidTimestamp,
    build_batch,
    iter_records,
    parse_header,
)

MAGIC_V0: Final = 0
MAGIC_V1: Final = 1
LOG_OVERHEAD: Final = 12  # offset + size
MAGIC_POSITION: Final = 16  # offset 8 + size 4 + crc 4: the magic byte, here as in RecordBatch v2
_CODEC_MASK: Final = 0x07
_V0_MIN: Final = 4 + 1 + 1 + 4 + 4  # crc, magic, attributes, key length, value length
_V1_MIN: Final = _V0_MIN + 8  # + timestamp
_LOG_HEADER = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_DEFAULT_RULES: Final = AppendRules()
_CODECS: Final = {NO_COMPRESSION: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4"}


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One uncompressed message with its absolute offset (the inner messages of a wrapper, resolved)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP  # magic 0 has none
    magic: int = MAGIC_V1
    log_append_time: bool = False  # magic 1 attribute bit 3
    codec: int = NO_COMPRESSION  # the wrapper's codec it arrived in


def magic_of(buf: bytes | bytearray | memoryview) -> int:
    """The magic of the first entry of a Produce/Fetch `records` field (same byte for every format); -1 if
    the buffer is too short to say."""
    return buf[MAGIC_POSITION] if len(buf) > MAGIC_POSITION else -1


# -- decoding --------------------------------------------------------------------------------------------------


@dataclass
class _Budget:
    """Bytes that inflating may still produce, shared by every wrapper of one message set."""

    left: int  # < 0: unbounded


def _inflate(codec: int, magic: int, data: bytes, budget: _Budget, where: int) -> bytes:
    limit = budget.left
    try:
        if codec == GZIP:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(data, limit + 1 if limit >= 0 else 0)
            if not d.eof and (limit < 0 or len(out) <= limit):
                raise CorruptBatch("gzip data is truncated", where)
        elif codec == SNAPPY:
            out = snappy.decompress(data, limit)
        elif codec == LZ4:
            out = lz4.decompress(data, limit, old_header_checksum=magic == MAGIC_V0)
        else:
            raise CorruptBatch(
                f"codec {codec} message sets cannot be read here (none, gzip, snappy, lz4)", where
            )
    except (zlib.error, snappy.SnappyError, lz4.Lz4Error) as exc:
        raise CorruptBatch(f"compressed message does not decompress: {exc}", where) from exc
    if limit >= 0 and len(out) > limit:
        raise CorruptBatch(f"compressed messages inflate past the limit of {limit} more bytes", where)
    if limit >= 0:
        budget.left -= len(out)
    return out


def _bytes_field(buf: bytes, pos: int, end: int, what: str, where: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptBatch(f"message {what} length runs past the message end", where)
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise CorruptBatch(f"message {what} length {length}", where)
        return None, pos
    if pos + length > end:
        raise CorruptBatch(f"message {what} of {length} bytes runs past the message end", where)
    return buf[pos : pos + length], pos + length


def _entries(buf: bytes, where: int, partial_tail: bool) -> Iterator[tuple[int, int, int]]:
    """(offset, start, end) of each message's bytes after its size field; a cut-off last message is an error
    unless `partial_tail` (a Fetch response may end in one)."""
    pos = 0
    while pos < len(buf):
        if pos + LOG_OVERHEAD > len(buf):
            if partial_tail:
                return
            raise CorruptBatch(f"truncated message header ({len(buf) - pos} bytes)", where + pos)
        offset, size = _LOG_HEADER.unpack_from(buf, pos)
        start = pos + LOG_OVERHEAD
        if size < _V0_MIN:
            raise CorruptBatch(f"message size {size} is smaller than a message", where + pos)
        if start + size > len(buf):
            if partial_tail:
                return
            raise CorruptBatch(f"message of {size} bytes runs past the end of the set", where + pos)
        yield offset, start, start + size
        pos = start + size


def _message(
    buf: bytes, start: int, end: int, where: int
) -> tuple[int, int, int, bytes | None, bytes | None]:
    """(magic, attributes, timestamp, key, value) of one message, its CRC-32 checked."""
    (crc,) = struct.unpack_from(">I", buf, start)
    actual = zlib.crc32(buf[start + 4 : end])
    if actual != crc:
        raise CorruptBatch(f"message CRC-32 mismatch: stored {crc:#010x}, computed {actual:#010x}", where)
    magic, attributes = buf[start + 4], buf[start + 5]
    pos = start + 6
    timestamp = NO_TIMESTAMP
    if magic == MAGIC_V1:
        if end - start < _V1_MIN:
            raise CorruptBatch(f"magic 1 message of {end - start} bytes is smaller than its header", where)
        (timestamp,) = struct.unpack_from(">q", buf, pos)
        pos += 8
    elif magic != MAGIC_V0:
        raise CorruptBatch(f"magic {magic} in a message set (only 0 and 1 here)", where)
    key, pos = _bytes_field(buf, pos, end, "key", where)
    value, pos = _bytes_field(buf, pos, end, "value", where)
    if pos != end:
        raise CorruptBatch(f"{end - pos} bytes after the message value", where)
    return magic, attributes, timestamp, key, value


def decode_message_set(
    data: bytes | bytearray | memoryview,
    *,
    max_inflated: int = -1,
    max_message_bytes: int = -1,
    partial_tail: bool = False,
) -> list[LegacyMessage]:
    """Every message of a magic 0/1 message set, wrappers opened, with absolute offsets. `max_inflated` bounds
    the bytes all wrappers together may inflate to, `max_message_bytes` the size of one top-level message
    (Kafka's message.max.bytes, MESSAGE_TOO_LARGE); `partial_tail` accepts a cut-off last message (Fetch)."""
    buf = bytes(data)
    budget = _Budget(max_inflated)
    out: list[LegacyMessage] = []
    for offset, start, end in _entries(buf, 0, partial_tail):
        where = start - LOG_OVERHEAD
        if max_message_bytes >= 0 and end - where > max_message_bytes:
            raise BatchTooLarge(
                f"message of {end - where} bytes exceeds message.max.bytes {max_message_bytes}", where
            )
        magic, attributes, timestamp, key, value = _message(buf, start, end, where)
        codec = attributes & _CODEC_MASK
        log_append = magic == MAGIC_V1 and bool(attributes & TIMESTAMP_TYPE_BIT)
        if codec == NO_COMPRESSION:
            out.append(LegacyMessage(offset, key, value, timestamp, magic, log_append))
            continue
        if value is None:
            raise CorruptBatch("compressed message has a null value", where)
        inner = _inflate(codec, magic, value, budget, where)
        out.extend(_open_wrapper(inner, offset, magic, codec, timestamp, log_append, where))
    return out


def _open_wrapper(
    inner: bytes, offset: int, magic: int, codec: int, timestamp: int, log_append: bool, where: int
) -> list[LegacyMessage]:
    found: list[LegacyMessage] = []
    for inner_offset, start, end in _entries(inner, where, False):
        m, attributes, ts, key, value = _message(inner, start, end, where)
        if attributes & _CODEC_MASK:
            raise CorruptBatch("a compressed message holds another compressed message", where)
        if m != magic:
            raise CorruptBatch(f"inner message of magic {m} inside a magic {magic} wrapper", where)
        # LogAppendTime on the wrapper: every inner message's time is the wrapper's (Kafka's rule).
        found.append(
            LegacyMessage(inner_offset, key, value, timestamp if log_append else ts, m, log_append, codec)
        )
    if not found:
        raise CorruptBatch("compressed message holds no messages", where)
    if magic == MAGIC_V1:
        # Relative inner offsets: the wrapper carries the absolute offset of the last one.
        last = found[-1].offset
        found = [
            LegacyMessage(
                offset - last + f.offset, f.key, f.value, f.timestamp, f.magic, f.log_append_time, codec
            )
            for f in found
        ]
    return found


# -- encoding --------------------------------------------------------------------------------------------------


def encode_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = MAGIC_V1,
    attributes: int = 0,
    timestamp: int = NO_TIMESTAMP,
) -> bytes:
    """One message with its offset/size prefix and a correct CRC-32."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"magic {magic}: only 0 and 1 are message sets")
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == MAGIC_V1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += _INT32.pack(-1) if field is None else _INT32.pack(len(field)) + field
    crc = zlib.crc32(body)
    return _LOG_HEADER.pack(offset, len(body) + 4) + struct.pack(">I", crc) + bytes(body)


def _compress(codec: int, magic: int, data: bytes) -> bytes:
    if codec == GZIP:
        c = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return snappy.compress(data)
    if codec == LZ4:
        return lz4.compress(data, old_header_checksum=magic == MAGIC_V0)  # as each Kafka generation wrote it
    raise ValueError(f"codec {codec}: only none, gzip, snappy and lz4 are written here")


def encode_message_set(
    messages: Sequence[LegacyMessage], *, magic: int = MAGIC_V1, codec: int = NO_COMPRESSION
) -> bytes:
    """`messages` as a message set of `magic`, in one wrapper when `codec` is gzip, snappy or lz4 (inner offsets
    absolute in magic 0, relative in magic 1, the wrapper at the last message's offset)."""
    if codec == NO_COMPRESSION:
        return b"".join(
            encode_message(
                m.offset,
                m.key,
                m.value,
                magic=magic,
                attributes=TIMESTAMP_TYPE_BIT if magic == MAGIC_V1 and m.log_append_time else 0,
                timestamp=m.timestamp,
            )
            for m in messages
        )
    if not messages:
        raise ValueError("a compressed message needs at least one message")
    first = messages[0].offset
    inner = b"".join(
        encode_message(
            m.offset - first if magic == MAGIC_V1 else m.offset,
            m.key,
            m.value,
            magic=magic,
            timestamp=m.timestamp,
        )
        for m in messages
    )
    last = messages[-1]
    wrapper_ts = max(m.timestamp for m in messages) if magic == MAGIC_V1 else NO_TIMESTAMP
    return encode_message(
        last.offset,
        None,
        _compress(codec, magic, inner),
        magic=magic,
        attributes=codec,
        timestamp=wrapper_ts,
    )


# -- conversion ------------------------------------------------------------------------------------------------


def to_record_batch(
    data: bytes | bytearray | memoryview,
    now_ms: int,
    rules: AppendRules = _DEFAULT_RULES,
    max_inflated: int = -1,
) -> bytes:
    """A Produce v0-v2 message set checked as Kafka's LogValidator checks magic 0/1 and converted up to one
    RecordBatch v2 (offsets 0..n-1, to be assigned by the log), so clients of every generation read it back.
    Magic 0 messages get no timestamp; a LogAppendTime wrapper gets the broker's `now_ms`. Raises a
    `CorruptBatch` subclass carrying the partition's error code."""
    bound = (
        rules.max_decompressed_bytes if max_inflated < 0 else min(max_inflated, rules.max_decompressed_bytes)
    )
    messages = decode_message_set(data, max_inflated=bound, max_message_bytes=rules.message_max_bytes)
    if not messages:
        raise CorruptBatch("no messages", 0)
    stamps: list[int] = []
    for m in messages:
        if m.magic == MAGIC_V0:
            stamps.append(NO_TIMESTAMP)
        elif m.log_append_time:
            stamps.append(now_ms)
        else:
            if m.timestamp != NO_TIMESTAMP:
                if m.timestamp < now_ms - rules.timestamp_before_max_ms:
                    raise InvalidTimestamp(f"timestamp {m.timestamp} is too far before the broker's {now_ms}")
                if m.timestamp > now_ms + rules.timestamp_after_max_ms:
                    raise InvalidTimestamp(f"timestamp {m.timestamp} is too far after the broker's {now_ms}")
            stamps.append(m.timestamp)
    # The producer's codec is kept where build_batch writes it (Kafka keeps it: compression.type=producer).
    codecs = {m.codec for m in messages}
    keep = GZIP if GZIP in codecs else LZ4 if LZ4 in codecs else NO_COMPRESSION
    return build_batch([(m.key, m.value) for m in messages], timestamps=stamps, compression=keep)


def down_convert(
    data: bytes | bytearray | memoryview,
    to_magic: int,
    first_offset: int,
    max_bytes: int,
    max_inflated: int = -1,
) -> bytes:
    """Stored RecordBatch v2 data (whole batches, as a log reads them) as an uncompressed message set of
    `to_magic`, from `first_offset` on, at most `max_bytes` but always at least one message (an old client
    makes no progress otherwise). Control batches and headers have no place in magic 0/1 and are left out."""
    view = memoryview(data)
    out: list[bytes] = []
    total = 0
    pos = 0
    while pos < len(view):
        header = parse_header(view, pos)
        end = pos + header.size
        if end > len(view):
            break  # a cut-off last batch: the next Fetch reads it whole
        if not header.attributes & CONTROL_BIT and header.last_offset >= first_offset:
            log_append = bool(header.attributes & TIMESTAMP_TYPE_BIT)
            for record in iter_records(view[pos:end], max_inflated):
                if record.offset < first_offset:
                    continue
                message = encode_message(
                    record.offset,
                    record.key,
                    record.value,
                    magic=to_magic,
                    attributes=TIMESTAMP_TYPE_BIT if to_magic == MAGIC_V1 and log_append else 0,
                    timestamp=record.timestamp if to_magic == MAGIC_V1 else NO_TIMESTAMP,
                )
                if out and total + len(message) > max_bytes:
                    return b"".join(out)
                out.append(message)
                total += len(message)
        pos = end
    return b"".join(out)


def codec_name(codec: int) -> str:
    return _CODECS.get(codec, f"codec {codec}")
