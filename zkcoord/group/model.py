"""Coordinator state: the persisted view (changed only by `replay`) and the live, in-memory group membership.

Two layers, as in Kafka. The *persisted view* holds what `__consumer_offsets` holds: per group the last stored
GroupMetadata value and the committed offsets. `replay(view, record)` is its only mutator, so replaying a log
rebuilds it exactly. The *live* layer (`ClassicGroup`, `Member`) holds what Kafka keeps only in memory: who is
mid-rebalance, parked requests (by edge token), session deadlines. Handlers change the live layer in place (O(1)
per event, so a 1,000-member group costs no O(n^2)) and change the persisted view only by emitting records.

Iteration order is insertion order everywhere (dicts; no sets are iterated), so outputs are deterministic.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_model import ConsumerGroup
from zkcoord.group.errors import IllegalStateTransition
from zkcoord.group.state import GroupState, check_transition
from zkcoord.records.consumer_groups import CONSUMER_KEY_TYPES
from zkcoord.records.offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

CONSUMER_PROTOCOL_TYPE = "consumer"
# The committed-offsets map is keyed by the plain (topic, partition) pair, not zkcoord.topic_partition.TopicPartition
# (equal and hash-equal to it, so lookups by either work): the bulk loader builds a million of these keys on a restart,
# and NamedTuple keys made that decode 1.6-2x slower (0.12 s -> 0.20-0.25 s per 200,000 offset records, measured).
OffsetKey = tuple[str, int]


# ---------------------------------------------------------------------------------------------- persisted view


@dataclass(slots=True)
class PersistedView:
    """What the log says: group metadata values and committed offsets, per group id."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[OffsetKey, OffsetCommitValue]] = field(default_factory=dict)

    def forget(self, group_id: str) -> None:
        """Drop a group from memory when its partition moves away (not a durable change: no record)."""
        self.groups.pop(group_id, None)
        self.offsets.pop(group_id, None)

    def snapshot(
        self,
    ) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[OffsetKey, OffsetCommitValue]]]:
        """A copy that compares by value, for replay-equivalence checks."""
        return dict(self.groups), {g: dict(o) for g, o in self.offsets.items() if o}


def replay(view: PersistedView, record: Record) -> PersistedView:
    """Apply one record (value None = tombstone) to `view` and return it; the only mutator of persisted state."""
    key, value = record
    if isinstance(key, CONSUMER_KEY_TYPES):
        return view  # a consumer group's record: not part of this view (consumer_model.replay_consumer)
    if isinstance(key, OffsetCommitKey):
        tp = (key.topic, key.partition)
        if value is None:
            offsets = view.offsets.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del view.offsets[key.group]
        else:
            assert isinstance(value, OffsetCommitValue)
            view.offsets.setdefault(key.group, {})[tp] = value
    else:
        if value is None:
            view.groups.pop(key.group, None)
        else:
            assert isinstance(value, GroupMetadataValue)
            view.groups[key.group] = value
    return view


def replay_many(view: PersistedView, records: list[Record] | tuple[Record, ...]) -> PersistedView:
    """`replay` of each record in order; offset commits (a commit's hundreds of records) without a call each."""
    offsets = view.offsets
    for record in records:
        key, value = record
        if type(key) is OffsetCommitKey and type(value) is OffsetCommitValue:
            stored = offsets.get(key.group)
            if stored is None:
                stored = offsets[key.group] = {}
            stored[(key.topic, key.partition)] = value
        else:
            replay(view, record)
    return view


def replay_all(records: list[Record] | tuple[Record, ...]) -> PersistedView:
    view = PersistedView()
    for record in records:
        replay(view, record)
    return view


# ------------------------------------------------------------------------------------------------- live groups


class Member:
    """One group member's live state. Mutable on purpose: heartbeats must not copy anything."""

    __slots__ = (
        "armed_deadline_ms",
        "assignment",
        "client_host",
        "client_id",
        "deadline_ms",
        "group_instance_id",
        "is_new",
        "join_token",
        "join_version",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_token",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_token: int | None = None
        self.join_version = 0
        self.sync_token: int | None = None
        self.is_new = False
        self.deadline_ms = 0
        self.armed_deadline_ms: int | None = None  # when the HEARTBEAT timer is armed; None = not armed

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise IllegalStateTransition(
            self.member_id, "member", f"metadata for unsupported protocol {protocol!r}"
        )

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka's `MemberMetadata.matches`: same names in the same order with byte-equal metadata."""
        return self.protocols == protocols

    def vote(self, candidates: list[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise IllegalStateTransition(self.member_id, "member", "no candidate protocol to vote for")


class ClassicGroup:
    """A classic group's live state (Kafka's GroupMetadata without the offsets, which live in the view)."""

    __slots__ = (
        "generation",
        "group_id",
        "initial_join",
        "leader_id",
        "members",
        "new_member_added",
        "num_awaiting_join",
        "pending_members",
        "pending_sync",
        "protocol_name",
        "protocol_type",
        "state",
        "state_timestamp",
        "static_members",
        "subscribed_topics",
        "supported_protocols",
        "sync_holds",
    )

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp: int | None = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, int] = {}  # member id -> expiry deadline
        self.pending_sync: dict[str, None] = {}  # ordered set
        self.num_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.new_member_added = False
        self.initial_join: tuple[int, int] | None = None  # (current delay, remaining) of InitialDelayedJoin
        self.subscribed_topics: frozenset[str] | None = None
        # Members of the current generation whose SyncGroup answer is held (live only, never recorded): member
        # id -> the deadline by which it is answered whatever happens (membership.hold_sync_answers).
        self.sync_holds: dict[str, int] = {}

    def transition(self, target: GroupState, now_ms: int) -> None:
        self.state = check_transition(self.group_id, self.state, target)
        self.state_timestamp = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def supports_protocols(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        if self.state is GroupState.EMPTY:
            return protocol_type != "" and len(protocols) > 0
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name, _ in protocols
        )

    def add(self, member: Member, join_token: int | None, join_version: int) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self._inc_protocols(member)
        member.join_token = join_token
        member.join_version = join_version
        if join_token is not None:
            self.num_awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._dec_protocols(member)
            if member.join_token is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            # Kafka takes HashMap order here; the earliest-joined remaining member is the deterministic choice.
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        self.sync_holds.pop(member_id, None)
        return member

    def update_protocols(self, member: Member, protocols: tuple[tuple[str, bytes], ...]) -> None:
        self._dec_protocols(member)
        member.protocols = protocols
        self._inc_protocols(member)

    def set_join_token(self, member: Member, token: int | None, version: int = 0) -> None:
        if token is not None and member.join_token is None:
            self.num_awaiting_join += 1
        elif token is None and member.join_token is not None:
            self.num_awaiting_join -= 1
        member.join_token = token
        member.join_version = version

    def _inc_protocols(self, member: Member) -> None:
        sp = self.supported_protocols
        for name, _ in member.protocols:
            sp[name] = sp.get(name, 0) + 1

    def _dec_protocols(self, member: Member) -> None:
        sp = self.supported_protocols
        for name, _ in member.protocols:
            left = sp[name] - 1
            if left:
                sp[name] = left
            else:
                del sp[name]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> list[str]:
        n = len(self.members)
        return [name for name, count in self.supported_protocols.items() if count == n]

    def select_protocol(self) -> str:
        """Most votes wins; ties go to the protocol listed first in the leader's preference order."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        tied = [name for name, count in votes.items() if count == best]
        if len(tied) == 1:
            return tied[0]
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        for name, _ in leader.protocols:
            if name in tied:
                return name
        return min(tied)

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def to_record_value(self, now_ms: int) -> GroupMetadataValue:
        """The GroupMetadata value Kafka's `storeGroup` would write for this group now."""
        protocol = self.protocol_name
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation,
            protocol,
            self.leader_id,
            self.state_timestamp if self.state_timestamp is not None else -1,
            members,
        )


def group_record(group: ClassicGroup, now_ms: int) -> Record:
    return GroupMetadataKey(group.group_id), group.to_record_value(now_ms)


@dataclass(slots=True)
class CoordinatorState:
    """Everything one coordinator knows: config, the persisted view, the live groups."""

    config: GroupConfig
    view: PersistedView = field(default_factory=PersistedView)
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)  # KIP-848 groups (consumer_model)


# ------------------------------------------------------------------------------------- embedded consumer protocol

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscription_topics(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: the topics prefix is shared); None if malformed."""
    try:
        pos = 2  # int16 version
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if count < 0 or count > len(data):
            return None
        topics = []
        for _ in range(count):
            (n,) = _I16.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topics.append(data[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
