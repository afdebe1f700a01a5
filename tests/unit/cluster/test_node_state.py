"""The cluster node's lifecycle table: the moves written out, refused ones, and random interleavings of kazoo's
events with a modelled worker pass, checking that the node serves only after a pass of the current connection
generation resumed it, and after a session loss only once it has registered again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.cluster.node_state import (
    CONNECTION_EVENTS,
    NEEDS_CURRENT_GENERATION,
    REFRESH,
    TRANSITIONS,
    IllegalTransition,
    NodeEvent,
    NodeState,
    must_register,
    serves,
    transition,
)
from zkcoord.zk.lifecycle import state_changes

S = NodeState
E = NodeEvent

CHANGES = {
    (S.CREATED, E.START): S.SERVING,
    (S.SERVING, E.SUSPENDED): S.PAUSED,
    **{(s, E.LOST): S.EXPIRED for s in (S.CREATED, S.SERVING, S.PAUSED, S.REGISTERING)},
    (S.EXPIRED, E.REGISTER): S.REGISTERING,
    (S.REGISTERING, E.REGISTERED): S.PAUSED,
    (S.PAUSED, E.RESUMED): S.SERVING,
    (S.REGISTERING, E.FAILED): S.EXPIRED,
    **{(s, E.CLOSE): S.CLOSED for s in (S.CREATED, S.SERVING, S.PAUSED, S.EXPIRED, S.REGISTERING)},
}


def test_the_state_changing_moves_are_exactly_these() -> None:
    assert state_changes(TRANSITIONS) == CHANGES


def test_only_a_generation_checked_resume_serves_again() -> None:
    into_serving = {event for (src, event), dst in state_changes(TRANSITIONS).items() if serves(dst)}
    assert (
        into_serving - {E.START} == NEEDS_CURRENT_GENERATION == {E.RESUMED}
    )  # START: right after registering


def test_every_outside_event_asks_for_a_refresh() -> None:
    for event in (E.SUSPENDED, E.LOST, E.CONNECTED, E.CHANGED, E.RESYNC):
        for state in (S.CREATED, S.SERVING, S.PAUSED, S.EXPIRED, S.REGISTERING):
            assert transition(state, event)[1] == REFRESH


@pytest.mark.parametrize(
    ("state", "event"),
    [(S.EXPIRED, E.RESUMED), (S.REGISTERING, E.RESUMED), (S.SERVING, E.REGISTER), (S.CREATED, E.RESUMED)],
)
def test_refused_moves(state: S, event: E) -> None:
    with pytest.raises(IllegalTransition, match=f"{event} is illegal in state {state}"):
        transition(state, event)


def test_a_loss_during_registration_registers_again() -> None:
    state, _ = transition(S.REGISTERING, E.LOST)
    state, _ = transition(state, E.REGISTERED)  # the registration of the lost session
    assert must_register(state)


def test_closed_ignores_every_event() -> None:
    for event in E:
        assert transition(S.CLOSED, event) == (S.CLOSED, frozenset())


# --- random interleavings ----------------------------------------------------------------------------------

FOREIGN = st.sampled_from([E.SUSPENDED, E.LOST, E.CONNECTED, E.CHANGED, E.RESYNC])


class Model:
    def __init__(self) -> None:
        self.state = S.CREATED
        self.generation = 0
        self.registered = True  # start() registers before START
        self.stopped = False
        self.session = 0
        self.registering_in: int | None = None  # the session a registration in progress writes under

    def feed(self, event: E) -> None:
        self.state, _ = transition(self.state, event)
        if event in CONNECTION_EVENTS:
            self.generation += 1
        if event in (E.SUSPENDED, E.LOST):
            self.stopped = True
        if event is E.LOST:
            self.registered = False
            self.session += 1
        if event is E.REGISTER:
            self.registering_in = self.session
        if event is E.REGISTERED and self.registering_in == self.session:
            self.registered = True
        if event in (E.RESUMED, E.START) and serves(self.state):
            self.stopped = False
        if serves(self.state):
            assert self.registered, "serves without a registration of its session"
            assert not self.stopped, "serves again after a stop without a resume"


@settings(max_examples=300)
@given(
    passes=st.lists(
        st.tuples(st.lists(FOREIGN, max_size=3), st.lists(FOREIGN, max_size=2), st.booleans(), st.booleans()),
        max_size=12,
    ),
    early=st.lists(FOREIGN, max_size=2),
)
def test_random_interleavings_serve_only_when_current_and_registered(
    passes: list[tuple[list[E], list[E], bool, bool]], early: list[E]
) -> None:
    m = Model()
    for event in early:  # the listener is added just before START
        m.feed(event)
    m.feed(E.START)
    for before, during, register_fails, refresh_fails in passes:
        for event in before:
            m.feed(event)
        generation = m.generation
        if must_register(m.state):
            m.feed(E.REGISTER)
            for event in during:
                m.feed(event)
            if register_fails:
                m.feed(E.FAILED)
                continue
            m.feed(E.REGISTERED)
        else:
            for event in during:
                m.feed(event)
        if refresh_fails:
            m.feed(E.FAILED)
        elif generation == m.generation:
            m.feed(E.RESUMED)
        else:
            m.feed(E.RESUME_STALE)
    m.feed(E.CLOSE)
    assert not serves(m.state)
