"""What the group service's unit tests share: a settable clock, an event-loop wait on a condition, the
classic requests they send, and a record store whose appends wait for the test's gate."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from zkcoord.group.messages import (
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from zkcoord.storage import MemoryRecordStore
from zkcoord.storage.store import RawRecord
from zkcoord.testing import wait_until

PROTOCOLS = (("range", b"sub"),)


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t


async def until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    await wait_until(predicate, timeout, what)


def join_req(member_id: str = "", client_id: str = "c", version: int = 5) -> JoinGroupRequest:
    return JoinGroupRequest(
        version, "g", 10_000, 20_000, member_id, None, "consumer", PROTOCOLS, client_id=client_id
    )


def commit_req(gen: int, member: str, offset: int) -> OffsetCommitRequest:
    part = OffsetCommitRequestPartition(0, offset, 3, "meta")
    return OffsetCommitRequest(8, "g", gen, member, (OffsetCommitRequestTopic("t", (part,)),))


class GatedStore(MemoryRecordStore):
    """Appends block until the test opens the gate (from another thread: appends run in a worker thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.blocked = threading.Event()  # an append has reached the closed gate
        self.fail = False

    def append(self, records: Sequence[RawRecord]) -> None:
        if not self.gate.is_set():
            self.blocked.set()
        if not self.gate.wait(timeout=10):
            raise TimeoutError("gate never opened")
        if self.fail:
            raise OSError("disk full")
        super().append(records)

    def load(self) -> Iterator[RawRecord]:
        return super().load()
