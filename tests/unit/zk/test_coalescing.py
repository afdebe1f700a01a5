"""The coalescing worker shared by the controller and the cluster node, with a toy table: events fed during a pass
merge into one next pass, a decisive move is refused once the generation moved, the idle event fires when
nothing is due, close() stops after the pass in progress. Synchronised on events, never on sleeps."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from zkcoord.zk.coalescing import CoalescingWorker

DEADLINE_S = 10.0


def table(state: str, event: str) -> tuple[str, frozenset[str]]:
    if event == "close":
        return "closed", frozenset()
    if event == "go":
        return "on", frozenset()
    if event == "stale":
        return state, frozenset({"again"})
    if event == "stop":
        return "off", frozenset({"notify"})
    return state, frozenset({event})  # any other event asks for work of its own name


class Harness:
    def __init__(self, idle_s: float = 60.0) -> None:
        self.passes: list[frozenset[str]] = []
        self.generations: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.done = threading.Condition()
        self.exited = threading.Event()
        self.worker: CoalescingWorker[str, str, str] = CoalescingWorker(
            "test-worker",
            table,
            "off",
            self.run_pass,
            idle_event="idle",
            idle_s=lambda: idle_s,
            initial_work=frozenset({"first"}),
            on_exit=self.exited.set,
        )

    def run_pass(self, work: frozenset[str], generation: int) -> None:
        self.entered.set()
        assert self.release.wait(DEADLINE_S)
        with self.done:
            self.passes.append(work)
            self.generations.append(generation)
            self.done.notify_all()

    def wait_passes(self, n: int) -> None:
        with self.done:
            assert self.done.wait_for(lambda: len(self.passes) >= n, DEADLINE_S), self.passes


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.release.set()
    harness.worker.close("close")


def test_events_fed_during_a_pass_merge_into_one_next_pass(h: Harness) -> None:
    h.release.clear()
    h.worker.start()
    assert h.entered.wait(DEADLINE_S)  # the first pass runs and is held
    for event in ("a", "b", "a", "c", "b"):
        h.worker.feed(event)
    h.release.set()
    h.wait_passes(2)
    assert h.passes == [frozenset({"first"}), frozenset({"a", "b", "c"})]


def test_a_decisive_move_needs_the_generation_the_pass_began_in(h: Harness) -> None:
    worker = h.worker
    generation = worker.generation
    assert worker.feed_if_current(generation, "go", "stale", lambda: True)
    assert worker.state == "on"
    worker.feed_connection("stop")  # the listener: a new generation, stop first
    assert worker.state == "off"
    assert not worker.feed_if_current(generation, "go", "stale", lambda: True)  # a pass of the old one
    assert worker.state == "off"
    assert not worker.feed_if_current(worker.generation, "go", "stale", lambda: False)  # not ready
    assert worker.state == "off"
    worker.start()
    h.wait_passes(1)
    assert h.passes[0] == {"first", "notify", "again"}  # the refusals asked for another pass


def test_the_idle_event_fires_when_nothing_is_due() -> None:
    h = Harness(idle_s=0.01)
    h.worker.start()
    try:
        h.wait_passes(2)
        assert h.passes[:2] == [frozenset({"first"}), frozenset({"idle"})]
    finally:
        h.worker.close("close")


def test_close_feeds_its_event_waits_for_the_pass_and_runs_on_exit(h: Harness) -> None:
    h.release.clear()
    h.worker.start()
    assert h.entered.wait(DEADLINE_S)
    h.worker.feed("go")
    closer = threading.Thread(target=lambda: h.worker.close("close"))
    closer.start()
    with h.worker.cond:  # close() fed its event under the lock before it waits for the thread
        assert h.worker.cond.wait_for(lambda: h.worker.closing, DEADLINE_S)
    assert h.worker.state == "closed" and not h.exited.is_set()  # the held pass is still running
    h.release.set()
    closer.join(DEADLINE_S)
    assert h.exited.is_set() and len(h.passes) == 1  # no pass after close
