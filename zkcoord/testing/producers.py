"""The test kit's paced producer: a kafka-python producer that writes numbered records at a steady rate from its own
thread, at most `limit` of them, and remembers every acknowledged record, so a test can require each one consumed.

    producer = PacedProducer(bootstrap, "orders", per_second=100).start()
    ...members join, leave, crash...
    producer.stop()                                # flushed: every record is acknowledged or in `failed`
    wait_for(lambda: producer.acked <= consumed(), 30, "every acknowledged record consumed")
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

DEFAULT_LIMIT = 100_000  # records; at 100/s a quarter of an hour: memory stays bounded in a test that hangs


class PacedProducer:
    """Record i has key b"k<i>" and value `prefix` + b"<i>". `per_second` paces the thread (a schedule, so a
    slow send is caught up, but never more than a second's worth at once); `round_robin=True` sends record i to
    the i-th of the partitions the producer's own metadata knows (so a partition increase is followed once its
    metadata refreshes), otherwise the client's partitioner hashes the key. `config` goes to `KafkaProducer`
    over the defaults `linger_ms=5, retries=5`."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        per_second: float = 100.0,
        limit: int = DEFAULT_LIMIT,
        round_robin: bool = False,
        prefix: bytes = b"r",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        from kafka import KafkaProducer

        if per_second <= 0 or limit < 0:
            raise ValueError(f"per_second must be > 0 and limit >= 0, not {per_second} and {limit}")
        self.client = KafkaProducer(
            bootstrap_servers=bootstrap, **{"linger_ms": 5, "retries": 5, **(config or {})}
        )
        self.topic = topic
        self.per_second = per_second
        self.limit = limit
        self.round_robin = round_robin
        self.prefix = prefix
        self.sent = 0
        self.failed: list[BaseException] = []
        self.elapsed = 0.0  # seconds from start() to stop()
        self._acked: dict[tuple[int, int], bytes] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"paced-producer-{topic}", daemon=True)
        self._started: float | None = None
        self._closed = False

    # --- what was acknowledged ----------------------------------------------------------------------------------

    @property
    def acked(self) -> frozenset[tuple[int, int]]:
        """Every acknowledged record's (partition, offset)."""
        with self._lock:
            return frozenset(self._acked)

    @property
    def acked_values(self) -> frozenset[bytes]:
        with self._lock:
            return frozenset(self._acked.values())

    def acked_records(self) -> dict[tuple[int, int], bytes]:
        """Every acknowledged record's (partition, offset) -> value (a consumer that prints values only is
        checked against it)."""
        with self._lock:
            return dict(self._acked)

    def ends(self) -> dict[int, int]:
        """Per partition, the log end the acknowledgements prove (last acknowledged offset + 1)."""
        out: dict[int, int] = {}
        for p, o in self.acked:
            out[p] = max(out.get(p, 0), o + 1)
        return out

    def known_partitions(self) -> int:
        """How many partitions of the topic the producer's metadata shows."""
        return len(self.client.partitions_for(self.topic) or ())

    # --- sending ------------------------------------------------------------------------------------------------

    def _send(self) -> Any | None:
        """Send the next record; None when round-robin finds no partition in the metadata yet."""
        partition = None
        if self.round_robin:
            parts = sorted(self.client.partitions_for(self.topic) or ())
            if not parts:
                return None
            partition = parts[self.sent % len(parts)]
        i = self.sent
        value = self.prefix + b"%d" % i
        future = self.client.send(self.topic, key=b"k%d" % i, value=value, partition=partition)
        self.sent += 1
        future.add_callback(self._on_ack, value).add_errback(self.failed.append)
        return future

    def _on_ack(self, value: bytes, meta: Any) -> None:
        with self._lock:
            self._acked[(meta.partition, meta.offset)] = value

    def burst(self, n: int, timeout: float = 30.0) -> None:
        """Send `n` records from the calling thread and return once each is acknowledged (e.g. to create the
        topic, or a backlog, before `start()`)."""
        futures = [f for _ in range(n) if (f := self._send()) is not None]
        self.client.flush(timeout)
        for future in futures:
            future.get(timeout)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._halt.is_set() and self.sent < self.limit:
            self._send()
            next_at += 1 / self.per_second
            ahead = next_at - time.monotonic()
            if ahead > 0:
                self._halt.wait(ahead)  # pacing, not synchronisation
            elif ahead < -1.0:
                next_at = time.monotonic()  # after a stall: no burst of more than a second's worth

    # --- life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> PacedProducer:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop sending, flush (a record still unacknowledged after `timeout` lands in `failed`) and close;
        idempotent."""
        if self._closed:
            return
        self._closed = True
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join(60)
        if self._started is not None:
            self.elapsed = time.monotonic() - self._started
        try:
            self.client.flush(timeout)
        except (
            Exception
        ) as exc:  # kafka-python's KafkaTimeoutError: reported, not raised from a finally block
            self.failed.append(exc)
        self.client.close(5)

    def __enter__(self) -> PacedProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["DEFAULT_LIMIT", "PacedProducer"]
