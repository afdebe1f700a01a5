"""A value read from ZooKeeper and kept current by the one-shot watches its read sets, re-armed by every read and
read again once a new session replaces an expired one (whose watches ZooKeeper dropped): the recipe behind the
proxy's live brokers and its hand-offs.

`read(watch)` must pass `watch` to every ZooKeeper call whose change should trigger the next read; it returns the
value, which `RearmedWatch.value` holds (replaced whole: safe to read from any thread). `on_change(value)` runs
after a read that changed it, outside the lock, on the thread that read (kazoo's callback thread after a watch).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kazoo.protocol.states import KazooState

from zkcoord.zk.session import Client

log = logging.getLogger(__name__)

T = TypeVar("T")
Watcher = Callable[[Any], None]


class RearmedWatch(Generic[T]):
    """`start()` reads (errors propagate: the caller decides whether it can start without the value); later
    reads, from watches and after a session loss, log a failure and wait for the next change or reconnection."""

    def __init__(
        self,
        client: Client,
        read: Callable[[Watcher], T],
        initial: T,
        *,
        name: str,
        on_change: Callable[[T], None] | None = None,
    ) -> None:
        self.client = client
        self.value: T = initial
        self._read_fn = read
        self._on_change = on_change
        self._name = name
        self._lock = threading.Lock()
        self._closed = False
        self._lost = False

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self._read()

    def close(self) -> None:
        self._closed = True
        self.client.remove_listener(self._on_state)

    def _on_state(self, state: KazooState) -> None:
        """Watches go with an expired session: once connected again after a loss, read (and watch) again. A
        listener must not block kazoo's connection thread, so the read runs on the client's handler."""
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost and not self._closed:
            self._lost = False
            self.client.handler.spawn(self._on_watch, None)

    def _on_watch(self, event: Any) -> None:
        if self._closed:
            return
        try:
            self._read()
        except Exception as exc:  # the next change or reconnection reads again
            log.warning("%s: re-reading failed: %r", self._name, exc)

    def _read(self) -> None:
        with self._lock:
            found = self._read_fn(self._on_watch)
            changed = found != self.value
            self.value = found
        if changed and self._on_change is not None:
            self._on_change(found)
