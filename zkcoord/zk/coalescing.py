"""The one coalescing worker of the ZooKeeper runtimes (the controller, the cluster node): it owns a lifecycle's
state, the work the state's events asked for (merged into one set, so a burst of watch events makes one pass) and
the connection generation, all under one lock; it runs one pass at a time on its thread.

The runtime gives the pure transition function (`transition(state, event) -> (state, work)`, e.g.
`zkcoord.zk.controller_state.transition`) and the pass. Events come from any thread through `feed` (kazoo's
callbacks must only feed, never call ZooKeeper); connection state changes through `feed_connection`, which also
bumps the generation: whatever a running pass read before that instant no longer counts, so the pass may make a
decisive transition (becoming active, serving again) only through `feed_if_current`, checked and applied under
the same lock as the listener's step-down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

S = TypeVar("S")
E = TypeVar("E")
W = TypeVar("W")


class CoalescingWorker(Generic[S, E, W]):
    """`start()` the thread, `feed` events, `close()` to stop (the pass in progress finishes first).

    `run_pass(work, generation)` runs on the worker thread with the work taken (the set is empty only if
    `idle_event` asked for none). When nothing is due for `idle_s()` seconds (called under the lock), the worker
    feeds `idle_event` (a periodic resync: a missed watch never strands anything). `on_exit()` runs last on the
    worker thread.
    """

    def __init__(
        self,
        name: str,
        transition: Callable[[S, E], tuple[S, frozenset[W]]],
        initial: S,
        run_pass: Callable[[frozenset[W], int], None],
        *,
        idle_event: E,
        idle_s: Callable[[], float],
        initial_work: frozenset[W] = frozenset(),
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.cond = threading.Condition()  # guards state, work, generation; runtimes guard their own data too
        self._transition = transition
        self._state = initial
        self._work: set[W] = set(initial_work)
        self._generation = 0
        self._closing = False
        self._run_pass = run_pass
        self._idle_event = idle_event
        self._idle_s = idle_s
        self._on_exit = on_exit
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> S:
        return self._state

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def closing(self) -> bool:
        return self._closing

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def close(self, event: E | None = None, timeout: float = 10) -> S:
        """Stop taking work (after feeding `event`, e.g. the lifecycle's CLOSE) and wait for the thread; returns
        the state `event` found (read and changed under the lock)."""
        with self.cond:
            before = self._state
            if event is not None:
                self._apply(event)
            self._closing = True
            self.cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)
        return before

    def feed(self, event: E) -> S:
        """Apply `event` (any thread); returns the new state."""
        with self.cond:
            return self._apply(event)

    def feed_connection(self, event: E) -> S:
        """A connection state change: a new generation, then `event`."""
        with self.cond:
            self._generation += 1
            return self._apply(event)

    def feed_if_current(
        self, generation: int, event: E, otherwise: E | None, ready: Callable[[], bool]
    ) -> bool:
        """Apply `event` only if the generation is still `generation`, the worker is not closing and `ready()`
        (checked under the lock); else apply `otherwise` (if any). True when `event` was applied."""
        with self.cond:
            if generation == self._generation and not self._closing and ready():
                self._apply(event)
                return True
            if otherwise is not None:
                self._apply(otherwise)
            return False

    def backoff(self, seconds: float) -> None:
        """Wait on the worker thread after a failed pass; any feed or close ends the wait early."""
        with self.cond:
            if not self._closing:
                self.cond.wait(timeout=seconds)

    def _apply(self, event: E) -> S:
        self._state, work = self._transition(self._state, event)
        if work:
            self._work |= work
            self.cond.notify_all()
        return self._state

    def _run(self) -> None:
        try:
            while True:
                with self.cond:
                    while not (self._closing or self._work):
                        if not self.cond.wait(timeout=self._idle_s()):
                            self._apply(self._idle_event)
                    if self._closing:
                        return
                    work = frozenset(self._work)
                    self._work.clear()
                    generation = self._generation
                self._run_pass(work, generation)
        finally:
            if self._on_exit is not None:
                self._on_exit()
