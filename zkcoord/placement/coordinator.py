"""Which `__consumer_offsets` partition, and so which node, coordinates a group: Kafka's exact formula.

`partitionFor(groupId) = Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` (Kafka 0.8.2 onwards:
`OffsetManager.partitionFor`, then `GroupMetadataManager.partitionFor`). `Utils.abs` maps Integer.MIN_VALUE to
0 and is `Math.abs` otherwise (KAFKA-1469, fixed in 0.8.2; the 0.8.1 helper was `n & 0x7fffffff`, which
gives other partitions for every negative hash and is kept here only as `masked_abs` for reference).
Python's `abs(h) % n` differs from Kafka only for h == -2**31 ("polygenelubricants").
"""

from __future__ import annotations

from collections.abc import Mapping

from zkcoord.legacy.ids import java_hash
from zkcoord.placement.leadership import NO_LEADER, Leadership

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS = 50
INT_MIN = -(2**31)


def kafka_abs(n: int) -> int:
    """`org.apache.kafka.common.utils.Utils.abs` for a Java int: 0 for Integer.MIN_VALUE, else |n|."""
    if not INT_MIN <= n < 2**31:
        raise ValueError(f"{n} is not a 32-bit Java int")
    return 0 if n == INT_MIN else abs(n)


def masked_abs(n: int) -> int:
    """The pre-0.8.2 `Utils.abs` (`n & 0x7fffffff`); not what any offsets-topic era broker uses."""
    return n & 0x7FFFFFFF


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The offsets partition that holds `group_id`'s records (and whose leader coordinates it)."""
    if num_partitions < 1:
        raise ValueError(f"offsets.topic.num.partitions must be >= 1, got {num_partitions}")
    return kafka_abs(java_hash(group_id)) % num_partitions


def coordinator_for_group(
    group_id: str, num_partitions: int, leaders: Mapping[int, Leadership]
) -> tuple[int, Leadership | None]:
    """(offsets partition, its leadership or None when unknown). A leader of NO_LEADER means nobody
    coordinates the group right now (COORDINATOR_NOT_AVAILABLE)."""
    partition = partition_for_group(group_id, num_partitions)
    return partition, leaders.get(partition)


def has_coordinator(lead: Leadership | None) -> bool:
    return lead is not None and lead.leader != NO_LEADER


def group_of_record_key(key: bytes) -> str:
    """The group a `__consumer_offsets` record belongs to: every key version (0/1 offset, 2 group metadata)
    starts with int16 version then the group as an int16-length UTF-8 string. ValueError when it does not."""
    if len(key) < 4:
        raise ValueError(f"record key of {len(key)} bytes is too short for a version and a group")
    version = int.from_bytes(key[0:2], "big", signed=True)
    if version not in (0, 1, 2):
        raise ValueError(f"record key version {version} is not an offset (0, 1) or group (2) key")
    length = int.from_bytes(key[2:4], "big", signed=True)
    if length < 0 or 4 + length > len(key):
        raise ValueError(f"record key group length {length} does not fit in {len(key)} bytes")
    return key[4 : 4 + length].decode("utf-8")
