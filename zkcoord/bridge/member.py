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
)
from zkcoord.bridge.zk_side import ZooKeeperSide
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import member_zk
from zkcoord.zk.member_offsets import (
    CommitOutcome,
    Fetched,
    MemberOffsets,
    OffsetFetchFailed,
    ZooKeeperOffsets,
)
from zkcoord.zk.offset_store import Fenced, OffsetWriteMode, ZooKeeperOffsetStore
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

    def write_offsets(
        self, offsets: Mapping[TopicPartition, int], mode: OffsetWriteMode | None = None
    ) -> StoreReply:
        store = self._get()
        if store is None:
            error = StoreError(Store.BROKER, "BROKER_NOT_AVAILABLE", "no live broker in /brokers/ids", True)
            return StoreReply.all_failed(Store.BROKER, offsets, error)
        reply = store.write_offsets(offsets, mode)
        if reply.errors and not reply.accepted():
            self._drop()
        return reply

    def read_offsets(self, partitions: Iterable[TopicPartition] | None = None) -> StoreRead:
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
        # The member's ZooKeeper side writes only Fenced: each commit passes the versions it expects.
        self.zk = ZooKeeperSide(
            ZooKeeperOffsetStore(
                client, group, batched=batched, fenced_budget_bytes=config.multi_budget_bytes
            ),
            Fenced({}),
        )
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
            result = self.committer.commit(todo, Fenced(dict(zk_versions)))
            self._broker_checkpoints.update(result.written(Store.BROKER))
            primary |= set(result.written(self.bridge.primary))
            zk_written = result.written(Store.ZOOKEEPER)
            for tp, version in result.versions:
                landed[tp] = (zk_written[tp], version)
                zk_versions[tp] = version
            if attempt == attempts or not result.retriable:
                break
            unfinished = {o.tp for o in (*result.failures, *result.skipped)}
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
        fetched = self.committer.fetch(tps)
        if not fetched.complete:
            raise OffsetFetchFailed(
                "offset fetch incomplete: "
                + "; ".join(f"{tp.topic}-{tp.partition}: {err}" for tp, err in fetched.errors)
            )
        out: dict[TopicPartition, Fetched] = {}
        for p in fetched.partitions:
            tp = p.tp
            position = -1 if p.offset is None else p.offset
            zk = -1 if p.zookeeper is None else p.zookeeper
            self._broker_checkpoints[tp] = -1 if p.broker is None else p.broker
            out[tp] = Fetched(position, zk, fetched.versions.get(tp, -1))
        return out

    def close(self) -> None:
        self.broker.close()
