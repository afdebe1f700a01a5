"""The controller's lifecycle table: the moves written out, refused ones, the pass steps read off the state, and
random interleavings of kazoo's events with a modelled worker pass (the runtime's use of the table, reduced to its
decisions), checking that the node acts only with a fence won in its current session and never on a pass that
read ZooKeeper before a connection change."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.zk.controller_state import (
    CONNECTION_EVENTS,
    NEEDS_CURRENT_GENERATION,
    TRANSITIONS,
    ControllerEvent,
    ControllerState,
    ControllerWork,
    IllegalTransition,
    acts,
    holds_fence,
    must_elect,
    must_reconcile,
    must_verify,
    transition,
)
from zkcoord.zk.lifecycle import state_changes

S = ControllerState
E = ControllerEvent
W = ControllerWork

# Every move that changes the state, by hand (the table must say exactly this).
CHANGES = {
    (S.ACTIVE, E.SUSPENDED): S.HELD,
    (S.HELD, E.LOST): S.FOLLOWER,
    (S.ACTIVE, E.LOST): S.FOLLOWER,
    (S.FOLLOWER, E.WON): S.ACTIVE,
    (S.HELD, E.WON): S.ACTIVE,
    (S.FOLLOWER, E.WON_STALE): S.HELD,
    (S.HELD, E.RESUMED): S.ACTIVE,
    (S.HELD, E.SESSION_CHANGED): S.FOLLOWER,
    (S.ACTIVE, E.SESSION_CHANGED): S.FOLLOWER,
    (S.HELD, E.LOST_ELECTION): S.FOLLOWER,
    (S.ACTIVE, E.LOST_ELECTION): S.FOLLOWER,
    (S.HELD, E.RESIGN): S.FOLLOWER,
    (S.ACTIVE, E.RESIGN): S.FOLLOWER,
    (S.FOLLOWER, E.CLOSE): S.CLOSED,
    (S.HELD, E.CLOSE): S.CLOSED,
    (S.ACTIVE, E.CLOSE): S.CLOSED,
}


def test_the_state_changing_moves_are_exactly_these() -> None:
    assert state_changes(TRANSITIONS) == CHANGES


def test_only_generation_checked_events_make_it_act() -> None:
    into_active = {event for (_, event), dst in state_changes(TRANSITIONS).items() if acts(dst)}
    assert into_active == NEEDS_CURRENT_GENERATION == {E.WON, E.RESUMED}


@pytest.mark.parametrize(
    ("state", "event", "work"),
    [
        (S.ACTIVE, E.SUSPENDED, {W.NOTIFY}),
        (S.ACTIVE, E.LOST, {W.NOTIFY, W.ELECT}),
        (S.HELD, E.CONNECTED, {W.VERIFY}),
        (S.ACTIVE, E.CONTROLLER_CHANGED, {W.ELECT}),
        (S.ACTIVE, E.TREE_CHANGED, {W.RECONCILE}),
        (S.FOLLOWER, E.RESYNC, {W.RECONCILE, W.ELECT}),
        (S.HELD, E.RESYNC, {W.RECONCILE}),  # holds a fence: verifies (HELD), does not elect
        (S.FOLLOWER, E.WON_STALE, {W.VERIFY}),
        (S.FOLLOWER, E.RESUMED_STALE, set()),  # the listener dropped the fence; LOST asked to elect
        (S.HELD, E.RESUMED_STALE, {W.VERIFY}),
        (S.ACTIVE, E.RESIGN, {W.ELECT}),
        (S.FOLLOWER, E.INTERRUPTED, {W.RECONCILE, W.ELECT}),
        (S.ACTIVE, E.INTERRUPTED, {W.RECONCILE}),
        (S.ACTIVE, E.WON, set()),
    ],
)
def test_the_work_an_event_asks_for(state: S, event: E, work: set[W]) -> None:
    assert transition(state, event)[1] == work


def test_resuming_needs_a_held_fence() -> None:
    with pytest.raises(IllegalTransition, match="RESUMED is illegal in state FOLLOWER"):
        transition(S.FOLLOWER, E.RESUMED)


def test_a_suspension_or_loss_always_stops_acting() -> None:
    for state in S:
        for event in (E.SUSPENDED, E.LOST):
            assert not acts(transition(state, event)[0])
    assert not holds_fence(transition(S.ACTIVE, E.LOST)[0])
    assert holds_fence(transition(S.ACTIVE, E.SUSPENDED)[0])  # same session may resume after verifying


def test_closed_ignores_every_event() -> None:
    for event in E:
        assert transition(S.CLOSED, event) == (S.CLOSED, frozenset())


def test_every_event_but_resumed_is_legal_in_every_state() -> None:
    for event in E:
        for state in S:
            if (state, event) != (S.FOLLOWER, E.RESUMED):
                transition(state, event)


def test_the_steps_of_a_pass() -> None:
    assert must_verify(S.HELD, frozenset())  # a held fence nobody acts on is verified first
    assert must_verify(S.ACTIVE, frozenset({W.VERIFY}))
    assert not must_verify(S.ACTIVE, frozenset({W.RECONCILE}))
    assert must_elect(S.FOLLOWER, frozenset(), verified=True)  # the verify dropped the fence
    assert not must_elect(S.ACTIVE, frozenset(), verified=True)
    assert must_elect(S.ACTIVE, frozenset({W.ELECT}), verified=False)
    assert not must_reconcile(S.ACTIVE, frozenset({W.NOTIFY}), verified=False)
    assert must_reconcile(S.ACTIVE, frozenset({W.NOTIFY}), verified=True)
    assert must_reconcile(S.ACTIVE, frozenset({W.ELECT}), verified=False)
    assert not must_reconcile(S.HELD, frozenset({W.RECONCILE}), verified=False)


# --- random interleavings ----------------------------------------------------------------------------------

FOREIGN = st.sampled_from([E.SUSPENDED, E.LOST, E.CONNECTED, E.CONTROLLER_CHANGED, E.TREE_CHANGED, E.RESYNC])


class Model:
    """The worker as the runtime drives it: merged work, a generation bumped by connection events, decisive
    moves fed only when the generation a pass began in is still current."""

    def __init__(self) -> None:
        self.state = S.FOLLOWER
        self.work: set[W] = {W.ELECT}
        self.generation = 0
        self.won_in_session = False
        self.stopped_since_activation = True

    def feed(self, event: E) -> None:
        self.state, work = transition(self.state, event)
        self.work |= work
        if event in CONNECTION_EVENTS:
            self.generation += 1
        if event in (E.SUSPENDED, E.LOST):  # a CONNECTED alone keeps acting (and asks for a verify)
            self.stopped_since_activation = True
        if event is E.LOST:
            self.won_in_session = False
        if event in (E.WON, E.WON_STALE):
            self.won_in_session = True
        if event in (E.WON, E.RESUMED):
            self.stopped_since_activation = False
        # the invariants, after every event
        if acts(self.state):
            assert self.won_in_session, "acts without having won in this session"
            assert not self.stopped_since_activation, "acts again after a stop without a fresh activation"

    def activate(self, generation: int, won: bool) -> None:
        if generation == self.generation:
            self.feed(E.WON if won else E.RESUMED)
        else:
            self.feed(E.WON_STALE if won else E.RESUMED_STALE)


STEP = st.tuples(st.lists(FOREIGN, max_size=2), st.integers(0, 3))


@settings(max_examples=300)
@given(passes=st.lists(st.tuples(st.lists(FOREIGN, max_size=3), STEP, STEP, STEP), max_size=12))
def test_random_interleavings_act_only_on_a_current_win(
    passes: list[tuple[list[E], tuple[list[E], int], tuple[list[E], int], tuple[list[E], int]]],
) -> None:
    m = Model()
    for before, verify_step, elect_step, reconcile_step in passes:
        for event in before:
            m.feed(event)
        work, m.work = frozenset(m.work), set()
        generation = m.generation
        verified = must_verify(m.state, work)
        if verified:
            held = holds_fence(m.state)  # what the pass read
            foreign, outcome = verify_step
            for event in foreign:
                m.feed(event)
            if not held or outcome == 1:
                m.feed(E.SESSION_CHANGED)
            elif outcome == 0:
                m.activate(generation, won=False)
            else:
                m.feed(E.RESIGN)
        if must_elect(m.state, work, verified):
            held = holds_fence(m.state)
            foreign, outcome = elect_step
            for event in foreign:
                m.feed(event)
            if outcome == 0:
                m.activate(generation, won=True)  # created /controller, bumped the epoch
            elif outcome == 1:
                if held:
                    m.activate(generation, won=False)  # our own znode: a spurious wake-up
                else:
                    m.activate(generation, won=True)
            elif outcome == 2:
                m.feed(E.LOST_ELECTION)
            else:
                m.feed(E.RESIGN)
        if must_reconcile(m.state, work, verified):
            foreign, outcome = reconcile_step
            for event in foreign:
                m.feed(event)
            m.feed([E.TREE_CHANGED, E.RESIGN, E.INTERRUPTED, E.FAILED][outcome])
    m.feed(E.CLOSE)
    assert not acts(m.state)
