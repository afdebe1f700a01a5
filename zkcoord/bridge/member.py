"""The legacy member's side of the bridge: `offsets.storage=kafka` and dual commit through the DualCommitter —
broker and ZooKeeper in the configured order, every per-store failure kept in the CommitResult, a fetch that
takes the per-partition max of both stores.

The ZooKeeper side of a dual commit is the same fenced, versioned write as the ZooKeeper-only path, so a
member that lost a partition cannot move the new owner's offset back in either mode. The broker side is an
OffsetCommit from a committer outside broker group management (generation -1, empty member id).

Hand `member_offsets` to the member: `LegacyConsumer(config, topics, offsets=member_offsets)`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from zkcoord.bridge.broker_store import BrokerOffsetStore
from zkcoord.bridge.committer import DualCommitter
from zkcoord.bridge.policy import (
    BridgeConfig,
    CommitOrder,
    OffsetsStorage,
    Store,
    StoreError,
    StoreRead,
    StoreReply,
    as_tp,
)
from zkcoord.bridge.policy import TopicPartition as BridgeTP
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.rebalance import TopicPartition, plan_offset_commit
from zkcoord.zk import member_zk, offset_store
from zkcoord.zk.member_offsets import (
    CommitOutcome,
    Fetched,
    MemberOffsets,
    OffsetFetchFailed,
    ZooKeeperOffsets,
)
from zkcoord.zk.registry import read_brokers

log = logging.getLogger(__name__)


def member_offsets(
    config: LegacyConsumerConfig, client: member_zk.Client, group: str, batched: bool
) -> MemberOffsets:
    """The strategy `config` asks for (a `zkcoord.zk.member_offsets.OffsetsFactory`): ZooKeeper only unless
    offsets.storage=kafka or dual commit is on."""
    if config.offsets_storage == "zookeeper" and not config.dual_commit_enabled:
        return ZooKeeperOffsets(client, group, batched=batched, budget=config.multi_budget_bytes)
    bridge = BridgeConfig(
        OffsetsStorage.parse(config.offsets_storage),
        bool(config.dual_commit_enabled),
        CommitOrder.parse(config.commit_order),
    )
    return BridgedOffsets(config, client, group, bridge, batched=batched)


class _MemberZkSide:
    """ZooKeeper as a bridge OffsetStore with the member's versioned writes: a znode someone else wrote
    since this member read it is refused and reported (BAD_VERSION), never overwritten."""

    store = Store.ZOOKEEPER

    def __init__(self, client: member_zk.Client, group: str, *, batched: bool, budget: int) -> None:
        self.client = client
        self.group = group
        self.batched = batched
        self.budget = budget
        self.versions: dict[TopicPartition, int] = {}  # expected versions, set before each commit
        self.landed: dict[TopicPartition, tuple[int, int]] = {}  # (offset, new version) of the last write

    def write_offsets(self, offsets: Mapping[Any, int]) -> StoreReply:
        wanted = {TopicPartition(*as_tp(k)): int(v) for k, v in offsets.items()}
        writes = plan_offset_commit(self.group, wanted, {})
        result = offset_store.write_fenced(
            self.client, writes, self.versions, batched=self.batched, budget=self.budget
        )
        errors: dict[BridgeTP, StoreError | None] = {}
        for w in writes:
            if w.tp in result.written:
                self.landed[w.tp] = (w.offset, result.written[w.tp])
                errors[as_tp(w.tp)] = None
            else:
                errors[as_tp(w.tp)] = StoreError(
                    Store.ZOOKEEPER, "BAD_VERSION", "written by someone else since this member read it"
                )
        return StoreReply.of(Store.ZOOKEEPER, errors)

    def read_offsets(self, partitions: Iterable[Any] | None = None) -> StoreRead:
        tps = [TopicPartition(*as_tp(p)) for p in partitions or ()]
        stored = offset_store.read_versioned(self.client, self.group, tps)
        for tp, s in stored.items():
            self.versions[tp] = s.version
        return StoreRead(
            Store.ZOOKEEPER, offsets={as_tp(tp): s.offset for tp, s in stored.items() if s.offset >= 0}
        )


class _RegistryBroker:
    """The broker store, bootstrapped from `zkcoord.bootstrap.servers` or any live broker in /brokers/ids.
    After a request-level failure the connection is dropped so the next call rediscovers a broker (as the
    original disconnects its offsets channel)."""

    store = Store.BROKER

    def __init__(self, config: LegacyConsumerConfig, client: member_zk.Client, group: str) -> None:
        self.config = config
        self.client = client
        self.group = group
        self._store: BrokerOffsetStore | None = None

    def _bootstrap(self) -> str | None:
        if self.config.bootstrap_servers:
            return self.config.bootstrap_servers
        for reg in read_brokers(self.client).values():
            if reg.host and reg.port >= 0:
                return f"{reg.host}:{reg.port}"
        return None

    def _get(self) -> BrokerOffsetStore | None:
        if self._store is None:
            bootstrap = self._bootstrap()
            if bootstrap is None:
                return None
            timeout = self.config.socket_timeout_ms
            self._store = BrokerOffsetStore(
                bootstrap, self.group, request_timeout_ms=timeout, bootstrap_timeout_ms=timeout
            )
        return self._store

    def _drop(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:  # closing a broken connection must not hide the original failure
                log.debug("closing the broker offset store failed", exc_info=True)

    def write_offsets(self, offsets: Mapping[Any, int]) -> StoreReply:
        store = self._get()
        if store is None:
            error = StoreError(Store.BROKER, "BROKER_NOT_AVAILABLE", "no live broker in /brokers/ids", True)
            return StoreReply.all_failed(Store.BROKER, offsets, error)
        reply = store.write_offsets(offsets)
        if reply.errors and not reply.accepted():
            self._drop()
        return reply

    def read_offsets(self, partitions: Iterable[Any] | None = None) -> StoreRead:
        store = self._get()
        if store is None:
            error = StoreError(Store.BROKER, "BROKER_NOT_AVAILABLE", "no live broker in /brokers/ids", True)
            return StoreRead(Store.BROKER, request_error=error)
        read = store.read_offsets(partitions)
        if read.request_error is not None:
            self._drop()
        return read

    def close(self) -> None:
        self._drop()


class BridgedOffsets:
    """offsets.storage=kafka (and/or dual commit): commits through DualCommitter in the configured order;
    fetches the per-partition max of the stores read, refusing to guess when a store did not answer."""

    def __init__(
        self,
        config: LegacyConsumerConfig,
        client: member_zk.Client,
        group: str,
        bridge: BridgeConfig,
        *,
        batched: bool,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bridge = bridge
        self.backoff_ms = config.offsets_channel_backoff_ms
        self._sleep = sleep
        self.group = group
        self.zk = _MemberZkSide(client, group, batched=batched, budget=config.multi_budget_bytes)
        self.broker = _RegistryBroker(config, client, group)
        self.committer = DualCommitter(self.zk, self.broker, bridge.commit_order, bridge)
        self._writes_zk = Store.ZOOKEEPER in bridge.write_order()
        self._broker_checkpoints: dict[TopicPartition, int] = {}

    def commit(
        self,
        consumed: Mapping[TopicPartition, int],
        checkpoints: Mapping[TopicPartition, int],
        versions: Mapping[TopicPartition, int],
        check_session: Callable[[], None],
        retries: int = 0,
    ) -> CommitOutcome:
        """As the 0.8.2 consumer's commitOffsets: up to 1 + `retries` attempts while what is left failed
        retriably (a broker down, NOT_COORDINATOR, ...), offsets.channel.backoff.ms apart; each retry sends only
        the partitions not yet written everywhere, so a broker error on the first attempt does not leave
        ZooKeeper behind once the broker answers (broker-first order writes ZooKeeper after the broker)."""
        # A partition is sent when either store it goes to is behind, so a store that missed a commit (the
        # broker was down) is healed by the next one even if nothing was consumed meanwhile.
        todo = {
            tp: off
            for tp, off in consumed.items()
            if self._broker_checkpoints.get(tp) != off or (self._writes_zk and checkpoints.get(tp) != off)
        }
        if not todo:
            return CommitOutcome()
        zk_versions = dict(versions)
        landed: dict[TopicPartition, tuple[int, int]] = {}
        primary: set[TopicPartition] = set()
        attempts = 1 + max(retries, 0)
        for attempt in range(1, attempts + 1):
            check_session()
            self.zk.versions = zk_versions
            self.zk.landed = {}
            result = self.committer.commit(todo)
            for btp, off in result.written(Store.BROKER).items():
                self._broker_checkpoints[TopicPartition(*btp)] = off
            primary |= {TopicPartition(*btp) for btp in result.written(self.bridge.primary)}
            for tp, (off, version) in self.zk.landed.items():
                landed[tp] = (off, version)
                zk_versions[tp] = version
            if attempt == attempts or not result.retriable:
                break
            unfinished = {TopicPartition(*o.tp) for o in (*result.failures, *result.skipped)}
            todo = {tp: off for tp, off in todo.items() if tp in unfinished}
            log.info(
                "group=%s commit attempt %d of %d incomplete, retrying in %d ms: %s",
                self.group,
                attempt,
                attempts,
                self.backoff_ms,
                "; ".join(result.describe()),
            )
            self._sleep(self.backoff_ms / 1000.0)
        return CommitOutcome(landed, len(primary), result)

    def fetch(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, Fetched]:
        if not tps:
            return {}
        self.zk.versions = {}
        fetched = self.committer.fetch(tps)
        if not fetched.complete:
            raise OffsetFetchFailed(
                "offset fetch incomplete: "
                + "; ".join(f"{tp.topic}-{tp.partition}: {err}" for tp, err in fetched.errors)
            )
        out: dict[TopicPartition, Fetched] = {}
        for p in fetched.partitions:
            tp = TopicPartition(p.tp.topic, p.tp.partition)
            position = -1 if p.offset is None else p.offset
            zk = -1 if p.zookeeper is None else p.zookeeper
            self._broker_checkpoints[tp] = -1 if p.broker is None else p.broker
            out[tp] = Fetched(position, zk, self.zk.versions.get(tp, -1))
        return out

    def close(self) -> None:
        self.broker.close()
