"""The dual-commit edge: carries out a CommitPlan against real stores in the planned order and returns
the CommitResult; reads both stores and returns the per-partition max with every error beside it.

A store exception never escapes as an exception: it becomes a request-level StoreError on every
partition of that step, so the caller always gets a complete, honest result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from zkcoord.bridge.policy import (
    BridgeConfig,
    CommitOrder,
    CommitResult,
    FetchResult,
    OffsetsStorage,
    Store,
    StoreError,
    StoreRead,
    StoreReply,
    TopicPartition,
    as_tp,
    combine_commit,
    combine_fetch,
    gated_offsets,
    plan_commit,
)
from zkcoord.zk.offset_store import OffsetWriteMode

log = logging.getLogger(__name__)


class OffsetStore(Protocol):
    """The one offset-store protocol of the bridge: ZooKeeperSide (the one ZooKeeper implementation) and
    BrokerOffsetStore implement it. `mode` says how a write treats what is stored (None: the store's own);
    `Fenced(versions)` carries the versions a member's write expects, and the reply the versions it left."""

    store: Store

    def write_offsets(
        self, offsets: Mapping[TopicPartition, int], mode: OffsetWriteMode | None = None
    ) -> StoreReply: ...

    def read_offsets(self, partitions: Iterable[TopicPartition] | None = None) -> StoreRead: ...


def error_from_exception(store: Store, exc: BaseException) -> StoreError:
    retriable = bool(getattr(exc, "retriable", False))
    name = getattr(exc, "errno_name", None) or type(exc).__name__
    return StoreError(store, str(name), str(exc), retriable)


class DualCommitter:
    """`commit({tp: offset}) -> CommitResult` over a ZooKeeper store and a broker store, in `order`.

    `config` defaults to the migration phase: offsets.storage=kafka, dual commit on, the given order.
    """

    def __init__(
        self,
        zk_store: OffsetStore | None,
        broker_store: OffsetStore | None,
        order: CommitOrder = CommitOrder.BROKER_FIRST,
        config: BridgeConfig | None = None,
    ) -> None:
        self.config = config or BridgeConfig(OffsetsStorage.KAFKA, True, order)
        self.stores: dict[Store, OffsetStore] = {}
        if zk_store is not None:
            self.stores[Store.ZOOKEEPER] = zk_store
        if broker_store is not None:
            self.stores[Store.BROKER] = broker_store
        for needed in set(self.config.write_order()) | set(self.config.read_stores()):
            if needed not in self.stores:
                raise ValueError(f"configuration needs the {needed.value} store but none was given")

    def commit(self, offsets: Mapping[Any, int], zk_mode: OffsetWriteMode | None = None) -> CommitResult:
        """`zk_mode`: how the ZooKeeper write treats what is stored (None: that store's own mode); a member's
        `Fenced(versions)` makes it versioned, and the result's `versions` are what it left."""
        plan = plan_commit(self.config, offsets)
        replies: dict[Store, StoreReply] = {}
        for write in plan.writes:
            to_send = dict(gated_offsets(write, replies))
            if not to_send:
                replies[write.store] = StoreReply(write.store, ())
                continue
            try:
                store = self.stores[write.store]
                if write.store is Store.ZOOKEEPER and zk_mode is not None:
                    replies[write.store] = store.write_offsets(to_send, zk_mode)
                else:
                    replies[write.store] = store.write_offsets(to_send)
            except Exception as exc:  # an edge failure is reported per partition, never hidden
                log.warning("commit to %s failed: %s", write.store.value, exc)
                replies[write.store] = StoreReply.all_failed(
                    write.store, to_send, error_from_exception(write.store, exc)
                )
        result = combine_commit(plan, replies, self.config.primary)
        for line in result.describe():
            log.warning("dual commit: %s", line)
        return result

    def fetch(self, partitions: Iterable[Any]) -> FetchResult:
        tps = sorted({as_tp(p) for p in partitions})
        reads = []
        for store in self.config.read_stores():
            try:
                reads.append(self.stores[store].read_offsets(tps))
            except Exception as exc:
                reads.append(StoreRead(store, request_error=error_from_exception(store, exc)))
        return combine_fetch(tps, reads)
