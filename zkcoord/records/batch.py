"""RecordBatch v2 (magic 2): parse and validate headers (CRC-32C), iterate records, build batches.

Layout (DefaultRecordBatch): baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
crc uint32 (CRC-32C over attributes..end) | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32 | records.
baseOffset, batchLength, partitionLeaderEpoch and magic are NOT covered by the CRC, so a log may rewrite the base
offset without recomputing it. Every malformed input raises `CorruptBatch` naming what was wrong.

`validate_for_append` is the broker's LogValidator: a batch a client produced is stored only when its CRC,
record count, offset deltas, codec, record framing, timestamps and decompressed size all agree; otherwise it
raises the subclass carrying Kafka's per-partition error code.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from zkcoord.errors import ErrorCode, ZkcoordError
from zkcoord.records import lz4, snappy
from zkcoord.records.crc32c import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted in batchLength
CRC_START = 21  # first byte covered by the CRC (attributes)
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")


class CorruptBatch(ZkcoordError, ValueError):
    """A record batch does not parse or fails its CRC; Kafka's CORRUPT_MESSAGE (2)."""

    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, reason: str, position: int = 0) -> None:
        super().__init__(f"corrupt record batch at byte {position}: {reason}")
        self.reason = reason
        self.position = position


class InvalidRecord(CorruptBatch):
    """A batch that parses but breaks a LogValidator rule (count vs offsets, control batch from a client);
    Kafka's INVALID_RECORD (87)."""

    code = ErrorCode.INVALID_RECORD


class InvalidTimestamp(CorruptBatch):
    """A record timestamp outside log.message.timestamp.before/after.max.ms; Kafka's INVALID_TIMESTAMP (32)."""

    code = ErrorCode.INVALID_TIMESTAMP


class BatchTooLarge(CorruptBatch):
    """A batch larger than message.max.bytes; Kafka's MESSAGE_TOO_LARGE (10)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of one batch, plus where it sits in the buffer it was read from."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


@dataclass(frozen=True, slots=True)
class Record:
    """One record, with its absolute offset and timestamp resolved against its batch."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the header at `pos`; checks sizes and magic but not the CRC (see `validate_batch`)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatch(f"truncated header: {len(buf) - pos} bytes, need {HEADER_SIZE}", pos)
    (bo, bl, ple, magic, crc, attrs, lod, bts, mts, pid, pep, bseq, count) = _HEADER.unpack_from(buf, pos)
    header = BatchHeader(bo, bl, ple, magic, crc, attrs, lod, bts, mts, pid, pep, bseq, count, pos)
    if header.magic != MAGIC:
        raise CorruptBatch(f"magic {header.magic}, only RecordBatch v2 (magic 2) is supported", pos)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatch(f"batchLength {header.batch_length} is smaller than the header", pos)
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptBatch(
            f"negative lastOffsetDelta {header.last_offset_delta} or recordsCount {header.records_count}", pos
        )
    return header


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos` and check that the whole batch is present and its CRC-32C matches."""
    header = parse_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptBatch(
            f"truncated batch: batchLength {header.batch_length} runs past the buffer end", pos
        )
    actual = crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise CorruptBatch(
            f"CRC-32C mismatch: header says {header.crc:#010x}, data gives {actual:#010x}", pos
        )
    return header


def split_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Validate every batch of a concatenation (a Produce request's records); all or nothing."""
    headers = []
    pos = 0
    while pos < len(buf):
        header = validate_batch(buf, pos)
        headers.append(header)
        pos += header.size
    if not headers:
        raise CorruptBatch("no record batch", 0)
    return headers


def with_base_offset(batch: bytes | bytearray | memoryview, base_offset: int) -> bytes:
    """The same batch with its baseOffset replaced (the CRC does not cover it, so it stays valid)."""
    return _BASE_OFFSET.pack(base_offset) + bytes(memoryview(batch)[8:])


# -- varints (zig-zag, protobuf style) --------------------------------------------------------------------------


def encode_varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    z &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, next position); raises CorruptBatch for a varint longer than 10 bytes or cut short."""
    shift = 0
    z = 0
    start = pos
    while True:
        if pos >= len(buf):
            raise CorruptBatch("varint runs past the end", start)
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptBatch("varint longer than 10 bytes", start)
    return (z >> 1) ^ -(z & 1), pos


def _take(buf: bytes, pos: int, length: int) -> tuple[bytes | None, int]:
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptBatch(f"field of {length} bytes runs past the end", pos)
    return buf[pos : pos + length], pos + length


NO_COMPRESSION: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
# Codecs whose records the server reads (so validates record by record, and down-converts for old Fetch versions).
READABLE_CODECS: Final = frozenset({NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD})


def _decompress(codec: int, data: bytes, max_bytes: int = -1) -> bytes:
    """The decompressed records; more than `max_bytes` (when >= 0) is a CorruptBatch, found without
    inflating past the bound."""
    if codec == NO_COMPRESSION:
        return data
    limit = max_bytes + 1 if max_bytes >= 0 else -1
    try:
        if codec == GZIP:
            out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, max(limit, 0))
        elif codec == ZSTD:
            out = _zstd_read(data, limit)
        elif codec == SNAPPY:
            out = snappy.decompress(data, limit)
        elif codec == LZ4:
            out = lz4.decompress(
                data, max_bytes
            )  # RecordBatch v2: the standard frame, its header checksum checked
        else:
            raise CorruptBatch(
                f"compression codec {codec} cannot be read here (none, gzip, snappy, lz4, zstd)"
            )
    except (zlib.error, _ZstdError, snappy.SnappyError, lz4.Lz4Error) as exc:
        raise CorruptBatch(f"records do not decompress: {exc}") from exc
    if max_bytes >= 0 and len(out) > max_bytes:
        raise CorruptBatch(f"records inflate past {max_bytes} bytes")
    return out


class _ZstdError(Exception):
    pass


def _zstd_read(data: bytes, limit: int) -> bytes:
    import zstandard  # kafka-python's zstd codec; imported on the first zstd batch only

    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data)
        chunks: list[bytes] = []
        got = 0
        while limit < 0 or got < limit:
            chunk = reader.read(65536 if limit < 0 else min(65536, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    except zstandard.ZstdError as exc:
        raise _ZstdError(str(exc)) from exc


def iter_records(batch: bytes | bytearray | memoryview, max_decompressed: int = -1) -> Iterator[Record]:
    """The records of one (validated) batch, in order. Anything after the last declared record is a
    CorruptBatch (Kafka: "Incorrect declared batch size")."""
    header = parse_header(batch)
    raw = bytes(memoryview(batch)[HEADER_SIZE : header.size])
    body = _decompress(header.compression, raw, max_decompressed)
    if header.records_count > len(body):  # every record takes at least one byte: refuse before looping
        raise CorruptBatch(f"recordsCount {header.records_count} cannot fit in {len(body)} bytes", 0)
    pos = 0
    for _ in range(header.records_count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise CorruptBatch(f"record length {length} runs past the batch end", pos)
        pos += 1  # record attributes, unused
        ts_delta, pos = decode_varint(body, pos)
        off_delta, pos = decode_varint(body, pos)
        klen, pos = decode_varint(body, pos)
        key, pos = _take(body, pos, klen)
        vlen, pos = decode_varint(body, pos)
        value, pos = _take(body, pos, vlen)
        nheaders, pos = decode_varint(body, pos)
        headers = []
        for _h in range(nheaders):
            hklen, pos = decode_varint(body, pos)
            hkey, pos = _take(body, pos, hklen)
            hvlen, pos = decode_varint(body, pos)
            hval, pos = _take(body, pos, hvlen)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hval))
        if pos != end:
            raise CorruptBatch(f"record declares {length} bytes but its fields use {length + pos - end}", pos)
        yield Record(
            header.base_offset + off_delta, header.base_timestamp + ts_delta, key, value, tuple(headers)
        )
    if pos != len(body):
        raise CorruptBatch(
            f"{len(body) - pos} bytes remain after the {header.records_count} declared records"
        )


@dataclass(frozen=True, slots=True)
class AppendRules:
    """What a produced batch must satisfy, with Kafka's names (`message.max.bytes`,
    `log.message.timestamp.before.max.ms` / `after.max.ms`, Kafka 4.0 defaults)."""

    message_max_bytes: int = 1_048_588
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 3_600_000
    max_decompressed_bytes: int = 64 * 1024 * 1024  # zkcoord's bound on one batch's inflated records


NO_TIMESTAMP: Final = -1


def validate_for_append(
    buf: bytes | bytearray | memoryview, now_ms: int, rules: AppendRules = AppendRules()
) -> list[BatchHeader]:
    """Kafka's LogValidator for a client's Produce: every batch's CRC, size, count against its offset range,
    codec, record framing, offset deltas 0..n-1 and timestamps. All or nothing; raises a CorruptBatch subclass
    whose `code` is the partition's error."""
    headers = split_batches(buf)
    view = memoryview(buf)
    for h in headers:
        where = h.position
        if h.size > rules.message_max_bytes:
            raise BatchTooLarge(
                f"batch of {h.size} bytes exceeds message.max.bytes {rules.message_max_bytes}", where
            )
        if h.records_count <= 0:
            raise InvalidRecord(f"invalid reported count for record batch: {h.records_count}", where)
        if h.last_offset_delta + 1 != h.records_count:
            raise InvalidRecord(
                f"inconsistent batch offset range [0, {h.last_offset_delta}] and count of records "
                f"{h.records_count}",
                where,
            )
        if h.is_control:
            raise InvalidRecord("clients are not allowed to write control records", where)
        if h.compression > ZSTD:
            raise CorruptBatch(f"unknown compression codec {h.compression}", where)
        if h.compression not in READABLE_CODECS:
            continue
        create_time = not h.attributes & TIMESTAMP_TYPE_BIT
        for index, record in enumerate(
            iter_records(view[h.position : h.position + h.size], rules.max_decompressed_bytes)
        ):
            if record.offset - h.base_offset != index:
                raise InvalidRecord(f"record {index} has offset delta {record.offset - h.base_offset}", where)
            if create_time and record.timestamp != NO_TIMESTAMP:
                if record.timestamp < now_ms - rules.timestamp_before_max_ms:
                    raise InvalidTimestamp(
                        f"timestamp {record.timestamp} is more than {rules.timestamp_before_max_ms} ms "
                        f"before the broker's {now_ms}",
                        where,
                    )
                if record.timestamp > now_ms + rules.timestamp_after_max_ms:
                    raise InvalidTimestamp(
                        f"timestamp {record.timestamp} is more than {rules.timestamp_after_max_ms} ms "
                        f"after the broker's {now_ms}",
                        where,
                    )
    return headers


def _encode_record(
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> bytes:
    body = bytearray(b"\x00")
    body += encode_varint(ts_delta)
    body += encode_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(field)) + field
    body += encode_varint(len(headers))
    for hkey, hval in headers:
        encoded = hkey.encode()
        body += encode_varint(len(encoded)) + encoded
        body += encode_varint(-1) if hval is None else encode_varint(len(hval)) + hval
    return encode_varint(len(body)) + bytes(body)


Headers = Sequence[tuple[str, bytes | None]]


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Headers]],
    *,
    base_offset: int = 0,
    base_timestamp: int = 0,
    timestamps: Sequence[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    compression: int = 0,
) -> bytes:
    """An uncompressed (or gzip or lz4) RecordBatch v2 of (key, value[, headers]) records with a correct CRC-32C."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if compression not in (NO_COMPRESSION, GZIP, LZ4):
        raise ValueError(
            f"compression {compression} not supported by build_batch (only none=0, gzip=1, lz4=3)"
        )
    stamps = list(timestamps) if timestamps is not None else [base_timestamp] * len(records)
    if len(stamps) != len(records):
        raise ValueError("timestamps must have one entry per record")
    first_ts = stamps[0]
    body = bytearray()
    for i, rec in enumerate(records):
        headers: Headers = rec[2] if len(rec) == 3 else ()
        body += _encode_record(i, stamps[i] - first_ts, rec[0], rec[1], headers)
    payload = bytes(body)
    if compression == GZIP:
        comp = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        payload = comp.compress(payload) + comp.flush()
    elif compression == LZ4:
        payload = lz4.compress(payload)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            compression,
            len(records) - 1,
            first_ts,
            max(stamps),
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + payload
    )
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, MAGIC, crc) + after_crc
