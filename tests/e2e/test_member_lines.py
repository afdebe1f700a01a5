"""The e2e observer of member callback lines (no servers): an overlap is reported once certain, never because a
member's earlier revocation is still in flight on its own pipe."""

from __future__ import annotations

import pytest

from e2e.member_lines import Observer


def test_revocation_arriving_after_the_next_assignment_is_no_overlap() -> None:
    obs = Observer()
    obs.line("k2", "A 100 2")
    obs.line(
        "k3", "A 300 2"
    )  # k3 printed its assignment after k2's revocation, whose line is still in flight
    assert obs.holders() == {"k2": {2}, "k3": {2}}  # not certain yet: both shown
    obs.line("k2", "R 200 2")
    assert obs.holders() == {"k2": set(), "k3": {2}}


def test_overlap_reported_once_the_old_holder_printed_past_the_assignment() -> None:
    obs = Observer()
    obs.line("k2", "A 100 2")
    obs.line("k3", "A 300 2")
    obs.holders()
    obs.line("k2", "M 400 2 17")  # k2 still consumed partition 2 after k3 got it
    with pytest.raises(AssertionError, match="partition 2 given to k3 at 300 while k2 held it"):
        obs.holders()


def test_overlap_reported_once_the_old_holders_stream_ended() -> None:
    obs = Observer()
    obs.line("k2", "A 100 2")
    obs.line("k3", "A 300 2")
    obs.holders()
    obs.ended("k2")  # it never revoked
    with pytest.raises(AssertionError, match="while k2 held it"):
        obs.holders()


def test_a_member_reassigned_its_own_partition_is_no_overlap() -> None:
    obs = Observer()
    obs.line("k2", "A 100 1,2")
    obs.line("k2", "A 200 2")
    obs.ended("k2")
    assert obs.holders() == {"k2": {1, 2}}
