"""The two handlers a mixed group needs: a rebalance started from outside (a legacy member changed) and a legacy
member's generation -1 commit into a live group."""

from __future__ import annotations

from group.driver import Driver
from zkcoord.group import handlers as h
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic
from zkcoord.group.state import GroupState


def _legacy_commit(offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        2, "g", -1, "", (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, offset, -1, ""),)),)
    )


def test_external_rebalance_moves_a_stable_group_to_preparing_without_a_record() -> None:
    d = Driver()
    d.stable_group(2)
    before = len(d.records)
    result = d.apply(h.handle_external_rebalance(d.st, "g", d.now))
    assert d.st.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert result.records == () and len(d.records) == before
    # nothing to do for an unknown group or one already rebalancing
    assert d.apply(h.handle_external_rebalance(d.st, "g", d.now)).timers == ()
    assert d.apply(h.handle_external_rebalance(d.st, "nope", d.now)) == h.Result()


def test_legacy_member_commit_is_stored_in_a_live_group() -> None:
    d = Driver()
    d.stable_group(1)
    refused = d.commit({("t", 0): 5})  # the classic path: a non-member into a non-empty group
    assert d.r(refused).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    t = d.next_token()
    d.apply(h.handle_legacy_member_commit(d.st, _legacy_commit(7), d.now, t))
    assert d.r(t).topics[0].partitions[0].error_code == 0
    assert d.st.view.offsets["g"][("t", 0)].offset == 7
    assert d.st.groups["g"].state is GroupState.STABLE  # the classic members are untouched
