"""Produced batches go through Kafka's LogValidator rules: a bad batch gets its partition's error, nothing stored."""

from __future__ import annotations

import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from zkcoord.records.batch import (
    CRC_START,
    AppendRules,
    BatchTooLarge,
    CorruptBatch,
    InvalidRecord,
    InvalidTimestamp,
    build_batch,
    validate_for_append,
)
from zkcoord.records.crc32c import crc32c
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.broker import Broker, ServerConfig
from zkcoord.server.log import LogManager

NOW = 1_700_000_000_000
# Header offsets (DefaultRecordBatch): attributes 21, lastOffsetDelta 23, baseTimestamp 27, maxTimestamp 35,
# recordsCount 57.


def _patch(batch: bytes, offset: int, fmt: str, value: int) -> bytes:
    """The batch with one header field replaced and the CRC recomputed (so only the new rule can object)."""
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[CRC_START:])))
    return bytes(buf)


def _two() -> bytes:
    return build_batch([(b"k", b"v1"), (b"k", b"v2")], base_timestamp=NOW)


def _garbage_records() -> bytes:
    good = bytearray(_two())
    good[61:] = b"\x7f" * (len(good) - 61)
    struct.pack_into(">I", good, 17, crc32c(bytes(good[CRC_START:])))
    return bytes(good)


def _gzip_bomb() -> bytes:
    batch = build_batch([(None, b"\x00" * 200_000)], base_timestamp=NOW, compression=1)
    return batch


HOSTILE: list[tuple[str, bytes, type[CorruptBatch], int]] = [
    ("count 1000 with 2 records", _patch(_two(), 57, ">i", 1000), InvalidRecord, 87),
    ("lastOffsetDelta 2^31-1", _patch(_two(), 23, ">i", 2**31 - 1), InvalidRecord, 87),
    ("count and delta both 1000", _patch(_patch(_two(), 57, ">i", 1000), 23, ">i", 999), CorruptBatch, 2),
    ("codec 7", _patch(_two(), 21, ">h", 7), CorruptBatch, 2),
    ("garbage records", _garbage_records(), CorruptBatch, 2),
    ("control batch", _patch(_two(), 21, ">h", 0x20), InvalidRecord, 87),
    (
        "timestamp two hours ahead",
        build_batch([(b"k", b"v")], base_timestamp=NOW + 7_200_000),
        InvalidTimestamp,
        32,
    ),
]


@pytest.mark.parametrize(("name", "batch", "exc", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_log_validator_rules(name: str, batch: bytes, exc: type[CorruptBatch], code: int) -> None:
    with pytest.raises(exc) as info:
        validate_for_append(batch, NOW)
    assert info.value.code == code


def test_valid_batches_pass_and_bounds_hold() -> None:
    assert [h.records_count for h in validate_for_append(_two() + _two(), NOW)] == [2, 2]
    assert validate_for_append(build_batch([(b"k", b"v")] * 3, compression=1, base_timestamp=NOW), NOW)
    with pytest.raises(CorruptBatch, match="inflate past"):
        validate_for_append(_gzip_bomb(), NOW, AppendRules(max_decompressed_bytes=100_000))
    with pytest.raises(BatchTooLarge):
        validate_for_append(_two(), NOW, AppendRules(message_max_bytes=50))
    # A truncated gzip stream is corrupt, not an exception from zlib.
    raw = bytearray(build_batch([(b"k", b"v" * 50)], compression=1, base_timestamp=NOW))
    cut = bytes(raw[:-10])
    cut = cut[:8] + struct.pack(">i", len(cut) - 12) + cut[12:]
    buf = bytearray(cut)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[CRC_START:])))
    with pytest.raises(CorruptBatch):
        validate_for_append(bytes(buf), NOW)
    assert zlib  # gzip is the codec the standard library reads


def _produce(broker: Broker, batch: bytes) -> Any:
    P = kp._CLASSES[kp.PRODUCE][0]
    data = P.TopicProduceData.PartitionProduceData(index=0, records=batch)
    frame = kp.encode_request(
        kp.PRODUCE,
        8,
        1,
        "c",
        transactional_id=None,
        acks=1,
        timeout_ms=1000,
        topic_data=[P.TopicProduceData(name="t", partition_data=[data])],
    )
    reply = broker.dispatch(kp.decode_request(frame[4:]))
    assert isinstance(reply, bytes)
    return kp.decode_response(kp.PRODUCE, 8, reply[4:])[1].responses[0].partition_responses[0]


def test_broker_stores_nothing_from_a_rejected_batch(tmp_path: Path) -> None:
    logs = LogManager(tmp_path)
    try:
        broker = Broker(ServerConfig(port=0, data_dir=tmp_path), logs)
        logs.create_topic("t", 1)
        now = int(time.time() * 1000)
        ok = _produce(broker, build_batch([(b"k", b"v")] * 6, base_timestamp=now))
        assert (ok.error_code, ok.base_offset) == (0, 0)
        plog = logs.get("t", 0)
        assert plog is not None and plog.next_offset == 6
        for _name, batch, _exc, code in HOSTILE[:-1]:
            got = _produce(broker, batch)
            assert got.error_code == code and got.base_offset == -1
            assert got.error_message
        assert plog.next_offset == 6  # before: lastOffsetDelta 2^31-1 moved it to 2,147,483,654
        assert len(plog.read(0, 1 << 20)) == len(build_batch([(b"k", b"v")] * 6, base_timestamp=now))
    finally:
        logs.close()
