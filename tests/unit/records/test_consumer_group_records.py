"""Consumer-group records (key versions 3-8 and 16): byte layouts from Kafka's schemas, round trips of any value through
`encode_record`/`decode_record`, and any bytes -> a record or a precise MalformedRecord."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.records import consumer_groups as cg
from zkcoord.records.errors import MalformedRecord
from zkcoord.records.offsets import decode_record, encode_record

TID = "00112233445566778899aabbccddeeff"
name = st.text(max_size=8)
i32 = st.integers(-(2**31), 2**31 - 1)
parts = st.lists(
    st.tuples(st.binary(min_size=16, max_size=16).map(bytes.hex), st.lists(i32, max_size=4).map(tuple)),
    max_size=3,
).map(tuple)

values = {
    cg.GROUP_METADATA: st.builds(cg.GroupEpochValue, i32),
    cg.PARTITION_METADATA: st.builds(
        cg.PartitionMetadataValue,
        st.lists(st.builds(cg.TopicMetadata, st.binary(min_size=16, max_size=16).map(bytes.hex), name, i32), max_size=3).map(tuple),
    ),
    cg.MEMBER_METADATA: st.builds(
        cg.MemberMetadataValue,
        st.none() | name, st.none() | name, name, name, st.lists(name, max_size=3).map(tuple), st.none() | name, i32,
        st.none() | st.builds(
            cg.ClassicMemberMetadata, i32, st.lists(st.tuples(name, st.binary(max_size=200)), max_size=3).map(tuple)
        ),
        st.none() | st.text(min_size=1, max_size=8),  # SubscribedTopicRegex ("" is no expression: None)
    ),
    cg.TARGET_ASSIGNMENT_METADATA: st.builds(cg.TargetAssignmentEpochValue, i32),
    cg.TARGET_ASSIGNMENT_MEMBER: st.builds(cg.TargetMemberValue, parts),
    cg.CURRENT_MEMBER_ASSIGNMENT: st.builds(cg.CurrentAssignmentValue, i32, i32, st.integers(-128, 127), parts, parts),
    cg.REGULAR_EXPRESSION: st.builds(
        cg.RegexValue, st.lists(name, max_size=3).map(tuple), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1)
    ),
}  # fmt: skip


@st.composite
def records(draw: st.DrawFn) -> tuple[cg.ConsumerKey, cg.ConsumerValue | None]:
    version = draw(st.sampled_from(sorted(values)))
    key: cg.ConsumerKey
    if version in (cg.MEMBER_METADATA, cg.TARGET_ASSIGNMENT_MEMBER, cg.CURRENT_MEMBER_ASSIGNMENT):
        key = cg.ConsumerMemberKey(version, draw(name), draw(name))
    elif version == cg.REGULAR_EXPRESSION:
        key = cg.ConsumerRegexKey(version, draw(name), draw(name))
    else:
        key = cg.ConsumerGroupKey(version, draw(name))
    return key, draw(st.none() | values[version])


@settings(max_examples=400)
@given(record=records())
def test_every_record_round_trips(record: tuple[cg.ConsumerKey, cg.ConsumerValue | None]) -> None:
    raw_key, raw_value = encode_record(record)  # type: ignore[arg-type]
    assert decode_record(raw_key, raw_value) == record


def test_byte_layouts_follow_kafkas_schemas() -> None:
    # Keys: int16 version, then non-flexible int16-length strings.
    assert cg.encode_consumer_key(cg.ConsumerGroupKey(3, "g")) == b"\x00\x03\x00\x01g"
    assert cg.encode_consumer_key(cg.ConsumerMemberKey(8, "g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"
    # ConsumerGroupMetadataValue v0: Epoch, empty tagged fields.
    assert cg.encode_consumer_value(cg.GroupEpochValue(4)) == b"\x00\x00" + struct.pack(">i", 4) + b"\x00"
    # ConsumerGroupCurrentMemberAssignmentValue v0: epochs, state int8, two TopicPartitions arrays.
    value = cg.CurrentAssignmentValue(5, 4, 1, ((TID, (0, 1)),), ())
    assert cg.encode_consumer_value(value) == (
        b"\x00\x00" + struct.pack(">iib", 5, 4, 1)
        + b"\x02" + bytes.fromhex(TID) + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00"
        + b"\x01" + b"\x00"
    )  # fmt: skip
    # ConsumerGroupMemberMetadataValue v0: RebalanceTimeoutMs comes before ServerAssignor.
    member = cg.MemberMetadataValue(None, None, "c", "h", ("t",), "range", 1000)
    assert cg.encode_consumer_value(member) == (
        b"\x00\x00" + b"\x00\x00" + b"\x02c\x02h" + b"\x02\x02t" + b"\x00" + struct.pack(">i", 1000) + b"\x06range" + b"\x00"
    )  # fmt: skip
    # A classic member hosted in a consumer group: ClassicMemberMetadata is tagged field 0 (count, tag, size,
    # then SessionTimeoutMs, SupportedProtocols [(Name, Metadata bytes, tags)], tags).
    hosted = cg.MemberMetadataValue(
        None, None, "c", "h", ("t",), None, 1000, cg.ClassicMemberMetadata(45000, (("range", b"\x00\x01"),))
    )
    # SubscribedTopicRegex is the compact string after SubscribedTopicNames.
    regex = cg.MemberMetadataValue(None, None, "c", "h", (), None, 1000, None, "^t-.*")
    assert cg.encode_consumer_value(regex) == (
        b"\x00\x00" + b"\x00\x00" + b"\x02c\x02h" + b"\x01" + b"\x06^t-.*" + struct.pack(">i", 1000) + b"\x00" + b"\x00"
    )  # fmt: skip
    # ConsumerGroupRegularExpressionKey v16: GroupId, RegularExpression; its value v0: Topics, Version, Timestamp.
    assert cg.encode_consumer_key(cg.ConsumerRegexKey(16, "g", "^t")) == b"\x00\x10\x00\x01g\x00\x02^t"
    assert cg.encode_consumer_value(cg.RegexValue(("ta", "tb"), 7, 1234)) == (
        b"\x00\x00" + b"\x03\x03ta\x03tb" + struct.pack(">qq", 7, 1234) + b"\x00"
    )
    classic = struct.pack(">i", 45000) + b"\x02" + b"\x06range" + b"\x03\x00\x01" + b"\x00" + b"\x00"
    assert cg.encode_consumer_value(hosted) == (
        b"\x00\x00" + b"\x00\x00" + b"\x02c\x02h" + b"\x02\x02t" + b"\x00" + struct.pack(">i", 1000) + b"\x00"
        + b"\x01" + b"\x00" + bytes([len(classic)]) + classic
    )  # fmt: skip


@settings(max_examples=600)
@given(version=st.sampled_from(sorted(values)), body=st.binary(max_size=64))
def test_any_value_bytes_decode_or_raise_malformed_record(version: int, body: bytes) -> None:
    key = cg.ConsumerGroupKey(version, "g")
    try:
        cg.decode_consumer_value(key, b"\x00\x00" + body)
    except MalformedRecord as exc:
        assert "key version" in str(exc)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"\x00\x03\x00\x01g\x00", None, "trailing bytes"),
        (b"\x00\x05\x00\x01g", None, "member_id"),
        (b"\x00\x03\x00\x01g", b"\x00\x01\x00\x00\x00\x00\x00", "unsupported value version 1"),
        (b"\x00\x07\x00\x01g\x00\x01m", b"\x00\x00\xff\xff\xff\x0f", "claims"),
        (b"\x00\x10\x00\x01g", None, "regular_expression"),
        (b"\x00\x10\x00\x01g\x00\x01x", b"\x00\x00\x02\x02t\x00", "version"),
        (b"\x00\x09\x00\x01g", None, "3-8 and 16 consumer group"),
    ],
)
def test_damaged_records_name_the_part_and_reason(key: bytes, value: bytes | None, reason: str) -> None:
    with pytest.raises(MalformedRecord, match=reason):
        decode_record(key, value)
