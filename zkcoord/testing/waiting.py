"""Waiting on a condition from a coroutine: the asyncio counterpart of `zkcoord.testing.wait_for`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def wait_until(
    predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.001
) -> None:
    """Check `predicate` until true, letting the event loop (and other threads) run between checks; raise
    AssertionError naming `what` after `timeout` seconds of the loop's clock."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        await asyncio.sleep(interval)
