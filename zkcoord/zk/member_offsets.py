"""The legacy member's offset storage: the protocol every strategy follows (`MemberOffsets`) and the default,
ZooKeeper only (versioned writes: a member that lost a partition cannot move the new owner's offset back).

`offsets.storage=kafka` and dual commit are the bridge's (zkcoord.bridge.member.member_offsets), handed to the member
by whoever builds it; this package does not import the bridge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.rebalance import TopicPartition, plan_offset_commit
from zkcoord.zk import member_zk
from zkcoord.zk.offset_store import Fenced, ZooKeeperOffsetStore

log = logging.getLogger(__name__)


class OffsetFetchFailed(ZkcoordError):
    """A store of record did not answer an offset fetch; the rebalance attempt is retried (as the original
    loops on OffsetFetch) rather than starting from a possibly older offset."""

    retriable = True


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a new owner starts from: `position` (-1 none stored), the ZooKeeper checkpoint and version that
    the versioned ZooKeeper write needs (-1 when the znode is missing or ZooKeeper is not written)."""

    position: int
    zk_checkpoint: int
    zk_version: int


class CommitReport(Protocol):
    """A dual commit's account per partition (zkcoord.bridge.CommitResult): what did not reach a store."""

    @property
    def failures(self) -> Sequence[object]: ...

    @property
    def skipped(self) -> Sequence[object]: ...

    def describe(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """One commit: ZooKeeper writes that landed as tp -> (offset, new znode version), how many partitions
    reached the store of record, and the full bridge result (None on the ZooKeeper-only path)."""

    zk_written: Mapping[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    count: int = 0
    result: CommitReport | None = None


class MemberOffsets(Protocol):
    def commit(
        self,
        consumed: Mapping[TopicPartition, int],
        checkpoints: Mapping[TopicPartition, int],
        versions: Mapping[TopicPartition, int],
        check_session: Callable[[], None],
        retries: int = 0,
    ) -> CommitOutcome:
        """Commit what moved. `retries`: further attempts after a retriable broker failure, each after
        offsets.channel.backoff.ms (the 0.8.2 consumer: offsets.commit.max.retries for an explicit
        commitOffsets(), none for auto-commit); the ZooKeeper-only path has nothing to retry, as the original."""
        ...

    def fetch(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, Fetched]: ...

    def close(self) -> None: ...


OffsetsFactory = Callable[[LegacyConsumerConfig, member_zk.Client, str, bool], "MemberOffsets"]
"""Builds a member's offset storage from (config, ZooKeeper client, group, batched)."""


def require_zookeeper_only(config: LegacyConsumerConfig) -> None:
    """A config that asks for `offsets.storage=kafka` or dual commit needs the bridge, handed to the member
    explicitly (`LegacyConsumer(..., offsets=zkcoord.bridge.member.member_offsets)`): refused with that advice
    rather than silently committing to ZooKeeper alone."""
    if config.offsets_storage != "zookeeper" or config.dual_commit_enabled:
        raise ConfigError(
            f"offsets.storage={config.offsets_storage} dual.commit.enabled={config.dual_commit_enabled} "
            "needs the offset bridge: pass offsets=zkcoord.bridge.member.member_offsets to LegacyConsumer"
        )


def for_member(
    config: LegacyConsumerConfig, client: member_zk.Client, group: str, batched: bool
) -> MemberOffsets:
    """ZooKeeper-only offsets, the member's default (an `OffsetsFactory`)."""
    require_zookeeper_only(config)
    return ZooKeeperOffsets(client, group, batched=batched, budget=config.multi_budget_bytes)


class ZooKeeperOffsets:
    """offsets.storage=zookeeper: `Fenced` writes of the offsets that moved, reads of the offset znodes, both
    through the one offset store (zkcoord.zk.offset_store)."""

    def __init__(self, client: member_zk.Client, group: str, *, batched: bool, budget: int) -> None:
        self.group = group
        self.store = ZooKeeperOffsetStore(client, group, batched=batched, fenced_budget_bytes=budget)

    def commit(
        self,
        consumed: Mapping[TopicPartition, int],
        checkpoints: Mapping[TopicPartition, int],
        versions: Mapping[TopicPartition, int],
        check_session: Callable[[], None],
        retries: int = 0,
    ) -> CommitOutcome:
        moved = {w.tp: w.offset for w in plan_offset_commit(self.group, consumed, checkpoints)}
        if not moved:
            return CommitOutcome()
        check_session()
        report = self.store.write(moved, Fenced(versions))
        if report.stale:
            log.warning(
                "group=%s offsets of %s were written by someone else; not overwritten",
                self.group,
                ", ".join(map(str, report.stale)),
            )
        landed = {tp: (report.written[tp], version) for tp, version in report.versions.items()}
        return CommitOutcome(landed, len(landed))

    def fetch(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, Fetched]:
        read = self.store.read(tps)
        for tp in tps:
            if tp in read.errors:
                raise read.errors[tp]  # a malformed znode: the rebalance attempt fails, nothing is guessed
        return {
            tp: Fetched(read.offsets.get(tp, -1), read.offsets.get(tp, -1), read.versions.get(tp, -1))
            for tp in tps
        }

    def close(self) -> None:
        pass
