"""__consumer_offsets codecs: byte-exact vectors, every value version, round trips, precise errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.records.errors import MalformedRecord
from zkcoord.records.offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    decode_record,
    encode_group_value,
    encode_key,
    encode_offset_value,
    encode_record,
)

MEMBER = MemberMetadataValue("m-1", "inst", "cid", "/127.0.0.1", 300000, 45000, b"\x01\x02", b"\x03")
GROUP = GroupMetadataValue("consumer", 7, "range", "m-1", 1700000000000, (MEMBER,))


def test_offset_key_v1_bytes() -> None:
    assert encode_key(OffsetCommitKey("g", "t", 3)).hex() == "000100016700017400000003"


def test_group_key_v2_bytes() -> None:
    assert encode_key(GroupMetadataKey("grp")).hex() == "00020003" + b"grp".hex()


def test_offset_value_v3_bytes() -> None:
    v = OffsetCommitValue(5, 2, "md", 1000)
    assert encode_offset_value(v).hex() == (
        "00030000000000000005000000020002" + b"md".hex() + "00000000000003e8"
    )


def test_offset_value_with_expiry_is_v1() -> None:
    v = OffsetCommitValue(5, -1, "", 1000, 2000)
    assert encode_offset_value(v).hex() == "00010000000000000005000000000000000003e800000000000007d0"
    assert decode_offset_value(encode_offset_value(v)) == v


def test_group_value_v3_bytes() -> None:
    expected = (
        "0003"
        + "0008" + b"consumer".hex()
        + "00000007"
        + "0005" + b"range".hex()
        + "0003" + b"m-1".hex()
        + "0000018bcfe56800"
        + "00000001"
        + "0003" + b"m-1".hex()
        + "0004" + b"inst".hex()
        + "0003" + b"cid".hex()
        + "000a" + b"/127.0.0.1".hex()
        + "000493e0"
        + "0000afc8"
        + "00000002" "0102"
        + "00000001" "03"
    )  # fmt: skip
    assert encode_group_value(GROUP).hex() == expected
    assert decode_group_value(bytes.fromhex(expected)) == GROUP


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 3, None, None, 5, ())
    raw = encode_group_value(empty)
    assert raw.hex() == "00030008" + b"consumer".hex() + "00000003ffffffff000000000000000500000000"
    assert decode_group_value(raw) == empty


def test_old_offset_value_versions() -> None:
    v0 = bytes.fromhex("0000000000000000000a0001" + b"x".hex() + "0000000000000064")
    assert decode_offset_value(v0) == OffsetCommitValue(10, -1, "x", 100, -1)
    v2 = b"\x00\x02" + v0[2:]
    assert decode_offset_value(v2) == OffsetCommitValue(10, -1, "x", 100, -1)


def test_flexible_offset_value_v4_skips_tagged_fields() -> None:
    raw = bytes.fromhex("0004000000000000000a0000000102" + b"x".hex() + "0000000000000064010502abcd")
    assert decode_offset_value(raw) == OffsetCommitValue(10, 1, "x", 100)


def test_old_group_value_versions() -> None:
    member_v0 = (
        "0003"
        + b"m-1".hex()
        + "0003"
        + b"cid".hex()
        + "0001"
        + b"h".hex()
        + "00002710"
        + "00000000"
        + "00000000"
    )
    v0 = "00000008" + b"consumer".hex() + "000000020005" + b"range".hex() + "0003" + b"m-1".hex() + "00000001"
    g0 = decode_group_value(bytes.fromhex(v0 + member_v0))
    assert g0.current_state_timestamp == -1
    assert g0.members[0] == MemberMetadataValue("m-1", None, "cid", "h", 10000, 10000, b"", b"")
    member_v1 = (
        "0003" + b"m-1".hex() + "0003" + b"cid".hex() + "0001" + b"h".hex() + "00007530"
        "00002710"
        "00000000"
        "00000000"
    )
    v2 = "0002" + v0[4:-8] + "0000000000000009" + "00000001"
    g2 = decode_group_value(bytes.fromhex(v2 + member_v1))
    assert g2.current_state_timestamp == 9
    assert (g2.members[0].rebalance_timeout, g2.members[0].session_timeout) == (30000, 10000)


@pytest.mark.parametrize(
    ("decoder", "data", "fragment"),
    [
        (decode_key, b"\x00", "truncated at byte 0 reading version"),
        (decode_key, bytes.fromhex("0009000167"), "unsupported key version 9"),  # 3-8: consumer groups
        (decode_key, bytes.fromhex("0002000167ff"), "1 trailing bytes"),
        (decode_key, bytes.fromhex("00020005ab"), "reading group"),
        (decode_key, bytes.fromhex("0002ffff"), "group is null"),
        (decode_offset_value, bytes.fromhex("0009"), "unsupported offset commit value version 9"),
        (decode_offset_value, bytes.fromhex("00030000000000000005"), "reading leader_epoch"),
        (
            decode_group_value,
            bytes.fromhex("000300016300000001ffffffff0000000000000000ffffffff"),
            "members array is null",
        ),
        (decode_key, bytes.fromhex("00020002ffff"), "not UTF-8"),
    ],
)
def test_malformed_inputs_name_the_problem(decoder: object, data: bytes, fragment: str) -> None:
    with pytest.raises(MalformedRecord) as info:
        decoder(data)  # type: ignore[operator]
    assert fragment in str(info.value)


def test_decode_record_tombstones() -> None:
    assert decode_record(encode_key(GroupMetadataKey("g")), None) == (GroupMetadataKey("g"), None)
    k = OffsetCommitKey("g", "t", 1)
    assert decode_record(encode_key(k), None) == (k, None)


text = st.text(max_size=12)
members = st.builds(
    MemberMetadataValue,
    text,
    st.none() | text,
    text,
    text,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=20),
    st.binary(max_size=20),
)


@given(
    st.builds(OffsetCommitKey, text, text, st.integers(-(2**31), 2**31 - 1)),
    st.builds(
        OffsetCommitValue,
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-1, 2**31 - 1),
        text,
        st.integers(-(2**63), 2**63 - 1),
        st.just(-1),
    ),
)
def test_offset_round_trip(key: OffsetCommitKey, value: OffsetCommitValue) -> None:
    assert decode_record(*encode_record((key, value))) == (key, value)


@given(
    text,
    st.builds(
        GroupMetadataValue,
        text,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | text,
        st.none() | text,
        st.integers(-1, 2**62),
        st.lists(members, max_size=4).map(tuple),
    ),
)
def test_group_round_trip(group: str, value: GroupMetadataValue) -> None:
    assert decode_record(*encode_record((GroupMetadataKey(group), value))) == (GroupMetadataKey(group), value)


def test_encode_records_matches_encode_record() -> None:
    from zkcoord.records.offsets import encode_records

    records = [
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", 5)),
        (OffsetCommitKey("g", "t", 1), OffsetCommitValue(2, 3, "meta", 5)),
        (OffsetCommitKey("g", "u", 1), OffsetCommitValue(2, 3, "", 5, 9)),
        (OffsetCommitKey("g", "u", 2), None),
        (GroupMetadataKey("g"), GROUP),
        (GroupMetadataKey("g"), None),
    ]
    assert encode_records(records) == [encode_record(r) for r in records]  # type: ignore[arg-type]
