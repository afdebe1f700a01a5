"""BulkDecoder equals `decode_record` on every input: the records zkcoord writes (fast paths), every other shape,
and any bytes (the same record, or the same error)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.errors import ZkcoordError
from zkcoord.records.offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
    encode_record,
)
from zkcoord.records.offsets_bulk import BulkDecoder


def outcome(decode: object, key: bytes, value: bytes | None) -> object:
    try:
        return decode(key, value)  # type: ignore[operator]
    except ZkcoordError as exc:
        return type(exc), str(exc)


offset_values = st.builds(
    OffsetCommitValue,
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**31 - 1),
    st.sampled_from(["", "m", "é"]),
    st.integers(-1, 2**62),
    st.sampled_from([-1, -1, 5]),
)
records = st.one_of(
    st.tuples(
        st.builds(
            OffsetCommitKey,
            st.sampled_from(["g", "group-1", ""]),
            st.sampled_from(["t", "tópico"]),
            st.integers(-(2**31), 2**31 - 1),
        ),
        st.none() | offset_values,
    ),
    st.tuples(
        st.builds(GroupMetadataKey, st.sampled_from(["g", "h"])),
        st.none() | st.just(GroupMetadataValue("consumer", 3, "range", None, -1, ())),
    ),
)


@given(st.lists(records, max_size=30))
def test_written_records_decode_as_decode_record_does(written: list) -> None:  # type: ignore[type-arg]
    raw = [encode_record(r) for r in written]
    decoded = list(BulkDecoder().records(raw))
    expected = [decode_record(k, v) for k, v in raw]
    assert decoded == expected  # (not always `written`: value v1, with an expiry, carries no leader epoch)
    assert [type(k) for k, _ in decoded] == [type(k) for k, _ in expected]
    assert [type(v) for _, v in decoded] == [type(v) for _, v in expected]


@given(
    st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=40)), max_size=20), st.data()
)
def test_any_bytes_give_the_same_record_or_the_same_error(
    raw: list[tuple[bytes, bytes | None]], data: st.DataObject
) -> None:
    # Known prefixes first, so mutated keys and values after them meet the fast paths.
    seed = [encode_record((OffsetCommitKey("g", "t", 1), OffsetCommitValue(5, -1, "", 7)))]
    mutated = []
    for key, value in seed * 3:
        k = bytearray(key + data.draw(st.binary(max_size=3)))
        if k and data.draw(st.booleans()):
            k[data.draw(st.integers(0, len(k) - 1))] ^= data.draw(st.integers(1, 255))
        v = bytearray(value or b"")
        if v and data.draw(st.booleans()):
            v[data.draw(st.integers(0, len(v) - 1))] ^= data.draw(st.integers(1, 255))
        mutated.append((bytes(k), bytes(v)))
    bulk = BulkDecoder()
    for key, value in [*seed, *mutated, *raw]:
        expected = outcome(decode_record, key, value)
        assert outcome(bulk.record, key, value) == expected
        assert outcome(lambda k, v: next(bulk.records([(k, v)])), key, value) == expected


@given(
    st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=40)), max_size=20),
    st.lists(records, max_size=10),
    st.data(),
)
def test_check_refuses_exactly_what_decode_record_refuses(
    raw: list[tuple[bytes, bytes | None]],
    written: list,
    data: st.DataObject,  # type: ignore[type-arg]
) -> None:
    # A cluster store checks every loaded record with `check` (no record built on its fast path): it must raise
    # the very error `decode_record` raises, and nothing when `decode_record` decodes.
    seed = [encode_record((OffsetCommitKey("g", "t", 1), OffsetCommitValue(5, -1, "", 7)))]
    mutated = []
    for key, value in [*seed, *(encode_record(r) for r in written)] * 2:
        k = bytearray(key)
        if k and data.draw(st.booleans()):
            k[data.draw(st.integers(0, len(k) - 1))] ^= data.draw(st.integers(1, 255))
        v = None if value is None else bytearray(value)
        if v and data.draw(st.booleans()):
            v[data.draw(st.integers(0, len(v) - 1))] ^= data.draw(st.integers(1, 255))
        mutated.append((bytes(k), None if v is None else bytes(v)))
    bulk = BulkDecoder()
    for key, value in [*seed, *mutated, *raw]:
        expected = outcome(decode_record, key, value)
        refused = isinstance(expected, tuple) and isinstance(expected[0], type)  # (error type, message)
        assert outcome(bulk.check, key, value) == (expected if refused else None)
