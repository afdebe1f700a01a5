"""Ids and Java string semantics: UTF-16 order, String.hashCode, generated consumer ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.legacy import ids


def test_java_hash_vectors() -> None:
    assert ids.java_hash("[topic1,0]") == -315570884
    assert ids.java_hash("") == 0
    assert ids.java_hash("a") == 97
    assert ids.java_hash("polygenelubricants") == -(2**31)  # the famous Integer.MIN_VALUE hash
    assert ids.java_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # two UTF-16 code units


def test_thread_order_is_java_order() -> None:
    assert ids.java_sorted(["c-2", "c-10", "c-1"]) == ["c-1", "c-10", "c-2"]
    assert ids.java_sorted(["g1c2-0", "g1c10-0"]) == ["g1c10-0", "g1c2-0"]
    # non-BMP (surrogates 0xD8xx) sorts before U+FFFD in Java, after it in Python's code point order
    assert ids.java_sorted(["\ufffd", "\U0001f600"]) == ["\U0001f600", "\ufffd"]
    assert sorted(["\ufffd", "\U0001f600"]) == ["\ufffd", "\U0001f600"]


@given(st.text(max_size=6), st.text(max_size=6))
def test_java_compare_agrees_with_sort_key(a: str, b: str) -> None:
    c = ids.java_compare(a, b)
    ka, kb = ids.utf16_key(a), ids.utf16_key(b)
    assert (c < 0) == (ka < kb) and (c == 0) == (ka == kb)


@given(st.text(max_size=20))
def test_java_hash_is_signed_int32(s: str) -> None:
    h = ids.java_hash(s)
    assert -(2**31) <= h < 2**31


def test_consumer_and_thread_ids() -> None:
    cid = ids.consumer_id("mygroup", host="host1", timestamp_ms=1428512949385, uuid8="1a2b3c4d")
    assert cid == "mygroup_host1-1428512949385-1a2b3c4d"
    assert ids.consumer_id_from_suffix("group1", "consumer1") == "group1_consumer1"
    assert ids.thread_id(cid, 0) == cid + "-0"
    assert ids.consumer_of_thread(cid + "-12") == cid
    assert ids.thread_ids("c", 11)[:3] == ["c-0", "c-1", "c-10"]
    with pytest.raises(ValueError, match="8 lower-case hex"):
        ids.consumer_id("g", host="h", timestamp_ms=1, uuid8="XYZ")
    with pytest.raises(ValueError, match="no '-<n>'"):
        ids.consumer_of_thread("nodash")


def test_uuid_prefix_is_java_to_hex_string() -> None:
    assert ids.uuid_prefix(0x1A2B3C4D5E6F7081) == "1a2b3c4d"
    assert ids.uuid_prefix(-1) == "ffffffff"  # two's complement of a negative MSB
    assert ids.uuid_prefix(-0x7FFFFFFFFFFFFFFF) == "80000000"
    with pytest.raises(ValueError, match="fewer than 8"):
        ids.uuid_prefix(0xABC)
