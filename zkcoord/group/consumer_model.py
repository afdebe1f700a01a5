"""The persisted state of consumer-protocol groups (KIP-848) and `replay_consumer`, its only mutator.

A consumer group is what its records say: the group epoch, the subscribed topics' metadata, each member's
subscription (topic names and/or a regular expression, and its instance id when static), the topics each subscribed
regular expression resolved to, the target assignment and its epoch, and each member's current assignment (epoch,
state, assigned partitions, partitions pending revocation). Views derived here, never persisted: who owns each
partition (a partition is owned from the moment it is in a member's assigned set until it leaves its
pending-revocation set: Kafka's partition epochs), how many members subscribe to each topic name and to each
regular expression, and which member holds each static instance id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import IntEnum

from zkcoord.records.consumer_groups import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    ConsumerMemberKey,
    ConsumerRegexKey,
    ConsumerValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    Partitions,
    RegexValue,
    TargetAssignmentEpochValue,
    TargetMemberValue,
    TopicMetadata,
)

TopicAssignment = dict[str, frozenset[int]]  # topic id -> partitions
# A member known from its assignment record before its metadata record (replay of a compacted log).
NO_METADATA = MemberMetadataValue(None, None, "", "", (), None, -1)


class MemberState(IntEnum):
    """Kafka's MemberState byte values (CurrentAssignmentBuilder)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must give some partitions up before it gets more
    UNRELEASED_PARTITIONS = 2  # waits for partitions other members still own
    UNKNOWN = 3


def to_partitions(assignment: TopicAssignment) -> Partitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def from_partitions(parts: Partitions) -> TopicAssignment:
    return {t: frozenset(ps) for t, ps in parts if ps}


@dataclass
class ConsumerMember:
    member_id: str
    metadata: MemberMetadataValue
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicAssignment = field(default_factory=dict)
    pending_revocation: TopicAssignment = field(default_factory=dict)
    has_assignment_record: bool = False  # a CurrentMemberAssignment record exists for it

    def current_value(self) -> CurrentAssignmentValue:
        return CurrentAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            to_partitions(self.assigned),
            to_partitions(self.pending_revocation),
        )


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topics: dict[str, TopicMetadata] = field(default_factory=dict)  # subscribed topics' metadata, by name
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, TopicAssignment] = field(default_factory=dict)  # member id -> target assignment
    # derived
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # (topic id, partition) -> member id
    subscribers: Counter[str] = field(default_factory=Counter)  # topic name -> members subscribed
    regexes: dict[str, RegexValue] = field(
        default_factory=dict
    )  # subscribed regex -> its resolution (persisted)
    regex_subscribers: Counter[str] = field(default_factory=Counter)  # regex -> members subscribed (derived)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id (derived)
    # live only (not persisted, not compared): classic members told to rejoin -> their JoinGroup deadline
    join_deadlines: dict[str, int] = field(default_factory=dict, compare=False)
    # live only: when the regexes were last resolved against the topics (0: never since load)
    regexes_refreshed_ms: int = field(default=0, compare=False)
    # live only (not persisted, not compared): at which topic version, for which subscribed names and against which
    # `topics` value the subscribed topics were last looked up (the heartbeat skips the lookup while all three hold)
    topics_checked: tuple[int, frozenset[str], dict[str, TopicMetadata]] | None = field(
        default=None, compare=False, repr=False
    )

    def state_name(self) -> str:
        """Kafka's ConsumerGroupState as DescribeGroups/ConsumerGroupDescribe/ListGroups name it."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def subscribed_topic_names(self) -> list[str]:
        """Every topic name a member subscribes to, by name or through a resolved regular expression: sorted."""
        names = set(self.subscribers)
        for regex in self.regex_subscribers:
            resolved = self.regexes.get(regex)
            if resolved is not None:
                names.update(resolved.topics)
        return sorted(names)

    def member_topic_names(self, member: ConsumerMember) -> frozenset[str]:
        """The topic names `member` subscribes to: its names and what its regular expression resolved to."""
        names = frozenset(member.metadata.subscribed_topic_names)
        regex = member.metadata.subscribed_topic_regex
        resolved = self.regexes.get(regex) if regex is not None else None
        return names | frozenset(resolved.topics) if resolved is not None else names

    def topic_name(self, topic_id: str) -> str:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t.name
        return ""

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    if self.owners.get((t, p)) == member.member_id:
                        del self.owners[(t, p)]

    def _claim(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    self.owners[(t, p)] = member.member_id


def replay_consumer(groups: dict[str, ConsumerGroup], key: ConsumerKey, value: ConsumerValue | None) -> None:
    """Apply one consumer-group record (value None: tombstone). The only function that changes `groups`."""
    group = groups.get(key.group)
    if group is None:
        if value is None:
            return
        group = groups[key.group] = ConsumerGroup(key.group)
    if isinstance(key, ConsumerMemberKey):
        _replay_member(group, key, value)
        return
    if isinstance(key, ConsumerRegexKey):
        assert key.version == REGULAR_EXPRESSION
        if value is None:
            group.regexes.pop(key.regex, None)
        else:
            assert isinstance(value, RegexValue)
            group.regexes[key.regex] = value
        return
    if key.version == GROUP_METADATA:
        if value is None:  # the group's tombstone: the group is gone (deleted when empty)
            del groups[key.group]
            return
        assert isinstance(value, GroupEpochValue)
        group.group_epoch = value.epoch
    elif key.version == PARTITION_METADATA:
        if value is None:
            group.topics = {}
        else:
            assert isinstance(value, PartitionMetadataValue)
            group.topics = {t.name: t for t in value.topics}
    elif key.version == TARGET_ASSIGNMENT_METADATA:
        if value is None:
            group.assignment_epoch = 0
        else:
            assert isinstance(value, TargetAssignmentEpochValue)
            group.assignment_epoch = value.assignment_epoch


def _replay_member(group: ConsumerGroup, key: ConsumerMemberKey, value: ConsumerValue | None) -> None:
    mid = key.member_id
    member = group.members.get(mid)
    if key.version == MEMBER_METADATA:
        if value is None:
            if member is not None:
                group._release(member)
                _unsubscribe(group, member)
                del group.members[mid]
            return
        assert isinstance(value, MemberMetadataValue)
        if member is None:
            member = group.members[mid] = ConsumerMember(mid, value)
        else:
            _unsubscribe(group, member)
            member.metadata = value
        group.subscribers.update(value.subscribed_topic_names)
        group.subscribers += Counter()
        if value.subscribed_topic_regex is not None:
            group.regex_subscribers[value.subscribed_topic_regex] += 1
        if value.instance_id is not None:
            group.static_members[value.instance_id] = mid
    elif key.version == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target.pop(mid, None)
        else:
            assert isinstance(value, TargetMemberValue)
            group.target[mid] = from_partitions(value.partitions)
    elif key.version == CURRENT_MEMBER_ASSIGNMENT:
        if member is None:
            if value is None:
                return  # Kafka writes the assignment tombstone first; nothing to do for an unknown member
            # A compacted log keeps each key's last record where it was (Kafka) or where the key first appeared
            # (zkcoord's ZooKeeper store): a member's assignment may come before its metadata. Order-tolerant,
            # as Kafka's replay: the member exists from whichever of its records comes first.
            member = group.members[mid] = ConsumerMember(mid, NO_METADATA)
        group._release(member)
        if value is None:
            member.member_epoch, member.previous_member_epoch = 0, -1
            member.state = MemberState.STABLE
            member.assigned, member.pending_revocation = {}, {}
            member.has_assignment_record = False
            return
        assert isinstance(value, CurrentAssignmentValue)
        member.member_epoch = value.member_epoch
        member.previous_member_epoch = value.previous_member_epoch
        member.state = MemberState(value.state) if value.state in (0, 1, 2) else MemberState.UNKNOWN
        member.assigned = from_partitions(value.assigned)
        member.pending_revocation = from_partitions(value.pending_revocation)
        member.has_assignment_record = True
        group._claim(member)


def _unsubscribe(group: ConsumerGroup, member: ConsumerMember) -> None:
    """Take `member`'s subscription and instance id out of the derived counts and index."""
    meta = member.metadata
    group.subscribers.subtract(meta.subscribed_topic_names)
    group.subscribers += Counter()  # drop zero counts
    if meta.subscribed_topic_regex is not None:
        group.regex_subscribers[meta.subscribed_topic_regex] -= 1
        group.regex_subscribers += Counter()
    if meta.instance_id is not None and group.static_members.get(meta.instance_id) == member.member_id:
        del group.static_members[meta.instance_id]
