"""OffsetCommit v0 and OffsetFetch v0 on a cluster node (`serve --zk`): they read and write the legacy offset
znodes `/consumers/G/offsets/T/P` through the one offset writer, exactly as Kafka 0.8.2-2.x brokers did.

Kafka's `KafkaApis.handleOffsetCommitRequest` / `handleOffsetFetchRequest` send version 0 to ZooKeeper and
versions 1+ to the group coordinator; that is how 0.8.1-era clients (kafka-node 2.x's HighLevelConsumer, librdkafka
with `offset.store.method=broker` on 0.8.1) and the ZooKeeper consumers see each other's offsets. The rules kept:

* any node answers (version 0 never goes through the group coordinator) and there is no generation check;
* a partition the cluster does not know is UNKNOWN_TOPIC_OR_PARTITION (commit and fetch alike);
* commit: metadata longer than `offset.metadata.max.bytes` is OFFSET_METADATA_TOO_LARGE; otherwise the offset
  alone is written as its decimal string, overwriting whatever is there (the metadata is never stored and there
  is no retention: a ZooKeeper offset stays until someone deletes it);
* fetch: a stored offset comes back with empty metadata; no znode is offset -1 with UNKNOWN_TOPIC_OR_PARTITION;
  a znode that is no number, or ZooKeeper failing, is that partition's UNKNOWN_SERVER_ERROR (Kafka's
  `Errors.forException` of the exception it hit), never a silent default.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from zkcoord.errors import ErrorCode
from zkcoord.group import messages as gm
from zkcoord.legacy.paths import InvalidName, validate_group
from zkcoord.ratelog import RateLimitedLog
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk.member_zk import Client
from zkcoord.zk.offset_store import WriteMode, ZooKeeperOffsetStore

log = logging.getLogger(__name__)
_say = RateLimitedLog(log)  # a client can repeat a bad group id at will (operations.md)

NO_METADATA = ""


class ZooKeeperOffsetsV0:
    """Version-0 offset commits and fetches against ZooKeeper. `client()` is the node's kazoo client (None before
    the node has connected); `partition_exists(topic, partition)` is the node's metadata (Kafka's metadataCache)."""

    def __init__(
        self,
        client: Callable[[], Client | None],
        partition_exists: Callable[[str, int], bool],
        offset_metadata_max_bytes: int = 4096,
    ) -> None:
        self._client = client
        self._exists = partition_exists
        self.offset_metadata_max_bytes = offset_metadata_max_bytes

    async def offset_commit(self, req: gm.OffsetCommitRequest) -> gm.OffsetCommitResponse:
        return await asyncio.to_thread(self._commit, req)

    async def offset_fetch(self, req: gm.OffsetFetchRequest) -> gm.OffsetFetchResponse:
        return await asyncio.to_thread(self._fetch, req)

    def _store(self, group: str) -> ZooKeeperOffsetStore | None:
        client = self._client()
        if client is None:
            return None
        try:
            validate_group(group)
        except InvalidName as exc:
            # Kafka builds the path anyway and ZooKeeper's path check throws: UNKNOWN_SERVER_ERROR per partition.
            _say.log(
                logging.INFO, "v0-offsets-group", "v0 offsets: group %r is no znode name: %s", group, exc
            )
            return None
        return ZooKeeperOffsetStore(client, group)

    def _commit(self, req: gm.OffsetCommitRequest) -> gm.OffsetCommitResponse:
        errors: dict[TopicPartition, int] = {}
        to_write: dict[TopicPartition, int] = {}
        for t in req.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if not self._exists(*tp):
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(p.committed_metadata or "") > self.offset_metadata_max_bytes:
                    errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    to_write[tp] = p.committed_offset
        if to_write:
            store = self._store(req.group_id)
            if store is None:
                errors.update(dict.fromkeys(to_write, ErrorCode.UNKNOWN_SERVER_ERROR))
            else:
                try:
                    report = store.write(to_write, WriteMode.OVERWRITE)
                    failed = report.errors
                except Exception as exc:  # ZooKeeper away or the session lost: every partition's error
                    log.warning("v0 offset commit group=%s: %r", req.group_id, exc)
                    failed = dict.fromkeys(to_write, repr(exc))
                for tp, why in sorted(failed.items()):
                    log.warning("v0 offset commit group=%s %s-%d: %s", req.group_id, tp[0], tp[1], why)
                    errors[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
        return gm.OffsetCommitResponse(
            tuple(
                gm.OffsetCommitResponseTopic(
                    t.name,
                    tuple(
                        gm.OffsetCommitResponsePartition(
                            p.partition_index,
                            errors.get(TopicPartition(t.name, p.partition_index), ErrorCode.NONE),
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.topics
            )
        )

    def _fetch(self, req: gm.OffsetFetchRequest) -> gm.OffsetFetchResponse:
        topics = req.topics or ()  # v0 always names its partitions
        wanted = [
            TopicPartition(t.name, p) for t in topics for p in t.partition_indexes if self._exists(t.name, p)
        ]
        found: dict[TopicPartition, int] = {}
        failed: set[TopicPartition] = set()
        if wanted:
            store = self._store(req.group_id)
            if store is None:
                failed.update(wanted)
            else:
                try:
                    read = store.read(wanted)
                    found = read.offsets
                    failed.update(read.errors)
                except Exception as exc:
                    log.warning("v0 offset fetch group=%s: %r", req.group_id, exc)
                    failed.update(wanted)

        def one(topic: str, partition: int) -> gm.OffsetFetchResponsePartition:
            tp = (topic, partition)
            if tp in failed:
                return gm.OffsetFetchResponsePartition(
                    partition, -1, -1, NO_METADATA, ErrorCode.UNKNOWN_SERVER_ERROR
                )
            if tp in found:
                return gm.OffsetFetchResponsePartition(partition, found[tp], -1, NO_METADATA, ErrorCode.NONE)
            return gm.OffsetFetchResponsePartition(
                partition, -1, -1, NO_METADATA, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )

        return gm.OffsetFetchResponse(
            ErrorCode.NONE,
            tuple(
                gm.OffsetFetchResponseTopic(t.name, tuple(one(t.name, p) for p in t.partition_indexes))
                for t in topics
            ),
        )
