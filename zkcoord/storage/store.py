"""The `RecordStore` protocol the coordinator edge writes through, and an in-memory store for tests and benchmarks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

RawRecord = tuple[bytes, bytes | None]  # (key, value); value None = tombstone


class RecordStore(Protocol):
    """An append-only log of (key, value|None) records.

    `append` returns only once the records are as durable as the store's policy promises, and either all of them
    are stored or it raises. `load` yields every stored record in append order (torn tails already dropped).
    """

    def append(self, records: Sequence[RawRecord]) -> None: ...

    def load(self) -> Iterator[RawRecord]: ...

    def close(self) -> None: ...


class MemoryRecordStore:
    """Keeps records in a list: no durability, for tests and in-process benchmarks."""

    def __init__(self) -> None:
        self.records: list[RawRecord] = []

    def append(self, records: Sequence[RawRecord]) -> None:
        self.records.extend(records)

    def load(self) -> Iterator[RawRecord]:
        return iter(list(self.records))

    def close(self) -> None:
        pass
