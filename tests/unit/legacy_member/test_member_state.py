"""The legacy member's state table: every allowed move, refused ones, the safety rules read off the table, and
random interleavings of kazoo's events with a modelled rebalance thread."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.legacy.member_state import (
    HANDS_OUT,
    SETTLED,
    STOPPING,
    TRANSITIONS,
    VALID_PREVIOUS,
    IllegalStateTransition,
    MemberEvent,
    MemberState,
    describe_table,
    transition,
)

S = MemberState
E = MemberEvent

# Every move that changes the state, written out by hand (self-moves are checked below).
ALLOWED = [
    (S.CREATED, E.START, S.REGISTERING),
    (S.REGISTERING, E.REGISTERED, S.REBALANCING),
    (S.REBALANCING, E.REREGISTER, S.REGISTERING),
    (S.OWNING, E.REREGISTER, S.REGISTERING),
    (S.SUSPENDED, E.REREGISTER, S.REGISTERING),
    (S.EXPIRED, E.REREGISTER, S.REGISTERING),
    (S.STABLE, E.REQUEST, S.OWNING),
    (S.WAITING_FOR_BROKER, E.REQUEST, S.REBALANCING),
    (S.FAILED, E.REQUEST, S.REBALANCING),
    (S.REGISTERING, E.SUSPEND, S.SUSPENDED),
    (S.REBALANCING, E.SUSPEND, S.SUSPENDED),
    (S.OWNING, E.SUSPEND, S.SUSPENDED),
    (S.STABLE, E.SUSPEND, S.SUSPENDED),
    (S.WAITING_FOR_BROKER, E.SUSPEND, S.SUSPENDED),
    (S.FAILED, E.SUSPEND, S.SUSPENDED),
    (S.SUSPENDED, E.RECONNECT, S.REBALANCING),
    (S.STABLE, E.RECONNECT, S.OWNING),
    (S.WAITING_FOR_BROKER, E.RECONNECT, S.REBALANCING),
    (S.FAILED, E.RECONNECT, S.REBALANCING),
    (S.REGISTERING, E.SESSION_LOST, S.EXPIRED),
    (S.REBALANCING, E.SESSION_LOST, S.EXPIRED),
    (S.OWNING, E.SESSION_LOST, S.EXPIRED),
    (S.STABLE, E.SESSION_LOST, S.EXPIRED),
    (S.WAITING_FOR_BROKER, E.SESSION_LOST, S.EXPIRED),
    (S.FAILED, E.SESSION_LOST, S.EXPIRED),
    (S.SUSPENDED, E.SESSION_LOST, S.EXPIRED),
    (S.OWNING, E.FENCE, S.REBALANCING),
    (S.OWNING, E.RECONCILE, S.RECONCILING),
    (S.SUSPENDED, E.RECONCILE, S.REBALANCING),
    (S.RECONCILING, E.INSTALL, S.OWNING),
    (S.RECONCILING, E.DONE, S.WAITING_FOR_BROKER),
    (S.RECONCILING, E.GIVE_UP, S.OWNING),
    (S.RECONCILING, E.REREGISTER, S.REGISTERING),
    (S.RECONCILING, E.SUSPEND, S.SUSPENDED),
    (S.RECONCILING, E.SESSION_LOST, S.EXPIRED),
    (S.SUSPENDED, E.FENCE, S.REBALANCING),
    (S.REBALANCING, E.INSTALL, S.OWNING),
    (S.OWNING, E.DONE, S.STABLE),
    (S.REBALANCING, E.DONE, S.WAITING_FOR_BROKER),
    (S.SUSPENDED, E.DONE, S.WAITING_FOR_BROKER),
    (S.REBALANCING, E.GIVE_UP, S.FAILED),
    (S.STABLE, E.LEAVE, S.LEAVING),  # leave(): make before break, no more rebalances
    (S.LEAVING, E.SUSPEND, S.STOPPED),  # fenced, and no reconnect may register it again
    (S.LEAVING, E.SESSION_LOST, S.STOPPED),
    *[(s, E.DUPLICATE, S.STOPPED) for s in S if s not in STOPPING and s is not S.CREATED],
    *[(s, E.CLOSE, S.CLOSING) for s in S if s not in (S.CLOSING, S.CLOSED)],
    (S.CLOSING, E.CLOSED, S.CLOSED),
]

REFUSED = [
    (S.CREATED, E.REQUEST),  # no watch exists before start()
    (S.CREATED, E.REGISTERED),
    (S.STABLE, E.INSTALL),  # only a fenced attempt installs
    (S.SUSPENDED, E.INSTALL),  # the generation check drops an attempt a session event overtook
    (S.EXPIRED, E.INSTALL),
    (S.OWNING, E.INSTALL),
    (S.EXPIRED, E.DONE),  # an attempt registers again first, so it cannot end well in EXPIRED
    (S.FAILED, E.DONE),
    (S.STABLE, E.FENCE),  # an attempt runs only when due, and due leaves STABLE
    (S.REGISTERING, E.START),
    (S.CLOSED, E.CLOSE),  # close() is idempotent before it reaches the table
    (S.REBALANCING, E.CLOSED),
    (S.CREATED, E.DUPLICATE),
    (S.STABLE, E.RECONCILE),  # as FENCE: an attempt runs only when due
    (S.FAILED, E.RECONCILE),
    (S.RECONCILING, E.FENCE),  # a member is incremental or eager, never both in one rebalance
    (S.OWNING, E.LEAVE),  # a rebalance is due or running: leave() closes instead
    (S.RECONCILING, E.LEAVE),
    (S.LEAVING, E.FENCE),  # no attempt runs while leaving
    (S.LEAVING, E.RECONCILE),
    (S.LEAVING, E.INSTALL),
]


@pytest.mark.parametrize(("src", "event", "dst"), ALLOWED, ids=lambda x: str(x))
def test_allowed(src: MemberState, event: MemberEvent, dst: MemberState) -> None:
    assert transition(src, event) is dst
    assert src in VALID_PREVIOUS[dst]


def test_the_hand_written_list_is_every_move_that_changes_the_state() -> None:
    moves = {(src, ev, dst) for ev, m in TRANSITIONS.items() for src, dst in m.items() if src is not dst}
    assert moves == set(ALLOWED)


@pytest.mark.parametrize(("src", "event"), REFUSED, ids=lambda x: str(x))
def test_refused(src: MemberState, event: MemberEvent) -> None:
    with pytest.raises(IllegalStateTransition) as info:
        transition(src, event)
    assert (info.value.from_state, info.value.event) == (src, event)
    assert f"event {event} is illegal in state {src}" in str(info.value)


def test_kazoo_events_are_accepted_in_every_state_after_start() -> None:
    # Watches and the connection listener run on kazoo's threads at any moment: they must never be refused.
    for event in (E.REQUEST, E.SUSPEND, E.RECONNECT, E.SESSION_LOST):
        assert set(TRANSITIONS[event]) == set(S) - {S.CREATED}, event


def test_only_install_lowers_the_fence() -> None:
    for event, moves in TRANSITIONS.items():
        for src, dst in moves.items():
            if dst in HANDS_OUT and src not in HANDS_OUT:
                assert event is E.INSTALL, (src, event, dst)


def test_reconcile_keeps_handing_out_only_what_was_handed_out() -> None:
    # Incremental hand-over: an attempt that starts while the share is handed out goes on handing out what it
    # keeps; one that starts fenced (first rebalance, after a failure or a reconnect) stays fenced to INSTALL.
    for src, dst in TRANSITIONS[E.RECONCILE].items():
        if src not in STOPPING:
            assert (dst in HANDS_OUT) == (src in HANDS_OUT), (src, dst)
            assert dst not in SETTLED, (src, dst)


def test_session_trouble_duplicate_and_close_always_fence() -> None:
    for event in (E.SUSPEND, E.SESSION_LOST, E.DUPLICATE, E.CLOSE, E.REREGISTER, E.FENCE):
        assert not any(dst in HANDS_OUT for dst in TRANSITIONS[event].values()), event


def test_stopping_states_ignore_everything_but_close() -> None:
    for event, moves in TRANSITIONS.items():
        for state in STOPPING:
            if event is E.CLOSE:
                assert moves.get(state) in (S.CLOSING, None)
            elif event is E.CLOSED:
                assert moves.get(state) in (S.CLOSED, None)
            else:
                assert moves[state] is state, (state, event)


def test_closed_is_reached_only_through_closing() -> None:
    assert VALID_PREVIOUS[S.CLOSED] == {S.CLOSING, S.CLOSED}
    assert VALID_PREVIOUS[S.CREATED] == frozenset()


def test_docs_show_the_table_as_it_is_in_code() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "legacy-member.md").read_text()
    assert "\n".join(describe_table()) in doc


# --- random interleavings ----------------------------------------------------------------------------------

FOREIGN = st.sampled_from([E.REQUEST, E.SUSPEND, E.RECONNECT, E.SESSION_LOST])


class Model:
    """The runtime's use of the table, reduced to its decisions: a rebalance-due latch, a generation that
    session events bump, and one attempt walked step by step (a step may be overtaken by kazoo's events)."""

    def __init__(self) -> None:
        self.state = S.CREATED
        self.due = False
        self.generation = 0

    def feed(self, event: MemberEvent) -> None:
        before = self.state
        self.state = transition(self.state, event)
        if event in (E.REQUEST, E.SUSPEND, E.RECONNECT, E.SESSION_LOST):
            self.due = True
            if event is not E.REQUEST:
                self.generation += 1
        if event in (E.SUSPEND, E.SESSION_LOST):
            assert self.state not in HANDS_OUT
        if self.state in HANDS_OUT and before not in HANDS_OUT:
            assert event is E.INSTALL


@given(
    foreign=st.lists(st.tuples(st.integers(0, 6), FOREIGN), max_size=12),
    attempts=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=4),
    duplicate=st.booleans(),
    incremental=st.booleans(),
)
def test_random_interleavings_never_hit_a_missing_move(
    foreign: list[tuple[int, MemberEvent]],
    attempts: list[tuple[bool, bool, bool]],
    duplicate: bool,
    incremental: bool,
) -> None:
    m = Model()
    m.feed(E.START)
    m.feed(E.REGISTERED)
    m.feed(E.REQUEST)
    pending = sorted(foreign, key=lambda f: f[0])
    tick = 0

    def kazoo() -> None:
        # Deliver the foreign events scheduled up to now, between two steps of the rebalance thread.
        nonlocal tick
        tick += 1
        while pending and pending[0][0] <= tick:
            m.feed(pending.pop(0)[1])

    for session_moved, no_broker, claimed in attempts:
        if not m.due:
            break
        m.due = False
        generation = m.generation
        kazoo()
        if session_moved or m.state in (S.REGISTERING, S.EXPIRED):
            m.feed(E.REREGISTER)
            kazoo()
            m.feed(E.REGISTERED)
        if duplicate and session_moved:
            m.feed(E.DUPLICATE)
            break
        kazoo()
        if no_broker:
            if not m.due:
                m.feed(E.DONE)
            continue
        m.feed(E.RECONCILE if incremental else E.FENCE)
        kazoo()
        if claimed and m.generation == generation:
            m.feed(E.INSTALL)
            kazoo()
            if not m.due:
                m.feed(E.DONE)
        elif not m.due:
            m.feed(E.GIVE_UP)
    while pending:
        m.feed(pending.pop(0)[1])
    if m.state in SETTLED:
        assert not m.due
    m.feed(E.CLOSE)
    assert m.state not in HANDS_OUT
    m.feed(E.CLOSED)
    assert m.state is S.CLOSED
