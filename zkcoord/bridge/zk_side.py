"""ZooKeeper as the bridge's `OffsetStore`: the one ZooKeeper implementation, over the one writer of offset znodes
(zkcoord.zk.offset_store), its results in bridge terms; what a write does is its `OffsetWriteMode`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from zkcoord.bridge.policy import Store, StoreError, StoreRead, StoreReply, TopicPartition
from zkcoord.zk.offset_store import OffsetWriteMode, WriteMode, ZooKeeperOffsetStore

STALE_MESSAGE = "written by someone else since this member read it"


class ZooKeeperSide:
    """The OffsetStore protocol over ZooKeeperOffsetStore, writing in `mode` unless a call names its own.

    A partition counts as accepted when the store holds at least what was asked: written, already at the value,
    or (NEVER_REGRESS) kept higher. A failed write is WRITE_FAILED (retriable); a `Fenced` write refused because
    someone else wrote the znode is BAD_VERSION (not retriable: the partition is no longer this member's)."""

    store = Store.ZOOKEEPER

    def __init__(self, offsets: ZooKeeperOffsetStore, mode: OffsetWriteMode = WriteMode.OVERWRITE) -> None:
        self.offsets = offsets
        self.mode = mode

    @classmethod
    def for_group(cls, client: Any, group: str, mode: OffsetWriteMode = WriteMode.OVERWRITE) -> ZooKeeperSide:
        return cls(ZooKeeperOffsetStore(client, group), mode)

    def write_offsets(
        self, offsets: Mapping[TopicPartition, int], mode: OffsetWriteMode | None = None
    ) -> StoreReply:
        report = self.offsets.write(offsets, self.mode if mode is None else mode)
        errors: dict[TopicPartition, StoreError | None] = {}
        for tp in offsets:
            if tp in report.errors:
                errors[tp] = StoreError(Store.ZOOKEEPER, "WRITE_FAILED", report.errors[tp], retriable=True)
            elif tp in report.stale:
                errors[tp] = StoreError(Store.ZOOKEEPER, "BAD_VERSION", STALE_MESSAGE)
            else:
                errors[tp] = None
        return StoreReply.of(Store.ZOOKEEPER, errors, report.versions)

    def read_offsets(self, partitions: Iterable[TopicPartition] | None = None) -> StoreRead:
        read = self.offsets.read(partitions)
        return StoreRead(
            Store.ZOOKEEPER,
            offsets=dict(read.offsets),
            errors={
                tp: StoreError(Store.ZOOKEEPER, "MALFORMED_ZNODE", str(exc))
                for tp, exc in read.errors.items()
            },
            versions=dict(read.versions),
        )
