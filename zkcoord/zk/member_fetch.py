"""The legacy member's data path: records of the partitions it owns, fetched with kafka-python's
`KafkaConsumer` under manual `assign()` (no broker group), bootstrapped from the leaders ZooKeeper names and
positioned at the ZooKeeper offset (`auto.offset.reset` smallest/largest when none is stored).

Used only from the thread that iterates the member; the member checks its fence before handing a record out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from zkcoord.errors import ZkcoordError
from zkcoord.legacy.rebalance import TopicPartition

if TYPE_CHECKING:
    from zkcoord.zk.member import LegacyConsumer, Message

log = logging.getLogger(__name__)


class NoLeaderAvailable(ZkcoordError):
    retriable = True


class KafkaFetcher:
    """One KafkaConsumer per member, re-assigned on every ownership change."""

    def __init__(self, member: LegacyConsumer) -> None:
        self._member = member
        self._consumer = None
        self._assigned: dict[TopicPartition, int] = {}

    def _ensure(self, tps: list[TopicPartition]):  # type: ignore[no-untyped-def]
        if self._consumer is not None:
            return self._consumer
        from kafka import KafkaConsumer

        bootstrap = self._member.leader_endpoints(tps) or self._any_broker()
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
                ep = BrokerRegistration.decode(path, data).plaintext_endpoint()
            except Exception:
                continue
            if ep is not None:
                out.append(f"{ep[0]}:{ep[1]}")
        return sorted(out)

    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        from kafka import TopicPartition as KTP

        tps = sorted(positions)
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

    def poll(self, timeout_ms: int) -> list[Message]:
        from zkcoord.zk.member import Message

        if self._consumer is None or not self._assigned:
            return []
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
