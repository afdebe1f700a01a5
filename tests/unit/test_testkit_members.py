"""The test kit's pure pieces: a member's rebalance record (`RebalanceLog`) and the argument checks of the paced
producer and the members, which fail before any client is built."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.errors import KafkaConnectionError

from zkcoord.testing.members import Change, ClientMember, KafkaPythonMember, RebalanceLog
from zkcoord.testing.producers import PacedProducer


def test_eager_rebalances_revoke_everything_and_pause_what_comes_back() -> None:
    log = RebalanceLog()
    assert log.record(Change.ASSIGNED, {0, 1, 2, 3, 4, 5}) == frozenset(range(6))
    assert log.record(Change.REVOKED, {0, 1, 2, 3, 4, 5}) == frozenset()
    assert log.record(Change.ASSIGNED, {0, 1, 2}) == frozenset({0, 1, 2})
    assert log.held() == frozenset({0, 1, 2})
    assert log.revoked() == set(range(6))
    assert log.paused() == {0, 1, 2}  # kept, yet given up and assigned again
    assert [kind for kind, _ in log.events] == ["assigned", "revoked", "assigned"]


def test_cooperative_rebalances_give_up_only_what_moves() -> None:
    log = RebalanceLog()
    log.record(Change.ASSIGNED, {0, 1, 2, 3, 4, 5})
    log.record(Change.REVOKED, {3, 4, 5})
    log.record(Change.ASSIGNED, set())  # the second round of KIP-429: nothing new for this member
    assert log.held() == frozenset({0, 1, 2})
    assert log.revoked() == {3, 4, 5}
    assert log.paused() == set()


def test_lost_partitions_are_gone_and_count_as_given_up() -> None:
    log = RebalanceLog()
    log.record(Change.ASSIGNED, {0, 1})
    log.record(Change.LOST, {0, 1})
    log.record(Change.ASSIGNED, {1})
    assert log.held() == frozenset({1})
    assert log.revoked() == {0, 1}
    assert log.paused() == {1}


def test_a_closed_member_holds_nothing_without_an_event() -> None:
    log = RebalanceLog()
    log.record(Change.ASSIGNED, {7})
    log.closed()
    assert log.held() == frozenset()
    assert log.events == [(Change.ASSIGNED, frozenset({7}))]
    assert log.revoked() == set()


@given(st.lists(st.tuples(st.sampled_from(list(Change)), st.frozensets(st.integers(0, 7))), max_size=30))
def test_holdings_are_replayed_from_the_events(events: list[tuple[Change, frozenset[int]]]) -> None:
    log = RebalanceLog()
    for kind, parts in events:
        log.record(kind, parts)
    held: set[int] = set()
    for kind, parts in log.events:
        held = held | parts if kind is Change.ASSIGNED else held - parts
    assert log.held() == held
    assert log.paused() <= log.revoked()


def test_records_from_callback_threads_are_all_kept() -> None:
    log = RebalanceLog()

    def churn(p: int) -> None:
        for _ in range(200):
            log.record(Change.ASSIGNED, {p})
            log.record(Change.REVOKED, {p})

    threads = [threading.Thread(target=churn, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(log.events) == 4 * 400 and log.held() == frozenset()


def test_bad_arguments_are_refused_before_a_client_is_built() -> None:
    with pytest.raises(ValueError, match="per_second must be > 0"):
        PacedProducer("127.0.0.1:1", "t", per_second=0)
    with pytest.raises(ValueError, match="limit >= 0"):
        PacedProducer("127.0.0.1:1", "t", limit=-1)
    with pytest.raises(
        ValueError, match=r"assignor must be one of \['cooperative-sticky', 'range', 'roundrobin'\]"
    ):
        KafkaPythonMember("127.0.0.1:1", "g", "t", assignor="sticky")


def test_the_docstring_example_runs() -> None:
    import doctest

    from zkcoord.testing import members

    result = doctest.testmod(members)
    assert result.attempted >= 4 and result.failed == 0


class _Scripted(ClientMember):
    """A member whose client is a script of poll outcomes (the poll loop's own logic, no client involved)."""

    def __init__(self, outcomes: list[BaseException | None], **kw: Any) -> None:
        self.outcomes = outcomes
        self.polled = threading.Event()
        super().__init__("127.0.0.1:1", "g", "t", "scripted", **kw)

    def _connect(self, settings: Any) -> Any:
        return SimpleNamespace(close=lambda: None)

    def _subscribe(self) -> None:
        pass

    def _poll(self, timeout_s: float) -> None:
        if not self.outcomes:
            self.polled.set()
            self._halt.wait(timeout_s)
            return
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome


def test_a_retriable_error_ends_the_poll_thread_unless_retries_are_asked_for() -> None:
    def refused() -> KafkaConnectionError:
        return KafkaConnectionError("111 ECONNREFUSED")

    strict = _Scripted([refused()]).start()
    assert strict._thread is not None
    strict._thread.join(10)
    with pytest.raises(AssertionError, match="ECONNREFUSED"):
        strict.stop()

    patient = _Scripted([refused(), None, refused()], retry_retriable=True).start()
    assert patient.polled.wait(10)  # it polled on past both errors
    patient.stop()
    assert [type(e) for e in patient.retried] == [KafkaConnectionError] * 2

    fatal = _Scripted([refused(), ValueError("not retriable")], retry_retriable=True).start()
    assert fatal._thread is not None
    fatal._thread.join(10)
    with pytest.raises(AssertionError, match="not retriable"):
        fatal.stop()
