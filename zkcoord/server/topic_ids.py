"""Topic ids (KIP-516): the stored id of every topic, as Metadata v10+ and the consumer protocol (KIP-848) carry it.

An id is drawn at random when a topic is created (`zkcoord.zk.registry.new_topic_id`, Kafka's `Uuid.randomUuid`)
and stored with the topic, so a topic deleted and created again under the same name gets a new id and an old id
is answered UNKNOWN_TOPIC_ID. Where it is stored:

* cluster mode: in the topic znode, `/brokers/topics/T` version 3 `"topic_id"` (Kafka 2.8+); the controller
  gives one to a znode written without (an older broker, a 0.8-era tool), and every node copies it to its logs;
* every node: in its topic store beside the logs, `<data-dir>/logs/<topic>-0/partition.metadata` in Kafka's
  PartitionMetadataFile format (`version: 0` / `topic_id: <Uuid.toString>`). A single node (no ZooKeeper) is its
  own controller: a topic whose logs predate ids gets one at start. A file that does not parse leaves the topic
  without an id (never replaced: the operator looks at it) and is logged;
* proxy mode writes none of the cluster's znodes and needs no ids of its own: Metadata goes to the cluster's
  brokers, which answer their ids (Kafka 2.8+: the topic znode's; older brokers: none), and the consumer-protocol
  groups it would coordinate are refused (docs/proxy.md). Its own chroot's `__consumer_offsets` gets one as above.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sized
from typing import Protocol

from zkcoord.legacy.codecs import METADATA_TOPIC_ID, ZERO_UUID, kafka_uuid_string, parse_kafka_uuid
from zkcoord.zk.registry import new_topic_id

__all__ = [
    "PARTITION_METADATA_FILE",
    "decode_partition_metadata",
    "encode_partition_metadata",
    "new_topic_id",
    "topic_lookup",
    "topics_version",
]

PARTITION_METADATA_FILE = "partition.metadata"
_MAX_FILE_BYTES = 256  # "version: 0\ntopic_id: <22 characters>\n" is 42


def encode_partition_metadata(topic_id: uuid.UUID) -> bytes:
    """Kafka's PartitionMetadataFile (version 0)."""
    return f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n".encode("ascii")


def decode_partition_metadata(data: bytes) -> uuid.UUID:
    """The topic id of a PartitionMetadataFile: two lines `version: <n>` (n >= 0, as Kafka reads later versions)
    and `topic_id: <Uuid.toString>`; ValueError, saying what is wrong, for anything else."""
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError(f"{len(data)} bytes, more than {_MAX_FILE_BYTES}")
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise ValueError("not ASCII text") from None
    if len(lines) != 2:
        raise ValueError(f"{len(lines)} lines where 2 were expected")
    version = lines[0].split()
    if len(version) != 2 or version[0] != "version:" or not version[1].isdigit():
        raise ValueError(f"first line {lines[0][:40]!r} is not 'version: <n>'")
    field = lines[1].split()
    if len(field) != 2 or field[0] != "topic_id:":
        raise ValueError(f"second line {lines[1][:40]!r} is not 'topic_id: <id>'")
    topic_id = parse_kafka_uuid(field[1])
    if topic_id in (ZERO_UUID, METADATA_TOPIC_ID):
        raise ValueError(f"topic id {field[1]} is reserved by Kafka")
    return topic_id


class TopicStore(Protocol):
    """What a lookup needs of a node's topic store (`zkcoord.server.log.LogManager`)."""

    @property
    def topics(self) -> Mapping[str, Sized]: ...

    @property
    def topic_ids(self) -> Mapping[str, uuid.UUID]: ...


def topic_lookup(logs: TopicStore) -> Callable[[str], tuple[str, int] | None]:
    """name -> (topic id as 32 hex digits, partition count) of a topic this node has with an id, else None (a
    topic whose id is not known yet is not assigned to consumer-protocol members until it is)."""

    def lookup(name: str) -> tuple[str, int] | None:
        parts = logs.topics.get(name)
        topic_id = logs.topic_ids.get(name)
        if not parts or topic_id is None:
            return None
        return topic_id.hex, len(parts)

    return lookup


class VersionedTopicStore(Protocol):
    """A topic store whose `topics_version` moves whenever a lookup over it may answer differently."""

    @property
    def topics_version(self) -> int: ...


def topics_version(logs: VersionedTopicStore) -> Callable[[], int]:
    """What moves whenever `topic_lookup(logs)` may answer differently (a topic created, grown or deleted, an id
    stored)."""
    return lambda: logs.topics_version
