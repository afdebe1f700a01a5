"""`zkcoord.zk.watch.RearmedWatch` against real ZooKeeper: the value follows every change its read watched, across
a session expiry (whose watches ZooKeeper drops), and `on_change` runs only when the value changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkcoord.testing import expire_session, wait_for
from zkcoord.zk.watch import RearmedWatch, Watcher

PARENT = "/zkcoord-test/rearmed"


def test_the_value_follows_children_across_a_session_expiry(
    zk: Any, zk_client_factory: Callable[..., Any]
) -> None:
    zk.ensure_path(PARENT)
    zk.create(f"{PARENT}/a")
    client = zk_client_factory()
    changes: list[tuple[str, ...]] = []

    def read(watch: Watcher) -> tuple[str, ...]:
        return tuple(sorted(client.get_children(PARENT, watch=watch)))

    watch = RearmedWatch(client, read, (), name="test", on_change=changes.append)
    watch.start()
    try:
        assert watch.value == ("a",) and changes == [("a",)]
        zk.create(f"{PARENT}/b")  # the watch set by the first read, not a poll
        wait_for(lambda: watch.value == ("a", "b"), 10, "the watch to see b")
        expire_session(client)
        zk.create(f"{PARENT}/c")  # after the expiry: only a re-read with new watches sees it
        wait_for(lambda: watch.value == ("a", "b", "c"), 10, "the re-armed watch to see c")
        zk.delete(f"{PARENT}/a")
        wait_for(lambda: watch.value == ("b", "c"), 10, "the watch of the new session to fire again")
        assert changes == [("a",), ("a", "b"), ("a", "b", "c"), ("b", "c")]
    finally:
        watch.close()
