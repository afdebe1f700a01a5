"""LZ4 frames as Kafka clients write them: valid frames of every shape read back, Kafka 0.8.2's header checksum
accepted for magic 0 only, every malformed frame an `Lz4Error` (and so CORRUPT_MESSAGE), the size bound held
without inflating past it, and lz4 batches and message sets (kafka-python's own) validated and converted."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import lz4.frame
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.codec import lz4_encode_old_kafka
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from zkcoord.errors import ErrorCode
from zkcoord.records import lz4 as zlz4
from zkcoord.records.batch import (
    CRC_START,
    LZ4,
    AppendRules,
    CorruptBatch,
    build_batch,
    iter_records,
    validate_for_append,
)
from zkcoord.records.crc32c import crc32c
from zkcoord.records.message_set import (
    decode_message_set,
    down_convert,
    encode_message,
    to_record_batch,
)

NOW = 1_700_000_000_000
DATA = bytes(range(256)) * 400  # 100 KiB: more than one 64 KiB block, so multi-block frames are read too


@settings(max_examples=200)
@given(st.binary(max_size=80), st.integers(min_value=0, max_value=2**32 - 1))
def test_xxh32_is_the_reference_hash(data: bytes, seed: int) -> None:
    assert zlz4.xxh32(data, seed) == xxhash.xxh32_intdigest(data, seed)


@pytest.mark.parametrize(
    "options",
    [
        {},  # the bindings' defaults: content size stored, content checksum
        {"block_linked": False, "store_size": False, "content_checksum": False},  # librdkafka's shape
        {"block_linked": False, "block_checksum": True, "block_size": lz4.frame.BLOCKSIZE_MAX64KB},
        {"block_linked": False, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ],
)
def test_valid_frames_read_back(options: dict[str, object]) -> None:
    if options.get("block_linked", True):
        options = {**options, "block_linked": False}  # Kafka's reader refuses linked blocks (tested below)
    frame = lz4.frame.compress(DATA, **options)
    assert zlz4.decompress(frame) == DATA
    assert zlz4.decompress(frame, len(DATA)) == DATA
    assert zlz4.decompress(frame, old_header_checksum=True) == DATA  # a correct HC is fine for magic 0 too
    assert zlz4.decompress(zlz4.compress(b"")) == b""


def test_kafka_0_8_header_checksum_is_accepted_for_magic_0_only() -> None:
    old = lz4_encode_old_kafka(DATA)  # kafka-python's encoder for 0.8/0.9 brokers, independent of ours
    assert zlz4.decompress(old, old_header_checksum=True) == DATA
    with pytest.raises(zlz4.Lz4Error, match="header checksum"):
        zlz4.decompress(old)
    assert zlz4.compress(DATA, old_header_checksum=True) == old  # we write what Kafka 0.8.2 wrote
    # Kafka ignores HC for magic 0 altogether: any byte there is read.
    for hc in (0x00, 0xFF):
        assert zlz4.decompress(old[:6] + bytes([hc]) + old[7:], old_header_checksum=True) == DATA


def _frame() -> bytes:
    return lz4.frame.compress(DATA, block_linked=False, block_checksum=True, content_checksum=True)


def _with(frame: bytes, at: int, value: int) -> bytes:
    return frame[:at] + bytes([value]) + frame[at + 1 :]


def _fix_hc(frame: bytes) -> bytes:
    """The frame with its header checksum recomputed, so only the descriptor rule under test can object."""
    end = 6 + (8 if frame[4] & 0x08 else 0)
    return _with(frame, end, (xxhash.xxh32_intdigest(frame[4:end]) >> 8) & 0xFF)


MALFORMED = [
    ("not a frame", b"\x00" * 20, "not an lz4 frame"),
    ("empty", b"", "truncated"),
    ("header cut", _frame()[:6], "truncated"),
    ("header checksum", _with(_frame(), 14, _frame()[14] ^ 1), "header checksum"),
    ("version 2", _fix_hc(_with(_frame(), 4, _frame()[4] ^ 0xC0)), "version"),
    ("dictionary id", _fix_hc(_with(_frame(), 4, _frame()[4] | 0x01)), "reserved"),
    ("dependent blocks", lz4.frame.compress(DATA, block_linked=True), "dependent"),
    ("block size 0", _fix_hc(_with(_frame(), 5, 0x00)), "block descriptor"),
    ("BD reserved bit", _fix_hc(_with(_frame(), 5, _frame()[5] | 0x01)), "block descriptor"),
    ("truncated in a block", _frame()[: len(_frame()) // 2], "truncated"),
    ("no end mark", _frame()[:-8], "truncated"),
    ("block checksum", _with(_frame(), 40, _frame()[40] ^ 1), "blockChecksum"),
    ("content checksum", _with(_frame(), len(_frame()) - 1, _frame()[-1] ^ 1), "contentChecksum"),
    ("block size past the maximum", _frame()[:15] + struct.pack("<I", 0x7FFFFFFF) + b"\x00" * 64, "decode"),
    ("bytes after the frame", _frame() + b"\x00", "after the lz4 frame"),
    ("two frames", zlz4.compress(b"a") + zlz4.compress(b"b"), "after the lz4 frame"),
]


@pytest.mark.parametrize(("name", "data", "match"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_frames_are_lz4_errors(name: str, data: bytes, match: str) -> None:
    for old in (False, True):
        if old and match == "header checksum":
            continue  # magic 0 does not check it
        with pytest.raises(zlz4.Lz4Error, match=match):
            zlz4.decompress(data, 1 << 20, old_header_checksum=old)


def test_the_size_bound_is_held_without_inflating_past_it() -> None:
    bomb = zlz4.compress(b"\x00" * (256 << 20))  # 256 MiB in about 1 MiB
    assert len(bomb) < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(zlz4.Lz4Error, match="inflates past"):
            zlz4.decompress(bomb, 1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # the bound and a chunk, not the 256 MiB the frame declares
    exact = zlz4.compress(DATA)
    assert zlz4.decompress(exact, len(DATA)) == DATA
    with pytest.raises(zlz4.Lz4Error, match="inflates past"):
        zlz4.decompress(exact, len(DATA) - 1)


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=300), st.booleans(), st.booleans(), st.data())
def test_fuzz_damaged_frames_raise_only_lz4_error(
    payload: bytes, old: bool, checksums: bool, data: st.DataObject
) -> None:
    """Any single damaged byte or cut of a valid frame (or arbitrary bytes after a valid magic) is an Lz4Error
    or reads back within the bound; never another exception."""
    frame = bytearray(
        zlz4.compress(payload, old_header_checksum=old)
        if not checksums
        else lz4.frame.compress(payload, block_linked=False, block_checksum=True, store_size=False)
    )
    i = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
    action = data.draw(st.sampled_from(["flip", "cut", "garbage"]))
    if action == "flip":
        frame[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    elif action == "cut":
        del frame[i:]
    else:
        frame[4:] = data.draw(st.binary(max_size=200))
    with contextlib.suppress(zlz4.Lz4Error):
        assert len(zlz4.decompress(bytes(frame), 4096, old_header_checksum=old)) <= 4096


# -- lz4 in RecordBatch v2 and in message sets --------------------------------------------------------------------


def _kafka_python_batch(records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, LZ4, 0, -1, -1, -1, 1 << 20)
    for i, (k, v) in enumerate(records):
        builder.append(i, NOW + i, k, v, [])
    return bytes(builder.build())


def test_lz4_batches_are_validated_record_by_record_and_down_converted() -> None:
    kv = [(b"k%d" % i, b"v" * i) for i in range(20)] + [(None, None)]
    for batch in (build_batch(kv, base_timestamp=NOW, compression=LZ4), _kafka_python_batch(kv)):
        assert validate_for_append(batch, NOW)[0].records_count == len(kv)
        assert [(r.key, r.value) for r in iter_records(batch)] == kv
        for magic in (0, 1):
            down = decode_message_set(down_convert(batch, magic, 3, 1 << 20))
            assert [(m.offset, m.key, m.value, m.magic) for m in down] == [
                (i, k, v, magic) for i, (k, v) in enumerate(kv) if i >= 3
            ]


def _lz4_batch_of(payload: bytes) -> bytes:
    """A one-record lz4 batch whose compressed records are replaced by `payload`, CRC recomputed."""
    buf = bytearray(build_batch([(b"k", b"v")], base_timestamp=NOW, compression=LZ4)[:61]) + payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[CRC_START:])))
    return bytes(buf)


def test_malformed_lz4_batches_are_corrupt_message_and_bounded() -> None:
    good = build_batch([(b"k", b"v")], base_timestamp=NOW, compression=LZ4)[61:]
    for name, payload in (
        ("plain records under the lz4 flag", build_batch([(b"k", b"v")])[61:]),
        ("truncated frame", good[:-5]),
        ("old header checksum in a v2 batch", lz4_encode_old_kafka(build_batch([(b"k", b"v")])[61:])),
        ("content checksum", good[:-1] + bytes([good[-1] ^ 1])),
    ):
        with pytest.raises(CorruptBatch) as info:
            validate_for_append(_lz4_batch_of(payload), NOW)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE, name
    bomb = build_batch([(None, b"\x00" * 200_000)], base_timestamp=NOW, compression=LZ4)
    with pytest.raises(CorruptBatch, match="inflates past") as info:
        validate_for_append(bomb, NOW, AppendRules(max_decompressed_bytes=100_000))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_pythons_lz4_message_sets_convert_up_and_keep_lz4(magic: int) -> None:
    """kafka-python's LegacyRecordBatchBuilder writes magic 0 lz4 with Kafka 0.8.2's header checksum and magic 1
    lz4 as the standard frame; both are read, stored as one lz4 RecordBatch v2, and read back."""
    kv = [(b"k%d" % i, b"value-%d" % i) for i in range(5)]
    builder = LegacyRecordBatchBuilder(magic, LZ4, 1 << 20)
    for i, (k, v) in enumerate(kv):
        builder.append(i, NOW + i if magic else None, k, v)
    batch = to_record_batch(bytes(builder.build()), NOW)
    assert batch[21:23] == struct.pack(">h", LZ4)  # the producer's codec kept, as compression.type=producer
    assert [(r.key, r.value) for r in iter_records(batch)] == kv


def test_lz4_header_checksums_follow_the_wrappers_magic() -> None:
    inner0 = b"".join(encode_message(o, None, b"x", magic=0) for o in (7, 8))
    inner1 = b"".join(encode_message(o, None, b"x", magic=1, timestamp=NOW) for o in (0, 1))
    old_frame, new_frame = zlz4.compress(inner0, old_header_checksum=True), zlz4.compress(inner1)
    assert [
        m.offset for m in decode_message_set(encode_message(8, None, old_frame, magic=0, attributes=LZ4))
    ] == [
        7,
        8,
    ]
    assert (
        len(decode_message_set(encode_message(8, None, zlz4.compress(inner0), magic=0, attributes=LZ4))) == 2
    )
    assert len(decode_message_set(encode_message(1, None, new_frame, attributes=LZ4, timestamp=NOW))) == 2
    # magic 1 is Kafka 0.10+: a wrong header checksum there is corruption, not the 0.8.2 bug.
    broken = zlz4.compress(inner1, old_header_checksum=True)
    with pytest.raises(CorruptBatch, match="header checksum") as info:
        to_record_batch(encode_message(1, None, broken, attributes=LZ4, timestamp=NOW), NOW)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    # and a wrapper inflating past the bound is refused
    bomb = encode_message(
        0, None, zlz4.compress(encode_message(0, None, b"\x00" * (8 << 20))), attributes=LZ4
    )
    with pytest.raises(CorruptBatch, match="inflates past"):
        to_record_batch(bomb, NOW, max_inflated=1 << 20)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=40)), min_size=1, max_size=8), st.data())
def test_fuzz_damaged_lz4_batches_are_corrupt_batch_only(
    kv: list[tuple[bytes, bytes]], data: st.DataObject
) -> None:
    """A damaged lz4 payload under a valid CRC (what a buggy client sends): validation and down-conversion give a
    CorruptBatch or whole records, never another exception."""
    payload = bytearray(build_batch(kv, base_timestamp=NOW, compression=LZ4)[61:])
    i = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    if data.draw(st.booleans()):
        payload[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    else:
        del payload[i:]
    batch = _lz4_batch_of(bytes(payload))
    with contextlib.suppress(CorruptBatch):
        validate_for_append(batch, NOW, AppendRules(max_decompressed_bytes=1 << 16))
    with contextlib.suppress(CorruptBatch):
        decode_message_set(down_convert(batch, 0, 0, 1 << 20, 1 << 16))
