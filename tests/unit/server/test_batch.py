"""RecordBatch v2: build/parse round trips, CRC-32C checks, precise errors for corrupt input."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.records.batch import (
    CorruptBatch,
    build_batch,
    decode_varint,
    encode_varint,
    iter_records,
    parse_header,
    split_batches,
    validate_batch,
    with_base_offset,
)
from zkcoord.records.crc32c import crc32c, crc32c_pure

opt_bytes = st.one_of(st.none(), st.binary(max_size=64))
records_st = st.lists(st.tuples(opt_bytes, opt_bytes), min_size=1, max_size=20)


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c_pure(b"123456789") == 0xE3069283


@given(st.binary(max_size=300))
def test_crc32c_fast_and_pure_agree(data: bytes) -> None:
    assert crc32c(data) == crc32c_pure(data)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(n: int) -> None:
    enc = encode_varint(n)
    assert decode_varint(enc, 0) == (n, len(enc))


@given(records_st, st.integers(min_value=0, max_value=2**40), st.sampled_from([0, 1, 3]))  # none, gzip, lz4
def test_build_parse_iterate_round_trip(
    records: list[tuple[bytes | None, bytes | None]], base: int, comp: int
) -> None:
    batch = build_batch(records, base_offset=base, base_timestamp=1000, compression=comp)
    header = validate_batch(batch)
    assert header.base_offset == base
    assert header.records_count == len(records)
    assert header.last_offset == base + len(records) - 1
    assert header.size == len(batch)
    got = list(iter_records(batch))
    assert [(r.key, r.value) for r in got] == records
    assert [r.offset for r in got] == list(range(base, base + len(records)))


def test_headers_and_timestamps_survive() -> None:
    batch = build_batch([(b"k", b"v", [("h1", b"x"), ("h2", None)]), (None, b"w")], timestamps=[5, 9])
    first, second = iter_records(batch)
    assert first.headers == (("h1", b"x"), ("h2", None))
    assert (first.timestamp, second.timestamp) == (5, 9)
    assert parse_header(batch).max_timestamp == 9


def test_rewriting_the_base_offset_keeps_the_crc_valid() -> None:
    batch = build_batch([(b"a", b"b")] * 3)
    moved = with_base_offset(batch, 12345)
    assert validate_batch(moved).base_offset == 12345
    assert moved[8:] == batch[8:]


@given(st.integers(min_value=21, max_value=200), st.integers(min_value=1, max_value=255))
def test_any_flipped_byte_under_the_crc_is_caught(where: int, flip: int) -> None:
    batch = bytearray(build_batch([(b"key", b"value" * 30)]))
    where = where % len(batch)
    if where < 21:
        where = 21
    batch[where] ^= flip
    with pytest.raises(CorruptBatch):
        validate_batch(bytes(batch))


def test_precise_errors() -> None:
    batch = build_batch([(b"k", b"v")])
    with pytest.raises(CorruptBatch, match="truncated header"):
        parse_header(batch[:30])
    with pytest.raises(CorruptBatch, match="truncated batch"):
        validate_batch(batch[:-1])
    with pytest.raises(CorruptBatch, match="magic 1"):
        parse_header(batch[:16] + b"\x01" + batch[17:])
    with pytest.raises(CorruptBatch, match="CRC-32C mismatch"):
        validate_batch(batch[:17] + struct.pack(">I", 0) + batch[21:])
    with pytest.raises(CorruptBatch, match="no record batch"):
        split_batches(b"")


def test_split_batches_all_or_nothing() -> None:
    a = build_batch([(b"1", b"1")])
    b = build_batch([(b"2", b"2"), (b"3", b"3")])
    assert [h.records_count for h in split_batches(a + b)] == [1, 2]
    with pytest.raises(CorruptBatch):
        split_batches(a + b[:-3])


@given(st.binary(max_size=200))
def test_random_bytes_never_escape_as_other_exceptions(data: bytes) -> None:
    with contextlib.suppress(CorruptBatch):
        split_batches(data)
