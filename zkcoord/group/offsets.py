"""Committed offsets (Kafka's `OffsetMetadataManager`): OffsetCommit, OffsetFetch, retention, expiry, the
offsets of deleted partitions, and the existence check KafkaApis makes before a commit reaches the coordinator.

Commits, expiry and partition deletion return records (offsets and their tombstones, and the tombstone of an
Empty group they leave without offsets); nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from zkcoord.group.common import (
    COMPLETING,
    DEAD,
    EMPTY,
    STABLE,
    E,
    Effects,
    commit_errors,
    touch,
    validate_current_member,
)
from zkcoord.group.consumer import commit_error, fetch_error
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from zkcoord.group.model import CONSUMER_PROTOCOL_TYPE, ClassicGroup, CoordinatorState
from zkcoord.group.results import Result, Schedule, TimerKey
from zkcoord.records.offsets import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record

# ----------------------------------------------------------------------------------------------- OffsetCommit

# A topic's partition count as the serving node knows the cluster (Kafka's metadata cache); None: no such topic.
PartitionCount = Callable[[str], "int | None"]


def unknown_partitions(
    req: OffsetCommitRequest, partition_count: PartitionCount
) -> frozenset[tuple[str, int]]:
    """The (topic, partition) pairs of `req` the cluster does not have: Kafka's `KafkaApis.handleOffsetCommitRequest`
    (2.x: `metadataCache.contains(topicPartition)`; 3.x and 4.0: the topic, then `getPartitionInfo` per partition)
    answers them UNKNOWN_TOPIC_OR_PARTITION and never hands them to the group coordinator. Empty in the usual case,
    with one lookup per topic and one comparison per partition."""
    unknown: list[tuple[str, int]] = []
    for t in req.topics:
        count = partition_count(t.name)
        name = t.name
        if count is None:
            unknown += ((name, p[0]) for p in t.partitions)
            continue
        for p in t.partitions:
            if not 0 <= p[0] < count:
                unknown.append((name, p[0]))
    return frozenset(unknown)


def without_partitions(
    req: OffsetCommitRequest, unknown: frozenset[tuple[str, int]]
) -> OffsetCommitRequest | None:
    """`req` keeping only the partitions not in `unknown` (topics left with none are dropped); None when nothing is
    left, in which case Kafka answers without asking the coordinator (so no group is created or touched)."""
    topics = []
    for t in req.topics:
        kept = tuple(p for p in t.partitions if (t.name, p[0]) not in unknown)
        if kept:
            topics.append(t if len(kept) == len(t.partitions) else OffsetCommitRequestTopic(t.name, kept))
    if not topics:
        return None
    return replace(req, topics=tuple(topics))


def with_unknown_partitions(
    req: OffsetCommitRequest, answered: OffsetCommitResponse | None, unknown: frozenset[tuple[str, int]]
) -> OffsetCommitResponse:
    """The answer to `req`: UNKNOWN_TOPIC_OR_PARTITION for the `unknown` partitions, the coordinator's `answered`
    (to the request `without_partitions` made) for the rest, in the request's order."""
    codes: dict[tuple[str, int], int] = {}
    if answered is not None:
        for t in answered.topics:
            for p in t.partitions:
                codes[(t.name, p.partition_index)] = p.error_code
    refused = int(E.UNKNOWN_TOPIC_OR_PARTITION)
    unanswered = int(E.UNKNOWN_SERVER_ERROR)  # never: the coordinator answers every partition it is sent
    topics = tuple(
        OffsetCommitResponseTopic(
            t.name,
            tuple(
                OffsetCommitResponsePartition(
                    p[0], refused if (t.name, p[0]) in unknown else codes.get((t.name, p[0]), unanswered)
                )
                for p in t.partitions
            ),
        )
        for t in req.topics
    )
    throttle = answered.throttle_time_ms if answered is not None else 0
    return OffsetCommitResponse(topics, throttle)


def handle_offset_commit(st: CoordinatorState, req: OffsetCommitRequest, now_ms: int, token: int) -> Result:
    out = Effects(st)
    group = st.groups.get(req.group_id)
    if group is None:
        if req.generation_id < 0:
            # Not using group management: an Empty "simple" group holds the offsets.
            group = st.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)
        else:
            out.respond(token, commit_errors(req, E.ILLEGAL_GENERATION))
            return out.result()
    err = _validate_offset_commit(group, req)
    if err is None and group.state is COMPLETING:
        err = E.REBALANCE_IN_PROGRESS
    if err is not None:
        out.respond(token, commit_errors(req, err))
        return out.result()
    if group.state is not EMPTY:
        member = group.members[req.member_id]
        touch(out, group, member, now_ms, member.session_timeout_ms)
    return _store_commit(out, st, req, now_ms, token)


def handle_legacy_member_commit(
    st: CoordinatorState, req: OffsetCommitRequest, now_ms: int, token: int
) -> Result:
    """A commit without group management (generation -1) into a *mixed* group, from a legacy ZooKeeper member
    whose owner znodes hold every committed partition (the edge checked that in ZooKeeper before calling): it is
    stored whatever the classic members' state, instead of UNKNOWN_MEMBER_ID. A group this coordinator does not
    know, or an Empty one, takes it as any commit."""
    group = st.groups.get(req.group_id)
    if group is None or group.state is EMPTY or req.generation_id >= 0:
        return handle_offset_commit(st, req, now_ms, token)
    out = Effects(st)
    if group.state is DEAD:
        out.respond(token, commit_errors(req, E.COORDINATOR_NOT_AVAILABLE))
        return out.result()
    return _store_commit(out, st, req, now_ms, token)


def handle_consumer_group_commit(
    st: CoordinatorState, req: OffsetCommitRequest, now_ms: int, token: int
) -> Result:
    """A commit into a consumer-protocol group (KIP-848): the member id and member epoch (the generation field
    of v9) are checked as Kafka's `ConsumerGroup.validateOffsetCommit` does (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
    UNSUPPORTED_VERSION for a consumer-protocol member below v9), then stored as any commit."""
    out = Effects(st)
    err = commit_error(st, req.group_id, req.member_id, req.generation_id, req.api_version)
    if err is not None:
        out.respond(token, commit_errors(req, err))
        return out.result()
    return _store_commit(out, st, req, now_ms, token)


def _store_commit(
    out: Effects, st: CoordinatorState, req: OffsetCommitRequest, now_ms: int, token: int
) -> Result:
    max_meta = st.config.offset_metadata_max_bytes
    expire = now_ms + req.retention_time_ms if req.retention_time_ms != -1 else -1
    gid = req.group_id
    records: list[Record] = []
    topics = []
    # The hottest handler (one record per partition): names bound once, the cached answer looked up inline.
    add_record = records.append
    # The records are NamedTuples built whole, so tuple.__new__ straight (their __new__ is a Python function).
    Key, Value, new = OffsetCommitKey, OffsetCommitValue, tuple.__new__
    ok_cache = _OK_PARTITIONS
    for t in req.topics:
        parts: list[OffsetCommitResponsePartition] = []
        add_part = parts.append
        name = t.name
        for index, offset, epoch, meta, stamp in t.partitions:
            if meta is None:
                meta = ""
            if len(meta) > max_meta:
                add_part(OffsetCommitResponsePartition(index, int(E.OFFSET_METADATA_TOO_LARGE)))
                continue
            add_record(
                (
                    new(Key, (gid, name, index)),
                    new(Value, (offset, epoch, meta, stamp if stamp != -1 else now_ms, expire)),
                )
            )
            add_part(ok_cache.get(index) or _ok_partition(index))
        topics.append(OffsetCommitResponseTopic(name, tuple(parts)))
    out.records_batch(records)
    out.respond(token, OffsetCommitResponse(tuple(topics)))
    return out.result()


_OK_PARTITIONS: dict[int, OffsetCommitResponsePartition] = {}


def _ok_partition(index: int) -> OffsetCommitResponsePartition:
    # Responses are immutable, so one "partition N: NONE" object can answer every commit.
    cached = _OK_PARTITIONS.get(index)
    if cached is None:
        cached = OffsetCommitResponsePartition(index, 0)
        if len(_OK_PARTITIONS) < 65536:
            _OK_PARTITIONS[index] = cached
    return cached


def _validate_offset_commit(group: ClassicGroup, req: OffsetCommitRequest) -> ErrorCode | None:
    if group.state is DEAD:
        return E.COORDINATOR_NOT_AVAILABLE
    if req.generation_id < 0 and group.state is EMPTY:
        # Admin tools and manually assigned consumers: member id and instance id are not checked.
        return None
    if req.generation_id >= 0 or req.member_id != "" or req.group_instance_id is not None:
        err = validate_current_member(group, req.member_id, req.group_instance_id)
        if err is not None:
            return err
        if req.generation_id != group.generation:
            return E.ILLEGAL_GENERATION
        return None
    if group.state is not EMPTY:
        # A non-empty group takes commits only from its members.
        return E.UNKNOWN_MEMBER_ID
    return None


# ------------------------------------------------------------------------------------------------ OffsetFetch


def handle_offset_fetch(st: CoordinatorState, req: OffsetFetchRequest, now_ms: int, token: int) -> Result:
    if req.group_id in st.consumer_groups:  # KIP-848: v9 carries the member id and epoch, checked first
        err = fetch_error(st, req.group_id, req.member_id, req.member_epoch)
        if err is not None:
            return Result(responses=((token, OffsetFetchResponse(int(err), ())),))
    group = st.groups.get(req.group_id)
    live = (group is not None and group.state is not DEAD) or req.group_id in st.consumer_groups
    stored = st.view.offsets.get(req.group_id) if live else None
    topics: list[OffsetFetchResponseTopic] = []
    if req.topics is None:
        by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
        for (topic, partition), found in sorted((stored or {}).items()):
            by_topic.setdefault(topic, []).append(
                OffsetFetchResponsePartition(partition, found.offset, found.leader_epoch, found.metadata, 0)
            )
        topics = [OffsetFetchResponseTopic(t, tuple(ps)) for t, ps in by_topic.items()]
    else:
        for t in req.topics:
            parts = []
            for p in t.partition_indexes:
                value = stored.get((t.name, p)) if stored else None
                if value is None:
                    parts.append(OffsetFetchResponsePartition(p, -1, -1, "", 0))
                else:
                    parts.append(
                        OffsetFetchResponsePartition(p, value.offset, value.leader_epoch, value.metadata, 0)
                    )
            topics.append(OffsetFetchResponseTopic(t.name, tuple(parts)))
    return Result(responses=((token, OffsetFetchResponse(0, tuple(topics))),))


# --------------------------------------------------------------------------------------- retention and expiry


def expire_offsets(st: CoordinatorState, now_ms: int) -> Result:
    """Kafka's `cleanupGroupMetadata(removeExpiredOffsets)`: tombstone expired offsets; an Empty group left with
    no offsets becomes Dead and is tombstoned too."""
    out = Effects(st)
    retention = st.config.offsets_retention_ms
    for gid, group in list(st.groups.items()):
        stored = st.view.offsets.get(gid, {})
        expired = [tp for tp, value in stored.items() if _is_expired(group, tp[0], value, now_ms, retention)]
        for topic, partition in sorted(expired):
            out.record((OffsetCommitKey(gid, topic, partition), None))
        if group.state is EMPTY and not st.view.offsets.get(gid):
            group.transition(DEAD, now_ms)
            tombstone_group(out, gid, everything=False)
    return out.result()


def delete_partition_offsets(
    st: CoordinatorState, partitions: Iterable[tuple[str, int]], now_ms: int
) -> Result:
    """Kafka's `handleDeletedPartitions` (`cleanupGroupMetadata` over deleted partitions): tombstone every group's
    committed offsets of `partitions`, so a topic re-created under the same name is not read from old offsets; an
    Empty group this leaves without offsets becomes Dead and is tombstoned too (Kafka would also end Empty groups
    that had no offsets before; the periodic expiry pass does that here)."""
    gone = frozenset(partitions)
    out = Effects(st)
    # Every group with offsets, classic or consumer-protocol (KIP-848: Kafka's OffsetMetadataManager drops the
    # offsets of both kinds), so a consumer group does not read a re-created topic from the old one's positions.
    for gid in sorted(st.view.offsets):
        hit = sorted(tp for tp in st.view.offsets.get(gid, {}) if tp in gone)
        for topic, partition in hit:
            out.record((OffsetCommitKey(gid, topic, partition), None))
        group = st.groups.get(gid)
        if group is not None and hit and group.state is EMPTY and not st.view.offsets.get(gid):
            group.transition(DEAD, now_ms)
            tombstone_group(out, gid, everything=False)
    return out.result()


def _is_expired(
    group: ClassicGroup, topic: str, value: OffsetCommitValue, now_ms: int, retention: int
) -> bool:
    ptype = group.protocol_type
    if ptype is not None and group.state is EMPTY:
        base = group.state_timestamp if group.state_timestamp is not None else value.commit_timestamp
    elif ptype == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None and group.state is STABLE:
        if topic in group.subscribed_topics:
            return False
        base = value.commit_timestamp
    elif ptype is None:
        base = value.commit_timestamp
    else:
        return False
    if value.expire_timestamp >= 0:
        return now_ms >= value.expire_timestamp
    return now_ms - base >= retention


def tombstone_group(out: Effects, gid: str, *, everything: bool) -> None:
    """Tombstone a group gone Dead, with all its offsets when `everything`, and drop it from memory."""
    if everything:
        for topic, partition in sorted(out.st.view.offsets.get(gid, {})):
            out.record((OffsetCommitKey(gid, topic, partition), None))
    out.record((GroupMetadataKey(gid), None))
    out.st.groups.pop(gid, None)


def on_retention_timer(st: CoordinatorState, key: TimerKey, now_ms: int) -> Result:
    """The periodic expiry pass fired: expire what is due, then arm the next pass."""
    result = expire_offsets(st, now_ms)
    nxt = Schedule(key, now_ms + st.config.offsets_retention_check_interval_ms)
    return Result(result.records, result.responses, (*result.timers, nxt))
