"""The legacy member's data path: records of the partitions it owns, fetched with kafka-python's
`KafkaConsumer` under manual `assign()` (no broker group), bootstrapped from the leaders ZooKeeper names and
positioned at the ZooKeeper offset (`auto.offset.reset` smallest/largest when none is stored). A reset
partition is not fetched until its reset position is known and reported to the member (`reset_positions`),
so the member can commit that position even before it hands out a record.

Used only from the thread that iterates the member; the member checks its fence before handing a record out.
This module owns the data path's types (`Message`, the `Fetcher` protocol) and needs of the member only what
`FetchSource` names, so it does not import the member (which imports it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kazoo.client import KazooClient

from zkcoord.errors import ZkcoordError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.rebalance import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class Fetcher(Protocol):
    """The data path. `assign` positions of -1 mean "no stored offset: apply auto.offset.reset"; the
    position each such reset resolved to is reported once by `reset_positions` (before any record of that
    partition is returned by `poll`), and becomes the member's consume position. `continuing` names
    partitions of the previous `assign` the member went on owning without a break (an incremental
    rebalance kept them): their fetch goes on where it is (the member still holds what was polled and not yet
    handed out), so their position in `positions` is not sought again."""

    def assign(
        self, positions: Mapping[TopicPartition, int], continuing: frozenset[TopicPartition] = frozenset()
    ) -> None: ...

    def poll(self, timeout_ms: int) -> list[Message]: ...

    def reset_positions(self) -> Mapping[TopicPartition, int]: ...

    def close(self) -> None: ...


class FetchSource(Protocol):
    """What the data path needs of its member: its config, its ZooKeeper client, and where the leaders are."""

    @property
    def config(self) -> LegacyConsumerConfig: ...

    @property
    def client(self) -> KazooClient | None: ...

    def leader_endpoints(self, tps: list[TopicPartition], protocol: str = "PLAINTEXT") -> list[str]: ...


class NoLeaderAvailable(ZkcoordError):
    retriable = True


class KafkaFetcher:
    """One KafkaConsumer per member, re-assigned on every ownership change. `security`: kafka-python's
    security arguments (zkcoord.security.client_config, from --command-config); the leaders are reached on the
    listener of their `security_protocol`."""

    def __init__(self, member: FetchSource, security: Mapping[str, Any] | None = None) -> None:
        self._member = member
        self._security = dict(security or {})
        self._protocol = str(self._security.get("security_protocol", "PLAINTEXT"))
        self._consumer = None
        self._assigned: dict[TopicPartition, int] = {}
        self._unresolved: set[TopicPartition] = set()  # reset partitions whose position is not known yet
        self._resolved: dict[TopicPartition, int] = {}  # reset positions not yet taken by the member

    def _ensure(self, tps: list[TopicPartition]):  # type: ignore[no-untyped-def]
        if self._consumer is not None:
            return self._consumer
        from kafka import KafkaConsumer

        bootstrap = self._member.leader_endpoints(tps, self._protocol) or self._any_broker()
        if not bootstrap:
            raise NoLeaderAvailable(f"no leader registered in ZooKeeper for {', '.join(map(str, tps))}")
        cfg = self._member.config
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=cfg.client_id,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest" if cfg.auto_offset_reset == "smallest" else "latest",
            fetch_min_bytes=cfg.fetch_min_bytes,
            fetch_max_wait_ms=cfg.fetch_wait_max_ms,
            max_partition_fetch_bytes=cfg.fetch_message_max_bytes,
            request_timeout_ms=max(cfg.socket_timeout_ms, cfg.fetch_wait_max_ms + 5000),
            retry_backoff_ms=cfg.refresh_leader_backoff_ms,
            **self._security,
        )
        return self._consumer

    def _any_broker(self) -> list[str]:
        from zkcoord.legacy import paths
        from zkcoord.legacy.codecs import BrokerRegistration
        from zkcoord.zk.member_zk import broker_ids

        client = self._member.client
        assert client is not None
        out = []
        for bid in broker_ids(client):
            path = f"{paths.BROKER_IDS}/{bid}"
            try:
                data, _stat = client.get(path)
                ep = BrokerRegistration.decode(path, data).endpoint_for(self._protocol)
            except Exception:
                continue
            if ep is not None:
                out.append(f"{ep[0]}:{ep[1]}")
        return sorted(out)

    def assign(
        self, positions: Mapping[TopicPartition, int], continuing: frozenset[TopicPartition] = frozenset()
    ) -> None:
        from kafka import TopicPartition as KTP

        tps = sorted(positions)
        # kafka-python keeps a partition's fetch state across assign() when it stays assigned.
        going_on = {tp for tp in continuing if tp in self._assigned and positions.get(tp, -1) >= 0}
        self._unresolved = set()
        self._resolved = {}
        if not tps:
            if self._consumer is not None:
                self._consumer.assign([])
            self._assigned = {}
            return
        consumer = self._ensure(tps)
        ktps = [KTP(tp.topic, tp.partition) for tp in tps]
        consumer.assign(ktps)
        reset_to_start = []
        reset_to_end = []
        for tp, ktp in zip(tps, ktps, strict=True):
            offset = positions[tp]
            if tp in going_on:
                continue
            if offset >= 0:
                consumer.seek(ktp, offset)
            elif self._member.config.auto_offset_reset == "smallest":
                reset_to_start.append(ktp)
            else:
                reset_to_end.append(ktp)
        if reset_to_start:
            consumer.seek_to_beginning(*reset_to_start)
        if reset_to_end:
            consumer.seek_to_end(*reset_to_end)
        self._assigned = dict(positions)
        self._unresolved = {tp for tp in tps if positions[tp] < 0}
        if self._unresolved:
            # Paused until the reset position is read back: a record fetched before that would leave the
            # member a consume position it cannot commit.
            consumer.pause(*(KTP(tp.topic, tp.partition) for tp in sorted(self._unresolved)))
            self._resolve(max(self._member.config.fetch_wait_max_ms, 100))

    def _resolve(self, timeout_ms: int) -> None:
        """Read back the positions the pending resets resolved to (one ListOffsets round for all of them)."""
        from kafka import TopicPartition as KTP
        from kafka.errors import KafkaError

        consumer = self._consumer
        assert consumer is not None
        for tp in sorted(self._unresolved):
            ktp = KTP(tp.topic, tp.partition)
            try:
                offset = consumer.position(ktp, timeout_ms=timeout_ms)
            except KafkaError as exc:
                log.info("auto.offset.reset of %s not resolved yet: %s", tp, exc)
                return
            if offset is None:
                return  # the reset request is still in flight; the next poll asks again
            self._resolved[tp] = offset
            self._unresolved.discard(tp)
            consumer.resume(ktp)

    def reset_positions(self) -> Mapping[TopicPartition, int]:
        taken, self._resolved = self._resolved, {}
        return taken

    def poll(self, timeout_ms: int) -> list[Message]:
        if self._consumer is None or not self._assigned:
            return []
        if self._unresolved:
            self._resolve(timeout_ms)
        batches = self._consumer.poll(timeout_ms=timeout_ms)
        out = []
        for ktp in sorted(batches, key=lambda k: (k.topic, k.partition)):
            for rec in batches[ktp]:
                out.append(Message(rec.topic, rec.partition, rec.offset, rec.key, rec.value))
        return out

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close(autocommit=False)
            except Exception:
                log.debug("closing the Kafka consumer failed", exc_info=True)
            self._consumer = None
