"""The one place that decides retries on the ZooKeeper edge: errors are sorted into retry / session-expired /
never, and every policy is a tenacity `Retrying` with an injectable `sleep` so tests and benchmarks control time.

Policies:
* `zk_operation` — one ZooKeeper call retried on connection loss / timeouts (jittered exponential backoff,
  bounded by a deadline); a session expiry or any other error goes straight to the caller.
* `faithful_rebalance` — the original `syncedRebalance` loop: `rebalance.max.retries` attempts with a fixed
  `rebalance.backoff.ms` sleep between them, then `RebalanceFailed` (the original's
  `ConsumerRebalanceFailedException`).
* `fast_rebalance` — retries until the member owns its share (or it is told to stop), with a short jittered
  backoff; attempts that waited on a conflicting owner znode already spent their time waiting, not sleeping.
"""

from __future__ import annotations

import enum
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import tenacity
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from zkcoord.errors import ZkcoordError

log = logging.getLogger(__name__)
T = TypeVar("T")
Sleep = Callable[[float], None]


class ErrorClass(enum.Enum):
    RETRY = "retry"  # transient: same session, try again
    SESSION_EXPIRED = "session-expired"  # ephemerals are gone: re-register and rebalance, never plain retry
    NEVER = "never"  # a bug, bad data or a decision: surface it


class RebalanceFailed(ZkcoordError):
    """A faithful-mode member gave up after `rebalance.max.retries` attempts (the original's
    ConsumerRebalanceFailedException); it stays registered and owns nothing until the next event."""

    retriable = True

    def __init__(self, consumer_id: str, attempts: int, last: BaseException | None) -> None:
        why = f": last error {type(last).__name__}: {last}" if last is not None else ""
        super().__init__(f"{consumer_id} can't rebalance after {attempts} retries{why}")
        self.consumer_id = consumer_id
        self.attempts = attempts
        self.last = last


class RebalanceStopped(ZkcoordError):
    """The rebalance loop was asked to stop (shutdown or a newer event) between attempts."""

    retriable = False


class SessionMoved(ZkcoordError):
    """The ZooKeeper session changed (expired) in the middle of an operation; its results are stale."""

    retriable = False


def classify(exc: BaseException) -> ErrorClass:
    """Which way an error goes: the only decision point for retries on the ZooKeeper edge."""
    if isinstance(
        exc, ConnectionClosedError
    ):  # a SessionExpiredError subclass: the client was stopped on purpose
        return ErrorClass.NEVER
    if isinstance(exc, SessionExpiredError | SessionMoved):
        return ErrorClass.SESSION_EXPIRED
    if isinstance(exc, ConnectionLoss | OperationTimeoutError | KazooTimeoutError):
        return ErrorClass.RETRY
    if isinstance(exc, ZkcoordError):
        return ErrorClass.RETRY if exc.retriable else ErrorClass.NEVER
    return ErrorClass.NEVER


def is_retriable(exc: BaseException) -> bool:
    return classify(exc) is ErrorClass.RETRY


def zk_operation(
    *,
    deadline_s: float = 10.0,
    first_ms: float = 50.0,
    max_ms: float = 1000.0,
    sleep: Sleep = time.sleep,
) -> tenacity.Retrying:
    """Retry one ZooKeeper call on transient errors (connection loss, timeouts) until `deadline_s`."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_retriable),
        wait=tenacity.wait_random_exponential(multiplier=first_ms / 1000.0, max=max_ms / 1000.0),
        stop=tenacity.stop_after_delay(deadline_s),
        sleep=sleep,
        reraise=True,
    )


def call(fn: Callable[..., T], *args: Any, policy: tenacity.Retrying | None = None, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` under `policy` (default: `zk_operation()`)."""
    return (policy or zk_operation())(fn, *args, **kwargs)


def faithful_rebalance(
    *,
    consumer_id: str,
    max_retries: int,
    backoff_ms: int,
    should_stop: Callable[[], bool] = lambda: False,
    sleep: Sleep = time.sleep,
    on_attempt_failed: Callable[[int, BaseException | None], None] | None = None,
) -> tenacity.Retrying:
    """`max_retries` attempts of a rebalance callable returning True when done, sleeping `backoff_ms` after
    each failed attempt (including the last, as `syncedRebalance` does); then RebalanceFailed."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_attempt_failed is not None:
            fut = state.outcome
            on_attempt_failed(
                state.attempt_number, fut.exception() if fut is not None and fut.failed else None
            )

    def stop(state: tenacity.RetryCallState) -> bool:
        return should_stop() or state.attempt_number >= max_retries

    def give_up(state: tenacity.RetryCallState) -> bool:
        fut = state.outcome
        last = fut.exception() if fut is not None and fut.failed else None
        if should_stop():
            raise RebalanceStopped(f"{consumer_id}: rebalance stopped after {state.attempt_number} attempts")
        # The original sleeps after the final failed attempt too, then throws.
        sleep(backoff_ms / 1000.0)
        raise RebalanceFailed(consumer_id, state.attempt_number, last)

    return tenacity.Retrying(
        retry=tenacity.retry_if_result(lambda r: r is not True) | tenacity.retry_if_exception(_retry_exc),
        wait=tenacity.wait_fixed(backoff_ms / 1000.0),
        stop=stop,
        sleep=sleep,
        before_sleep=before_sleep,
        retry_error_callback=give_up,
    )


def _retry_exc(exc: BaseException) -> bool:
    return classify(exc) is not ErrorClass.SESSION_EXPIRED and not isinstance(
        exc, RebalanceStopped | ConnectionClosedError
    )


def fast_rebalance(
    *,
    should_stop: Callable[[], bool],
    first_ms: float = 5.0,
    max_ms: float = 500.0,
    sleep: Sleep = time.sleep,
    rng: random.Random | None = None,
    on_attempt_failed: Callable[[int, BaseException | None], None] | None = None,
) -> tenacity.Retrying:
    """Retry a rebalance callable until it returns True or `should_stop()`; jittered exponential backoff so
    members that failed together do not retry in lock step."""
    jitter = rng or random.Random()

    def wait(state: tenacity.RetryCallState) -> float:
        ceiling = min(max_ms, first_ms * (2 ** min(state.attempt_number - 1, 16)))
        return jitter.uniform(ceiling / 2.0, ceiling) / 1000.0

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_attempt_failed is not None:
            fut = state.outcome
            on_attempt_failed(
                state.attempt_number, fut.exception() if fut is not None and fut.failed else None
            )

    def give_up(state: tenacity.RetryCallState) -> bool:
        raise RebalanceStopped(f"rebalance stopped after {state.attempt_number} attempts")

    return tenacity.Retrying(
        retry=tenacity.retry_if_result(lambda r: r is not True) | tenacity.retry_if_exception(_retry_exc),
        wait=wait,
        stop=lambda _state: should_stop(),
        sleep=sleep,
        before_sleep=before_sleep,
        retry_error_callback=give_up,
    )


__all__ = [
    "ErrorClass",
    "RebalanceFailed",
    "RebalanceStopped",
    "SessionMoved",
    "call",
    "classify",
    "faithful_rebalance",
    "fast_rebalance",
    "is_retriable",
    "zk_operation",
]
