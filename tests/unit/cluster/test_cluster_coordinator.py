"""The group -> offsets partition formula against Kafka's published vectors, including Integer.MIN_VALUE."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.legacy.ids import java_hash
from zkcoord.placement.coordinator import (
    INT_MIN,
    coordinator_for_group,
    has_coordinator,
    kafka_abs,
    masked_abs,
    partition_for_group,
)
from zkcoord.placement.leadership import NO_LEADER, Leadership

VECTORS = [
    ("my-group", -1906497762, 12),
    ("test-group", 627841412, 12),
    ("console-consumer-1", 35782224, 24),
    ("group1", -1237460590, 40),
    ("", 0, 0),
    ("polygenelubricants", INT_MIN, 0),
]


@pytest.mark.parametrize(("group", "hash_code", "partition"), VECTORS)
def test_kafka_vectors(group: str, hash_code: int, partition: int) -> None:
    assert java_hash(group) == hash_code
    assert partition_for_group(group, 50) == partition


def test_min_value_is_zero_not_pythons_abs() -> None:
    assert kafka_abs(INT_MIN) == 0
    assert abs(INT_MIN) % 50 == 48  # the pitfall the formula avoids
    assert partition_for_group("polygenelubricants", 50) == 0
    assert partition_for_group("polygenelubricants", 7) == 0


def test_masked_abs_differs_for_negative_hashes() -> None:
    # the 0.8.1 helper (KAFKA-1469) would have put "my-group" elsewhere
    assert masked_abs(-1906497762) % 50 != partition_for_group("my-group", 50)
    assert masked_abs(INT_MIN) == 0


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        partition_for_group("g", 0)
    with pytest.raises(ValueError, match="32-bit"):
        kafka_abs(2**31)


@given(st.text(), st.integers(1, 200))
def test_partition_in_range_and_matches_math_abs_off_min(group: str, n: int) -> None:
    h = java_hash(group)
    p = partition_for_group(group, n)
    assert 0 <= p < n
    if h != INT_MIN:
        assert p == abs(h) % n


def test_coordinator_lookup() -> None:
    leaders = {12: Leadership(3, 1), 40: Leadership(NO_LEADER, 2)}
    assert coordinator_for_group("my-group", 50, leaders) == (12, Leadership(3, 1))
    part, lead = coordinator_for_group("group1", 50, leaders)
    assert part == 40 and not has_coordinator(lead)
    assert coordinator_for_group("console-consumer-1", 50, leaders) == (24, None)
    assert has_coordinator(Leadership(3, 1))


def test_group_of_record_key() -> None:
    from zkcoord.placement.coordinator import group_of_record_key
    from zkcoord.records.offsets import GroupMetadataKey, OffsetCommitKey, encode_key

    assert group_of_record_key(encode_key(GroupMetadataKey("my-group"))) == "my-group"
    assert group_of_record_key(encode_key(OffsetCommitKey("grüppe", "t", 3))) == "grüppe"
    for bad, why in [
        (b"\x00", "too short"),
        (b"\x00\x05\x00\x01g", "version 5"),
        (b"\x00\x01\x00\x09ab", "length 9"),
    ]:
        with pytest.raises(ValueError, match=why):
            group_of_record_key(bad)
