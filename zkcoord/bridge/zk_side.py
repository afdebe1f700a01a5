"""ZooKeeper as an OffsetStore for the dual committer: the zkcoord.zk offset store, results in bridge terms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from zkcoord.bridge.policy import Store, StoreError, StoreRead, StoreReply, TopicPartition, as_tp
from zkcoord.zk.offset_store import WriteMode, ZooKeeperOffsetStore


class ZooKeeperSide:
    """Adapts ZooKeeperOffsetStore to the OffsetStore protocol. In NEVER_REGRESS mode a partition whose
    stored offset is already higher counts as accepted (the store holds at least what was asked)."""

    store = Store.ZOOKEEPER

    def __init__(self, offsets: ZooKeeperOffsetStore, mode: WriteMode = WriteMode.OVERWRITE) -> None:
        self.offsets = offsets
        self.mode = mode

    @classmethod
    def for_group(cls, client: Any, group: str, mode: WriteMode = WriteMode.OVERWRITE) -> ZooKeeperSide:
        return cls(ZooKeeperOffsetStore(client, group), mode)

    def write_offsets(self, offsets: Mapping[TopicPartition, int]) -> StoreReply:
        report = self.offsets.write({as_tp(k): v for k, v in offsets.items()}, self.mode)
        errors: dict[TopicPartition, StoreError | None] = {}
        for key in offsets:
            tp = as_tp(key)
            if tp in report.errors:
                errors[tp] = StoreError(Store.ZOOKEEPER, "WRITE_FAILED", report.errors[tp], retriable=True)
            else:
                errors[tp] = None
        return StoreReply.of(Store.ZOOKEEPER, errors)

    def read_offsets(self, partitions: Iterable[TopicPartition] | None = None) -> StoreRead:
        read = self.offsets.read(partitions)
        return StoreRead(
            Store.ZOOKEEPER,
            offsets={TopicPartition(*tp): v for tp, v in read.offsets.items()},
            errors={
                TopicPartition(*tp): StoreError(Store.ZOOKEEPER, "MALFORMED_ZNODE", str(exc))
                for tp, exc in read.errors.items()
            },
        )
