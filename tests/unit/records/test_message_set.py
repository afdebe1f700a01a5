"""Message sets of magic 0 and 1: round trips (hypothesis), kafka-python's own encoder read back, conversion up to
RecordBatch v2 and down again, and hostile input (bad CRC, truncation, nesting, bombs) refused with Kafka's code."""

from __future__ import annotations

import contextlib
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from zkcoord.errors import ErrorCode
from zkcoord.records import lz4, snappy
from zkcoord.records.batch import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    NO_TIMESTAMP,
    SNAPPY,
    AppendRules,
    CorruptBatch,
    build_batch,
    iter_records,
    validate_for_append,
)
from zkcoord.records.message_set import (
    LegacyMessage,
    decode_message_set,
    down_convert,
    encode_message,
    encode_message_set,
    magic_of,
    to_record_batch,
)

NOW = 1_700_000_000_000
opt_bytes = st.one_of(st.none(), st.binary(max_size=64))
pairs = st.lists(st.tuples(opt_bytes, opt_bytes), min_size=1, max_size=12)
magics = st.sampled_from([0, 1])
codecs = st.sampled_from([NO_COMPRESSION, GZIP, SNAPPY, LZ4])


def _messages(kv: list[tuple[bytes | None, bytes | None]], magic: int, base: int = 0) -> list[LegacyMessage]:
    ts = NO_TIMESTAMP if magic == 0 else NOW
    return [LegacyMessage(base + i, k, v, ts + i if magic else ts, magic) for i, (k, v) in enumerate(kv)]


@given(pairs, magics, codecs, st.integers(min_value=0, max_value=2**40))
def test_encode_decode_round_trip(
    kv: list[tuple[bytes | None, bytes | None]], magic: int, codec: int, base: int
) -> None:
    data = encode_message_set(_messages(kv, magic, base), magic=magic, codec=codec)
    assert magic_of(data) == magic
    got = decode_message_set(data)
    assert [(m.offset, m.key, m.value, m.magic) for m in got] == [
        (base + i, k, v, magic) for i, (k, v) in enumerate(kv)
    ]
    if magic == 1:
        assert [m.timestamp for m in got] == [NOW + i for i in range(len(kv))]


@given(pairs, magics, st.sampled_from([0, 1, 2, 3]))
def test_kafka_pythons_own_message_sets_decode(
    kv: list[tuple[bytes | None, bytes | None]], magic: int, codec: int
) -> None:
    """An independent encoder: kafka-python's LegacyRecordBatchBuilder (what its producer sends to 0.10 brokers)."""
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (k, v) in enumerate(kv):
        builder.append(i, NOW + i if magic else None, k, v)
    got = decode_message_set(bytes(builder.build()))
    assert [(m.key, m.value) for m in got] == kv
    # a producer's wrapper offset is a placeholder the broker replaces; inner offsets stay consecutive
    assert [m.offset - got[0].offset for m in got] == list(range(len(kv)))


def test_magic_1_wrapper_offsets_are_relative() -> None:
    inner = encode_message(0, b"a", b"1") + encode_message(1, b"b", b"2") + encode_message(2, b"c", b"3")
    wrapper = encode_message(41, None, _gzip(inner), attributes=GZIP)
    assert [m.offset for m in decode_message_set(wrapper)] == [39, 40, 41]
    # magic 0 wrappers carry absolute inner offsets
    inner0 = b"".join(encode_message(o, None, b"x", magic=0) for o in (7, 8))
    assert [
        m.offset for m in decode_message_set(encode_message(8, None, _gzip(inner0), magic=0, attributes=GZIP))
    ] == [7, 8]


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@given(pairs, magics, codecs)
def test_up_then_down_conversion_keeps_every_record(
    kv: list[tuple[bytes | None, bytes | None]], magic: int, codec: int
) -> None:
    batch = to_record_batch(encode_message_set(_messages(kv, magic), magic=magic, codec=codec), NOW)
    headers = validate_for_append(batch, NOW)  # what the broker stores is a valid RecordBatch v2
    assert headers[0].records_count == len(kv)
    assert [(r.key, r.value) for r in iter_records(batch)] == kv
    for to_magic in (0, 1):
        down = decode_message_set(down_convert(batch, to_magic, 0, 1 << 20))
        assert [(m.offset, m.key, m.value, m.magic) for m in down] == [
            (i, k, v, to_magic) for i, (k, v) in enumerate(kv)
        ]


def test_down_conversion_starts_at_the_fetch_offset_and_keeps_at_least_one_message() -> None:
    stored = build_batch([(b"k%d" % i, b"v" * 100) for i in range(5)], base_offset=10, base_timestamp=NOW)
    stored += build_batch([(None, b"w")], base_offset=15, base_timestamp=NOW, compression=GZIP)
    got = decode_message_set(down_convert(stored, 1, 12, 1 << 20))
    assert [m.offset for m in got] == [12, 13, 14, 15]
    assert got[0].timestamp == NOW
    assert [m.offset for m in decode_message_set(down_convert(stored, 0, 10, 1))] == [10]
    assert [m.timestamp for m in decode_message_set(down_convert(stored, 0, 10, 1 << 20))] == [
        NO_TIMESTAMP
    ] * 6


def test_snappy_xerial_and_raw_both_read_and_bounded() -> None:
    data = bytes(range(256)) * 300
    assert snappy.decompress(snappy.compress(data)) == data
    assert snappy.decompress(snappy.compress(data, xerial=False)) == data
    with pytest.raises(snappy.SnappyError):
        snappy.decompress(snappy.compress(data), 1000)
    with pytest.raises(snappy.SnappyError):
        snappy.decompress(snappy.compress(data)[:-5])


# -- hostile input ----------------------------------------------------------------------------------------------


def _code(data: bytes, **kw: int) -> int:
    with pytest.raises(CorruptBatch) as info:
        to_record_batch(data, NOW, **kw)  # type: ignore[arg-type]
    return int(info.value.code)


def test_wrong_crc_is_corrupt_message() -> None:
    good = encode_message_set(_messages([(b"k", b"v")], 1), magic=1)
    bad = bytearray(good)
    bad[-1] ^= 1
    assert _code(bytes(bad)) == ErrorCode.CORRUPT_MESSAGE
    # a wrong CRC inside a wrapper is found too
    inner = bytearray(encode_message(0, b"k", b"v"))
    inner[-1] ^= 1
    assert _code(encode_message(0, None, _gzip(bytes(inner)), attributes=GZIP)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_and_nested_wrappers_are_corrupt_message() -> None:
    inner = encode_message_set(_messages([(b"a", b"1"), (b"b", b"2")], 1), magic=1)
    cut = encode_message(1, None, _gzip(inner[:-3]), attributes=GZIP)
    assert _code(cut) == ErrorCode.CORRUPT_MESSAGE
    cut_stream = encode_message(1, None, _gzip(inner)[:-6], attributes=GZIP)
    assert _code(cut_stream) == ErrorCode.CORRUPT_MESSAGE
    nested = encode_message(
        0, None, _gzip(encode_message_set(_messages([(b"a", b"1")], 1), magic=1, codec=GZIP)), attributes=GZIP
    )
    assert _code(nested) == ErrorCode.CORRUPT_MESSAGE
    mixed = encode_message(
        0, None, _gzip(encode_message(0, b"a", b"1", magic=0)), attributes=GZIP
    )  # magic 0 in 1
    assert _code(mixed) == ErrorCode.CORRUPT_MESSAGE
    whole = encode_message_set(_messages([(b"a", b"1")], 0), magic=0)
    assert _code(whole[:-1]) == ErrorCode.CORRUPT_MESSAGE  # a produced set must hold whole messages


def test_compressed_bomb_is_refused_without_inflating_it() -> None:
    bomb_inner = encode_message(0, None, b"\x00" * (8 << 20))
    for codec, payload in (
        (GZIP, _gzip(bomb_inner)),
        (SNAPPY, snappy.compress(bomb_inner)),
        (LZ4, lz4.compress(bomb_inner)),
    ):
        frame = encode_message(0, None, payload, attributes=codec)
        assert len(frame) < 500_000
        assert _code(frame, max_inflated=1 << 20) == ErrorCode.CORRUPT_MESSAGE
    rules = AppendRules(max_decompressed_bytes=1 << 20)
    with pytest.raises(CorruptBatch, match="inflate"):
        to_record_batch(encode_message(0, None, _gzip(bomb_inner), attributes=GZIP), NOW, rules)


def test_message_max_bytes_and_timestamps() -> None:
    big = encode_message_set(_messages([(None, b"x" * 2000)], 1), magic=1)
    with pytest.raises(CorruptBatch) as info:
        to_record_batch(big, NOW, AppendRules(message_max_bytes=1000))
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    future = encode_message(0, None, b"v", timestamp=NOW + 7_200_000)
    with pytest.raises(CorruptBatch) as info:
        to_record_batch(future, NOW)
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_fuzz_decoder_raises_only_corrupt_batch(data: bytes) -> None:
    for partial in (False, True):
        with contextlib.suppress(CorruptBatch):
            decode_message_set(data, max_inflated=1 << 16, partial_tail=partial)


@settings(max_examples=300)
@given(pairs, magics, codecs, st.data())
def test_fuzz_damaged_message_sets(
    kv: list[tuple[bytes | None, bytes | None]], magic: int, codec: int, data: st.DataObject
) -> None:
    """Any single damaged byte or cut of a valid set (compressed or not) is a CorruptBatch or decodes to whole
    messages; never another exception, never more than the bound."""
    good = bytearray(encode_message_set(_messages(kv, magic), magic=magic, codec=codec))
    i = data.draw(st.integers(min_value=0, max_value=len(good) - 1))
    if data.draw(st.booleans()):
        good[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    else:
        del good[i:]
    with contextlib.suppress(CorruptBatch):
        decode_message_set(bytes(good), max_inflated=1 << 16)
