"""`load_raw` (decoding while replaying, no record object for a common offset commit) rebuilds exactly what
`load` rebuilds from the decoded records, for any mix of offset commits, tombstones and group metadata."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.group import handlers as h
from zkcoord.group.config import GroupConfig
from zkcoord.group.model import CoordinatorState
from zkcoord.records.offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_record,
    encode_record,
)

groups = st.sampled_from(["g", "h", "é"])
offset_records = st.tuples(
    st.builds(OffsetCommitKey, groups, st.sampled_from(["t", "u"]), st.integers(0, 3)),
    st.none()
    | st.builds(
        OffsetCommitValue,
        st.integers(0, 10**12),
        st.sampled_from([-1, 4]),
        st.sampled_from(["", "", "meta"]),
        st.integers(0, 10**13),
        st.sampled_from([-1, -1, 10**13]),
    ),
)
member = MemberMetadataValue("m-1", None, "c", "/127.0.0.1", 30000, 10000, b"s", b"a")
group_records = st.tuples(
    st.builds(GroupMetadataKey, groups),
    st.none()
    | st.builds(
        GroupMetadataValue,
        st.just("consumer"),
        st.integers(0, 5),
        st.just("range"),
        st.just("m-1"),
        st.just(-1),
        st.sampled_from([(), (member,)]),
    ),
)


@given(st.lists(st.one_of(offset_records, group_records), max_size=60))
def test_load_raw_equals_load(records: list[Record]) -> None:
    raw = [encode_record(r) for r in records]
    by_load = CoordinatorState(GroupConfig())
    expected = h.load(by_load, [decode_record(k, v) for k, v in raw], 1_000)
    by_raw = CoordinatorState(GroupConfig())
    result, count = h.load_raw(by_raw, iter(raw), 1_000)
    assert count == len(raw)
    assert by_raw.view.snapshot() == by_load.view.snapshot()
    assert sorted(by_raw.groups) == sorted(by_load.groups)
    assert [(g.state, g.generation, list(g.members)) for g in by_raw.groups.values()] == [
        (g.state, g.generation, list(g.members)) for g in by_load.groups.values()
    ]
    assert result.timers == expected.timers
