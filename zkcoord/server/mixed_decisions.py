"""The group service's decisions for mixed groups, as pure functions of the classic group's live state: which
protocols a joining member keeps and under which names the classic core sees them, which name each member is
answered in (and which it may name in SyncGroup), when it is registered in the legacy tree early, when the leader's SyncGroup is
replaced by the bridge's hand-over (and with which members, subscriptions and wait), which generation -1 commit may be
a legacy member's, what the bridge is told of the member list, what the offset mirror is handed, and what follows
a hand-over. No I/O, no clock, no asyncio (the import contract holds it to the pure core's rules); the asyncio edge
that carries them out is `zkcoord.server.mixed_groups`.

Why here and not in `zkcoord.bridge.mixed_policy`: the server and the bridge are independent layers (the server
knows the bridge only through `seams.MembershipBridge`), and these decisions read the classic group's state, which
the server owns; the bridge's own decisions (names, assignment, hand-over plan) stay in `mixed_policy`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from zkcoord.group.consumer_classic import parse_assignment, parse_subscription
from zkcoord.group.consumer_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest
from zkcoord.group.model import ClassicGroup, CoordinatorState, Member, subscription_topics
from zkcoord.group.state import GroupState
from zkcoord.legacy.assignment import STRATEGIES as LEGACY_STRATEGIES
from zkcoord.records.offsets import OffsetCommitValue
from zkcoord.topic_partition import TopicPartition

# A hand-over that left a partition unheld (its previous owner did not let go in time) is tried again this much
# later, by a rebalance, once the owner znode can be taken.
FOLLOW_UP_REBALANCE_S: Final = 1.0
# The hand-over's wait for previous owners never goes below this, whatever the members' timeouts.
MIN_HAND_OVER_MS: Final = 500
# Before the bridge releases departed members' owner znodes, the group's offsets get this long to reach ZooKeeper.
SETTLE_BEFORE_RELEASE_MS: Final = 5000

# KIP-429 names a mixed group hosts: `zkcoord.bridge.mixed_policy.COOPERATIVE_PROTOCOLS`, repeated here because
# the server does not import the bridge (a unit test holds the two equal). A member answered in one keeps what
# stays and revokes only what moves.
COOPERATIVE_PROTOCOLS: Final = ("cooperative-sticky",)
# The name the classic core knows a mixed group's protocol by when its members offer assignor names other than
# range and roundrobin (kafkajs `RoundRobinAssigner`, sarama's, `cooperative-sticky`, ...): the coordinator
# computes their shares with the legacy members' algorithm, so such a name is only a label the member recognises.
# What DescribeGroups shows as the group's protocol when no member's name fixes range or roundrobin.
FOLLOW_PROTOCOL: Final = "zkcoord-legacy"

# The coordinator's committed-offsets map is keyed by plain (topic, partition) pairs (zkcoord.group.model), equal
# and hash-equal to TopicPartition; what is handed on keeps those keys (a Mapping's key type is invariant).
OffsetKey = tuple[str, int]
# (member id, client id, subscribed topics): a member as the bridge sees it
BridgeMember = tuple[str, str, tuple[str, ...]]


def join_topics(protocols: Iterable[tuple[str, bytes]], usable: tuple[str, ...]) -> tuple[str, ...]:
    """The topics a joining member subscribes to, read from the metadata of its first usable protocol.

    >>> join_topics([("range", b"\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x01t\\xff\\xff\\xff\\xff")], ("range",))
    ('t',)
    """
    return tuple(subscription_topics(dict(protocols)[usable[0]]) or ())


def kept_protocols(req: JoinGroupRequest, usable: Iterable[str]) -> tuple[tuple[str, bytes], ...]:
    """The member's protocols the legacy side knows, in the member's order."""
    names = set(usable)
    return tuple((n, m) for n, m in req.protocols if n in names)


def core_protocols(kept: Sequence[tuple[str, bytes]]) -> tuple[tuple[str, bytes], ...]:
    """What the classic core is told a member offers (its one-name rule then picks the group's protocol): each
    range or roundrobin it names, in its order; at its first other name (a label only: that member takes whatever
    share the legacy algorithm gives it), `FOLLOW_PROTOCOL` and the legacy strategies it does not name, all with
    that name's metadata; then its other names themselves (a group stored before mixed names, whose members
    joined by such a name, stays joinable). Members naming only range and only roundrobin still disagree (the
    legacy members use one algorithm); a member of another name joins either.

    >>> [n for n, _ in core_protocols([("RoundRobinAssigner", b"m")])]
    ['zkcoord-legacy', 'range', 'roundrobin', 'RoundRobinAssigner']
    >>> [n for n, _ in core_protocols([("range", b"r"), ("cooperative-sticky", b"c")])]
    ['range', 'zkcoord-legacy', 'roundrobin', 'cooperative-sticky']
    """
    named = {n for n, _ in kept if n in LEGACY_STRATEGIES}
    others = [(n, m) for n, m in kept if n not in LEGACY_STRATEGIES]
    out: list[tuple[str, bytes]] = []
    for name, metadata in kept:
        if name in LEGACY_STRATEGIES:
            out.append((name, metadata))
        elif (name, metadata) == others[0]:
            out.append((FOLLOW_PROTOCOL, metadata))
            out.extend((s, metadata) for s in LEGACY_STRATEGIES if s not in named)
    return (*out, *(o for o in others if o[0] != FOLLOW_PROTOCOL))


def answered_name(kept: Sequence[tuple[str, bytes]], group_protocol: str | None) -> str | None:
    """The protocol name a mixed group's member is answered in (JoinGroup, SyncGroup): the group's own when the
    member offered it (Kafka's rule), else the member's first name other than range and roundrobin (a label its
    client recognises; the assignment bytes are ConsumerProtocol's for every name). None: no protocol yet.

    >>> answered_name([("range", b"")], "range"), answered_name([("RoundRobinAssigner", b"")], "range")
    ('range', 'RoundRobinAssigner')
    """
    if group_protocol is None:
        return None
    names = [n for n, _ in kept]
    if (
        group_protocol in names and group_protocol != FOLLOW_PROTOCOL
    ):  # the label stands for its first other name
        return group_protocol
    return next((n for n in names if n not in LEGACY_STRATEGIES), group_protocol)


def sync_protocol_accepted(named: str, answered: str | None, group_protocol: str | None) -> bool:
    """Whether a SyncGroup (v5+) naming protocol `named` is the member's own: the name it was answered in, or,
    when this coordinator did not answer its JoinGroup (it was loaded since), the group's or any name other
    than range and roundrobin (such a member may be answered in one)."""
    if answered is not None:
        return named == answered
    return named == group_protocol or named not in LEGACY_STRATEGIES


def join_refusal(exc: BaseException) -> ErrorCode:
    """The answer to a member the bridge refused: fatal when its own protocol or subscription disagrees with the
    legacy members' (Kafka's INCONSISTENT_GROUP_PROTOCOL); anything else (a ZooKeeper failure) is not its fault,
    so a retriable answer: it joins again after its backoff."""
    if getattr(exc, "code", None) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def registers_early(
    group: ClassicGroup | None,
    member_id: str,
    answered: Mapping[str, str] | None = None,
    joining_as: str | None = None,
) -> bool:
    """Whether a joining member is registered in the legacy tree before its rebalance completes: when its id is
    known (KIP-394's second JoinGroup), so the legacy members rebalance while this side joins. Not into an Empty
    group, whose first rebalance waits group.initial.rebalance.delay.ms: the legacy members keep consuming.

    Not either when the rebalance revokes nothing on this side: every member (by `answered`, member id -> the
    name it was answered in) and the joiner (`joining_as`, the name it will be answered in) are KIP-429 members,
    which keep consuming what stays through the JoinGroup round. Registering early would make the legacy
    members give up the joiner's share at once and leave it unowned for the whole classic round (members learn
    of it by heartbeat, then JoinGroup and SyncGroup: 0.2-0.8 s measured); registered at the leader's SyncGroup
    instead, the legacy members consume it until then and the hand-over's wait for their release is the only
    gap (make before break). Eager members revoke everything before JoinGroup, so for them the legacy release
    is best overlapped with the round, as before.

    >>> registers_early(None, "m")
    False
    """
    if not member_id or group is None or member_id not in group.pending_members:
        return False
    if group.state is GroupState.EMPTY or group.initial_join is not None:
        return False
    return not keeps_consuming(group, answered or {}, joining_as)


def keeps_consuming(group: ClassicGroup, answered: Mapping[str, str], joining_as: str | None) -> bool:
    """Whether a rebalance of `group` that `joining_as` joins revokes nothing before its SyncGroup: the joiner and
    every member were (or will be) answered a KIP-429 name; a member with no answered name yet counts as eager.

    >>> g = ClassicGroup("g", 0)
    >>> keeps_consuming(g, {}, "cooperative-sticky"), keeps_consuming(g, {}, "range")
    (True, False)
    """
    if joining_as not in COOPERATIVE_PROTOCOLS:
        return False
    return all(answered.get(m) in COOPERATIVE_PROTOCOLS for m in group.members)


@dataclass(frozen=True, slots=True)
class HandOverCall:
    """What the bridge is asked at the leader's SyncGroup: the generation's members, their subscriptions (a
    KIP-429 member says in it which partitions it still owns: only those members' are here), and how long
    previous owners may take."""

    protocol: str
    members: tuple[BridgeMember, ...]
    subscriptions: dict[str, bytes]
    timeout_ms: int


def hand_over_call(
    group: ClassicGroup | None, req: SyncGroupRequest, answered: Mapping[str, str] | None = None
) -> HandOverCall | None:
    """The hand-over replacing this SyncGroup's assignment, or None when the request is not the current leader's
    SyncGroup of a completing rebalance (then the classic handler answers it as usual). `answered`: member id ->
    the name it was answered in; each member is treated by ITS protocol: only the subscriptions of those answered
    a KIP-429 name (their owned partitions are kept, not released) are handed on; a member missing from it is
    taken by the group's name.

    Members do not heartbeat while their JoinGroup/SyncGroup is answered, so the wait for previous owners stays
    well inside the shortest session (half of it, or of the rebalance timeout, at least `MIN_HAND_OVER_MS`); what
    is not held by then goes to a later rebalance."""
    if (
        group is None
        or group.state is not GroupState.COMPLETING_REBALANCE
        or group.generation != req.generation_id
        or group.leader_id != req.member_id
        or group.protocol_name is None
    ):
        return None
    protocol = group.protocol_name
    members = tuple(
        (m.member_id, m.client_id, tuple(subscription_topics(m.metadata(protocol)) or ()))
        for m in group.members.values()
    )
    shortest = min(m.session_timeout_ms for m in group.members.values())
    timeout_ms = max(MIN_HAND_OVER_MS, min(group.rebalance_timeout_ms(), shortest) // 2)
    names = answered or {}
    subscriptions = {
        m.member_id: m.metadata(protocol)
        for m in group.members.values()
        if names.get(m.member_id, protocol) in COOPERATIVE_PROTOCOLS
    }
    return HandOverCall(protocol, members, subscriptions, timeout_ms)


def hand_on_holds(
    group: ClassicGroup | None,
    withheld: Mapping[TopicPartition, tuple[str, str]],
    answered: Mapping[str, str],
) -> tuple[str, ...]:
    """The members whose SyncGroup answer the hand-over just done holds (`withheld`: partition -> (giver,
    recipient), both classic members, the giver a KIP-429 one; `answered`: member id -> the name it was answered
    in): each recipient of a withheld partition that is a member of the completing generation and was answered a
    KIP-429 name. Its answer waits for the giver's rejoin, which proves the partition revoked
    (`rejoins_in_place`), and then carries it, in the same generation: the follow-up rebalance a withheld
    partition otherwise costs (every member learns of it only at its next heartbeat) is spared. An eager
    recipient is not held (it revoked everything before its JoinGroup: a hold would keep all of its share
    unowned while the giver takes its time); it gets the partition by the follow-up rebalance, as before.

    >>> hand_on_holds(None, {TopicPartition("t", 0): ("a", "b")}, {"b": "cooperative-sticky"})
    ()
    """
    if group is None or group.state is not GroupState.COMPLETING_REBALANCE:
        return ()
    return tuple(
        sorted(
            {
                to
                for _giver, to in withheld.values()
                if to in group.members and answered.get(to) in COOPERATIVE_PROTOCOLS
            }
        )
    )


def hand_on_wait_ms(group: ClassicGroup) -> int:
    """How long a held SyncGroup answer waits at most for the giver's rejoin: the hand-over's own bound (half the
    shortest session or the rebalance timeout, at least `MIN_HAND_OVER_MS`). Clients wait longer for a SyncGroup
    answer (kafka-python: request_timeout_ms, 305 s for a consumer; librdkafka: session.timeout.ms + 3 s), and the
    coordinator counts a parked member alive. Past it the member is answered without the partition, which its
    giver's rejoin then hands over by a rebalance, as without the hold."""
    shortest = min((m.session_timeout_ms for m in group.members.values()), default=0)
    return max(MIN_HAND_OVER_MS, min(group.rebalance_timeout_ms(), shortest) // 2)


def rejoins_in_place(
    group: ClassicGroup,
    member: Member,
    req: JoinGroupRequest,
    withheld: Mapping[TopicPartition, tuple[str, str]],
    answered: Mapping[str, str],
) -> frozenset[TopicPartition] | None:
    """The `RejoinInPlace` policy of a mixed group (the classic core asks it only for a Stable group's current
    member whose rejoin Kafka would answer with a rebalance): the partitions the member now owns when its rejoin
    is only the KIP-429 revocation of partitions withheld from others for it, else None (Kafka's rebalance).
    Such a rejoin: the member was answered a cooperative name, partitions withheld for others are waiting for
    it to give them up and each of their recipients' SyncGroup answer is still held, its protocols are the same
    names with the same subscribed topics, and the partitions its subscription says it owns are exactly its
    assignment of the current generation (so the withheld ones are given up). User data is not compared: the
    coordinator computes a mixed group's assignment itself and never reads it. Then the coordinator's
    assignment stands; the current generation answers the rejoin, and the withheld partitions are handed on."""
    protocol = group.protocol_name
    if protocol is None or answered.get(member.member_id) not in COOPERATIVE_PROTOCOLS:
        return None
    giving = [to for giver, to in withheld.values() if giver == member.member_id]
    if not giving or any(to not in group.sync_holds for to in giving):
        return None
    if [n for n, _ in req.protocols] != [n for n, _ in member.protocols]:
        return None
    try:
        _, topics, owned, _ = parse_subscription(dict(req.protocols)[protocol])
        _, before, _, _ = parse_subscription(member.metadata(protocol))
        assigned = parse_assignment(member.assignment)
    except Exception:  # unreadable metadata or assignment: Kafka's rebalance decides
        return None
    if sorted(topics) != sorted(before):
        return None
    now = frozenset(TopicPartition(t, p) for t, ps in owned.items() for p in ps)
    if now != frozenset(TopicPartition(t, p) for t, ps in assigned.items() for p in ps):
        return None
    return now


def legacy_commit_partitions(
    group: ClassicGroup | None, req: OffsetCommitRequest
) -> tuple[TopicPartition, ...] | None:
    """The partitions of a generation -1 commit (no member id) into a live mixed group, which is stored as a legacy
    member's if the legacy tree says that member owns every one of them; None for any other commit."""
    if req.generation_id >= 0 or req.member_id or group is None:
        return None
    if group.state in (GroupState.EMPTY, GroupState.DEAD):
        return None
    return tuple(TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions)


def present_members(group: ClassicGroup | None) -> tuple[str, ...]:
    """The member ids the bridge is told a mixed group has (members and pending members; () once it is gone):
    the owner znodes of any other member it registered are released."""
    return (*group.members, *group.pending_members) if group is not None else ()


def watched_topics(group: ClassicGroup | None) -> list[str] | None:
    """The topics whose legacy changes rebalance the group, when the watch is (re)bound to this service (after a
    reload or a coordinator move the previous service's callback would rebalance nothing); None: no members."""
    if group is None or not group.members:
        return None
    return sorted(group.subscribed_topics or group.compute_subscribed_topics() or ())


def committed_offsets(stored: Mapping[OffsetKey, OffsetCommitValue]) -> dict[OffsetKey, int]:
    """A group's committed offsets as the offset mirror takes them: real offsets only, in partition order."""
    return {tp: v.offset for tp, v in sorted(stored.items()) if v.offset >= 0}


def remirrored_groups(state: CoordinatorState) -> list[tuple[str, dict[OffsetKey, int]]]:
    """What a freshly loaded coordinator hands the offset mirror (never-regress, so what landed costs one read):
    every broker-managed group's offsets, by group id. Standalone committers (generation 0, no protocol type) are
    left out: their ZooKeeper side is theirs."""
    out = []
    for group_id in sorted(state.view.offsets):
        group = state.groups.get(group_id)
        if group is None or (group.generation <= 0 and group.protocol_type is None):
            continue
        out.append((group_id, committed_offsets(state.view.offsets[group_id])))
    return out


# ------------------------------------------------------------------ consumer-protocol members (KIP-848)
#
# A consumer-protocol member of a mixed group is registered under /consumers/G/ids like a classic member and gets
# its share of the legacy algorithm over the combined membership at each hand-over (the bridge's `assign`, which
# holds an owner znode before a partition is counted as the member's). It is sent only what is held for it; a
# partition leaving it stays fenced by its owner znode until it heartbeats without it.

# The protocol name a hand-over of consumer members only passes: none of the legacy names, so the bridge follows
# the legacy members' own algorithm (range unless their owner znodes show roundrobin).
CONSUMER_HAND_OVER: Final = "consumer"
# How long such a hand-over waits for previous owners (consumer members keep heartbeating meanwhile).
CONSUMER_HAND_OVER_MS: Final = 5000

# Topic name -> (topic id hex, partition count), None when the topic does not exist (the service's lookup).
TopicIds = Callable[[str], "tuple[str, int] | None"]


@dataclass(frozen=True, slots=True)
class MixedConsumer:
    """A consumer-protocol member of a mixed group as the edge keeps it: `sent` is the assignment it was last
    answered (it may consume those from then on), `owned` what it last said it owns, `share` what the last
    hand-over held for it."""

    member_id: str
    client_id: str
    topics: tuple[str, ...]
    epoch: int = 1
    previous_epoch: int = 0
    sent: frozenset[TopicPartition] = frozenset()
    owned: frozenset[TopicPartition] = frozenset()
    share: frozenset[TopicPartition] = frozenset()
    # Restored after a load from its registration and owner znodes (no records hold consumer members): its epoch
    # is unknown until it heartbeats, and everything its owner znodes hold counts as sent and owned until then.
    restored: bool = False
    instance_id: str | None = None  # a static member's group.instance.id
    bridge_id: str = ""  # the id the bridge knows it by ("": its member id); see `STATIC_BRIDGE_ID_PREFIX`
    static_left: bool = (
        False  # it left with epoch -2: its share waits for its replacement or its session's end
    )

    @property
    def key(self) -> str:
        """The id the bridge knows the member by: its registration and its share follow this one."""
        return self.bridge_id or self.member_id

    def fenced(self) -> frozenset[TopicPartition]:
        """What the member may still be consuming: a partition is released for another holder only once it is
        in neither (it was answered without it and has since heartbeated without it)."""
        return self.sent | self.owned


# A static member (`group.instance.id`) is known to the bridge, and registered in the legacy tree, under this
# prefix and its instance id, not under its member id (which each restart of the client changes): a restarted
# static member replaces the one that left (epoch -2) under the same registration, so the legacy side sees no
# membership change and its share comes back to it. A dynamic member id with this prefix is refused.
STATIC_BRIDGE_ID_PREFIX: Final = "static-instance:"
# Regex subscriptions are refused: every member of a mixed group subscribes to the legacy members' exact topic
# list (a 0.8 registration names its topics; wildcard legacy members are refused too), which a pattern does not
# keep equal as topics come and go.
MIXED_REGEX_REFUSED: Final = (
    "SubscribedTopicRegex is not supported in mixed group {group} (--bridge-zk-groups): every member must "
    "subscribe to the legacy members' topic list by name; subscribe to topic names, not a pattern"
)


def _error(code: ErrorCode, message: str) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(int(code), message)


def static_bridge_id(instance_id: str) -> str:
    return STATIC_BRIDGE_ID_PREFIX + instance_id


def static_holder(members: Mapping[str, MixedConsumer], instance_id: str | None) -> MixedConsumer | None:
    """The member holding a static member's place (by its bridge id: a member restored after a load knows no
    more of itself), None for a dynamic request or a free instance id. A scan: joins and static requests only."""
    if instance_id is None:
        return None
    wanted = static_bridge_id(instance_id)
    return next((m for m in members.values() if m.key == wanted), None)


def consumer_heartbeat_refusal(
    members: Mapping[str, MixedConsumer], req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse | None:
    """The error answer to a consumer-protocol member's heartbeat into a mixed group, or None when it is served:
    what mixed groups do not support (a regex subscription: INVALID_REQUEST, fatal for the client, naming the
    setting, `MIXED_REGEX_REFUSED`), Kafka's request checks (INVALID_REQUEST), Kafka's static-member checks (a
    join under an instance id another live member holds: UNRELEASED_INSTANCE_ID; a heartbeat of a member its
    replacement took the place of: FENCED_INSTANCE_ID), a member id this coordinator does not know
    (UNKNOWN_MEMBER_ID: it rejoins with epoch 0), and an epoch that is neither its current nor its previous one
    (FENCED_MEMBER_EPOCH). `members` is keyed by member id."""
    if req.subscribed_topic_regex:
        return _error(ErrorCode.INVALID_REQUEST, MIXED_REGEX_REFUSED.format(group=req.group_id))
    if req.instance_id is not None and not req.instance_id.strip():
        return _error(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
    if req.member_epoch == -2 and req.instance_id is None:
        return _error(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    holder = static_holder(members, req.instance_id)
    if req.member_epoch == 0:
        if req.subscribed_topic_names is None:
            return _error(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if req.api_version >= 1 and not req.member_id:
            return _error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if req.topic_partitions:
            return _error(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if req.instance_id is None and req.member_id.startswith(STATIC_BRIDGE_ID_PREFIX):
            return _error(
                ErrorCode.INVALID_REQUEST,
                f"MemberId can't start with {STATIC_BRIDGE_ID_PREFIX!r} in mixed groups.",
            )
        if (
            holder is not None
            and holder.member_id != req.member_id
            and not (holder.static_left or holder.restored)
        ):
            return _error(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} cannot join the group "
                f"because the instance id is owned by {holder.member_id} member.",
            )
        return None
    if req.member_epoch < -2:
        return _error(ErrorCode.INVALID_REQUEST, f"MemberEpoch is invalid: {req.member_epoch}.")
    if holder is not None and holder.member_id != req.member_id and not holder.restored:
        # (a restored holder knows no member id: the member is told UNKNOWN_MEMBER_ID and rejoins in its place)
        return _error(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
            f"{holder.member_id}.",
        )
    member = members.get(req.member_id)
    if member is None or member.static_left:
        return _error(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
        )
    if req.instance_id is not None and member.instance_id != req.instance_id:
        return _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
    if (
        req.member_epoch > 0
        and not member.restored
        and req.member_epoch not in (member.epoch, member.previous_epoch)
    ):
        return _error(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The member epoch {req.member_epoch} is not the group's {member.epoch} for this member. "
            "The member must abandon all its partitions and rejoin.",
        )
    return None


def reported_owned(
    req: ConsumerGroupHeartbeatRequest, topics: Iterable[str], lookup: TopicIds
) -> frozenset[TopicPartition] | None:
    """The partitions a heartbeat says its member owns, by name (None: not sent, unchanged). A topic id that none
    of the member's topics has (deleted, recreated) names nothing it can hold here."""
    if req.topic_partitions is None:
        return None
    names = {}
    for name in topics:
        found = lookup(name)
        if found is not None:
            names[found[0]] = name
    return frozenset(
        TopicPartition(names[tid], p) for tid, ps in req.topic_partitions if tid in names for p in ps
    )


@dataclass(frozen=True, slots=True)
class ConsumerStep:
    """One heartbeat's outcome: the member's new state, whether its assignment is sent, and whether a hand-over
    must run (it released a partition another member waits for, or its subscription changed)."""

    member: MixedConsumer
    send: bool
    hand_over: bool


def consumer_step(
    member: MixedConsumer, owned: frozenset[TopicPartition] | None, topics: tuple[str, ...] | None, full: bool
) -> ConsumerStep:
    """A served heartbeat of a known member. It is answered its held share (never a partition whose owner znode
    is not held for it); the epoch moves when that changes. A partition it gave up (it was answered without it,
    and a later heartbeat no longer lists it) lets the fence move: a hand-over follows.

    >>> tp = TopicPartition("t", 0)
    >>> m = MixedConsumer("m", "c", ("t",), epoch=2, sent=frozenset({tp}), owned=frozenset({tp}))
    >>> s = consumer_step(m, None, None, False)
    >>> s.member.sent, s.member.epoch, s.send, s.hand_over
    (frozenset(), 3, True, False)
    >>> consumer_step(s.member, frozenset({tp}), None, False).hand_over
    False
    >>> consumer_step(s.member, frozenset(), None, False).hand_over
    True
    """
    now_owned = member.owned if owned is None else owned
    subscription_changed = topics is not None and tuple(sorted(set(topics))) != member.topics
    new_topics = tuple(sorted(set(topics))) if topics is not None else member.topics
    changed = member.share != member.sent
    epoch, previous = (member.epoch + 1, member.epoch) if changed else (member.epoch, member.previous_epoch)
    # What this answer takes away counts as owned until a later heartbeat says otherwise: this heartbeat was
    # sent before the member saw the answer (it may still be taking a partition it was sent before).
    new = replace(
        member,
        topics=new_topics,
        epoch=epoch,
        previous_epoch=previous,
        sent=member.share,
        owned=now_owned | (member.sent - member.share),
    )
    released = member.fenced() - new.fenced()
    return ConsumerStep(new, changed or full, bool(released) or subscription_changed)


def consumer_answer(
    member: MixedConsumer, send: bool, lookup: TopicIds, interval_ms: int
) -> ConsumerGroupHeartbeatResponse:
    """The heartbeat's answer: epoch, interval and, when sent, the assignment by topic id (a partition of a topic
    the lookup no longer knows is left out: the member cannot fetch it anyway)."""
    assignment = None
    if send:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(member.sent):
            found = lookup(tp.topic)
            if found is not None:
                by_topic.setdefault(found[0], []).append(tp.partition)
        assignment = tuple((tid, tuple(ps)) for tid, ps in sorted(by_topic.items()))
    return ConsumerGroupHeartbeatResponse(0, None, member.member_id, member.epoch, interval_ms, assignment)


def shares_from(
    members: Mapping[str, MixedConsumer], assigned: Mapping[str, Mapping[str, tuple[int, ...]]]
) -> dict[str, MixedConsumer]:
    """The consumer members after a hand-over: each one's share is what the bridge held for it, by its bridge id
    (a member that left meanwhile stays gone; one the hand-over did not include keeps its previous share)."""
    out = {}
    for mid, m in members.items():
        got = assigned.get(m.key)
        if got is None:
            out[mid] = m
            continue
        out[mid] = replace(m, share=frozenset(TopicPartition(t, p) for t, ps in got.items() for p in ps))
    return out


def bridge_members(
    members: Mapping[str, MixedConsumer],
) -> tuple[tuple[BridgeMember, ...], dict[str, tuple[TopicPartition, ...]]]:
    """The consumer members as the bridge's hand-over takes them (by bridge id), and what each may still be
    consuming (their owner znodes are kept and their partitions withheld from others until they give them up)."""
    ordered = sorted(members.values(), key=lambda m: m.key)
    return (
        tuple((m.key, m.client_id, m.topics) for m in ordered),
        {m.key: tuple(sorted(m.fenced())) for m in ordered},
    )


def rejoined(
    old: MixedConsumer | None, member_id: str, client_id: str, topics: tuple[str, ...]
) -> MixedConsumer:
    """A member joining (epoch 0): new, or rejoining after giving everything up (the client drops its partitions
    before it rejoins), when it keeps its share (held for it) but owns and was sent nothing; its epoch moves on.

    >>> tp = TopicPartition("t", 0)
    >>> m = rejoined(MixedConsumer("m", "c", ("t",), 4, 3, frozenset({tp}), frozenset({tp}), frozenset({tp})), "m", "c", ("t",))
    >>> m.epoch, m.sent, m.owned, m.share == frozenset({tp})
    (5, frozenset(), frozenset(), True)
    """
    if old is None:
        return MixedConsumer(member_id, client_id, topics)
    return replace(
        old,
        member_id=member_id,
        restored=False,
        static_left=False,
        client_id=client_id,
        topics=topics,
        epoch=old.epoch + 1,
        previous_epoch=old.epoch,
        sent=frozenset(),
        owned=frozenset(),
    )


@dataclass(frozen=True, slots=True)
class ConsumerJoin:
    """A served join (epoch 0): the member as it now is, the member id whose place it took (a static member's
    predecessor, to forget; None otherwise), and whether the membership the bridge sees changed (then the group
    rebalances; a static member taking its predecessor's place with the same topics changes nothing there)."""

    member: MixedConsumer
    replaced: str | None
    hand_over: bool


def consumer_joined(
    members: Mapping[str, MixedConsumer],
    member_id: str,
    client_id: str,
    topics: tuple[str, ...],
    instance_id: str | None,
) -> ConsumerJoin:
    """A join `consumer_heartbeat_refusal` let through. A dynamic member is new or rejoins (`rejoined`). A
    static member takes the place of the member holding its instance id (one that left with epoch -2, or one
    restored after a load): same bridge id, so the same registration and share (the legacy side sees nothing
    move), answered from the epoch after its predecessor's; a new static member is registered under its
    instance id.

    >>> tp = TopicPartition("t", 0)
    >>> gone = MixedConsumer("a", "c", ("t",), 4, 3, share=frozenset({tp}), instance_id="i",
    ...                      bridge_id=static_bridge_id("i"), static_left=True)
    >>> j = consumer_joined({"a": gone}, "b", "c", ("t",), "i")
    >>> j.member.member_id, j.member.key, j.member.share == frozenset({tp}), j.member.epoch, j.replaced, j.hand_over
    ('b', 'static-instance:i', True, 5, 'a', False)
    """
    if instance_id is None:
        return ConsumerJoin(rejoined(members.get(member_id), member_id, client_id, topics), None, True)
    holder = static_holder(members, instance_id)
    if holder is None:
        fresh = MixedConsumer(
            member_id, client_id, topics, instance_id=instance_id, bridge_id=static_bridge_id(instance_id)
        )
        return ConsumerJoin(fresh, None, True)
    joined = rejoined(holder, member_id, client_id, topics)
    replaced = holder.member_id if holder.member_id != member_id else None
    return ConsumerJoin(joined, replaced, joined.topics != holder.topics)


def static_left(member: MixedConsumer) -> MixedConsumer:
    """A static member's leave (epoch -2): it stays, its share held for its replacement, until its session
    passes (Kafka's rule); it is sent nothing more."""
    return replace(member, static_left=True)


def consumer_commit_check(
    members: Mapping[str, MixedConsumer], member_id: str, epoch: int
) -> ErrorCode | None:
    """A commit into a mixed group: None when `member_id` is no consumer-protocol member of it (the classic checks
    apply); NONE when it is one committing with its current or previous epoch (a commit in flight while its
    answer moved the epoch); STALE_MEMBER_EPOCH otherwise."""
    member = members.get(member_id) if member_id else None
    if member is None:
        return None
    if epoch in (member.epoch, member.previous_epoch) or (member.restored and epoch > 0):
        return ErrorCode.NONE
    return ErrorCode.STALE_MEMBER_EPOCH


# The member kinds a broker-protocol member's registration names (`zkcoord.bridge.mixed_policy.KINDS`, repeated
# here because the server does not import the bridge; a unit test holds the two equal).
CLASSIC_KIND: Final = "classic"
CONSUMER_KIND: Final = "consumer"

# A registered member as the bridge reads it back: (client id, subscribed topics, partitions its znodes hold, its
# kind: CLASSIC_KIND, CONSUMER_KIND, or None for a registration written before zkcoord recorded it).
AdoptedMember = tuple[str, tuple[str, ...], tuple[TopicPartition, ...], "str | None"]


def restored_consumers(
    classic: Iterable[str], known: Mapping[str, MixedConsumer], adopted: Mapping[str, AdoptedMember]
) -> dict[str, MixedConsumer]:
    """After a load (a restart, a coordinator move): the registered consumer-protocol members holding owner
    znodes that this service does not know. No record holds them, so they may be consuming what their owner
    znodes hold: each is kept as a member (present to the bridge, its znodes fenced: everything held counts as
    sent and owned) until it heartbeats (it resumes at once, see `resumed`), leaves or its session passes. A
    member whose registration says it is a classic member is never restored: the classic group's records hold
    the classic members, so one missing from the loaded group left (just before the crash) and its partitions
    are released at once. A registration that does not say (written by an older zkcoord) is restored unless it
    is a classic member of the loaded group (a classic member that left looks the same, and its partitions wait
    one consumer session). A member holding nothing risks no double consumption and is released as before (it
    rejoins if it is alive).

    >>> tp = TopicPartition("t", 0)
    >>> r = restored_consumers(["k"], {}, {"k": ("c", ("t",), (tp,), None), "n": ("c", ("t",), (tp,), "consumer"),
    ...                                    "e": ("c", ("t",), (), "consumer"), "x": ("c", ("t",), (tp,), "classic")})
    >>> sorted(r), r["n"].fenced() == frozenset({tp}), r["n"].restored
    (['n'], True, True)
    """
    skip = set(classic) | {m.key for m in known.values()}
    out = {}
    for mid, (client_id, topics, held, kind) in sorted(adopted.items()):
        if mid in skip or not held or kind == CLASSIC_KIND:
            continue
        tps = frozenset(held)
        # A static member is registered under its instance id (its member id is unknown until it rejoins).
        instance = mid[len(STATIC_BRIDGE_ID_PREFIX) :] if mid.startswith(STATIC_BRIDGE_ID_PREFIX) else None
        out[mid] = MixedConsumer(
            mid, client_id, topics, 0, 0, tps, tps, tps, restored=True, instance_id=instance, bridge_id=mid
        )
    return out


def resumed(member: MixedConsumer, epoch: int) -> MixedConsumer:
    """A restored member's first heartbeat (epoch > 0): it is a member again at the epoch after the one it
    sent, answered everything held for it (what it owns is among that: a partition leaves a member's znodes
    only after it gave it up), and its commits at the epoch it sent are accepted.

    >>> tp = TopicPartition("t", 0)
    >>> m = resumed(restored_consumers([], {}, {"n": ("c", ("t",), (tp,), "consumer")})["n"], 7)
    >>> m.epoch, m.previous_epoch, m.restored, m.sent == frozenset({tp})
    (8, 7, False, True)
    """
    return replace(member, epoch=epoch + 1, previous_epoch=epoch, restored=False, sent=member.share)


# A legacy member as ConsumerGroupDescribe shows it has no epoch (ZooKeeper members have none).
LEGACY_MEMBER_EPOCH: Final = -1


def _described(
    partitions: Iterable[TopicPartition], lookup: TopicIds
) -> tuple[DescribedTopicPartitions, ...]:
    """Partitions by topic id and name (a topic the lookup no longer knows is left out)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = []
    for topic, ps in sorted(by_topic.items()):
        found = lookup(topic)
        if found is not None:
            out.append(DescribedTopicPartitions(found[0], topic, tuple(sorted(ps))))
    return tuple(out)


def describe_mixed(
    group_id: str,
    group: ClassicGroup | None,
    consumers: Mapping[str, MixedConsumer],
    legacy: Mapping[str, tuple[tuple[str, ...], tuple[TopicPartition, ...]]],
    lookup: TopicIds,
) -> DescribedConsumerGroup:
    """ConsumerGroupDescribe of a mixed group: every member of the three kinds, as Kafka describes the classic
    members of a consumer group (member epoch = the generation, assignment = what it was sent). A consumer-protocol
    member's assignment is what it was answered, its target what the last hand-over held for it; a legacy member
    (member and client id: its consumer id) has epoch -1 and its owner znodes as assignment and target. The group
    epoch and assignment epoch are the classic generation; the state is Empty without members, Reconciling
    while the classic side rebalances or a consumer member has not been answered its share, Stable otherwise;
    the assignor is the classic group's protocol (`zkcoord-legacy` when it has none)."""
    members: list[DescribedConsumerMember] = []
    generation = group.generation if group is not None else 0
    protocol = group.protocol_name if group is not None else None
    for m in sorted(group.members.values(), key=lambda m: m.member_id) if group is not None else ():
        topics = tuple(sorted(subscription_topics(m.metadata(protocol)) or ())) if protocol else ()
        got = parse_assignment(m.assignment) if m.assignment else {}
        held = _described((TopicPartition(t, p) for t, ps in got.items() for p in ps), lookup)
        members.append(
            DescribedConsumerMember(
                m.member_id,
                m.group_instance_id,
                None,
                generation,
                m.client_id,
                m.client_host,
                topics,
                held,
                held,
            )
        )
    for c in sorted(consumers.values(), key=lambda c: c.member_id):
        members.append(
            DescribedConsumerMember(
                c.member_id,
                c.instance_id,
                None,
                c.epoch,
                c.client_id,
                "",
                c.topics,
                _described(c.sent, lookup),
                _described(c.share, lookup),
            )
        )
    for cid, (topics, owned) in sorted(legacy.items()):
        held = _described(owned, lookup)
        members.append(
            DescribedConsumerMember(cid, None, None, LEGACY_MEMBER_EPOCH, cid, "", topics, held, held)
        )
    rebalancing = group is not None and group.state in (
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
    )
    if not members:
        state = "Empty"
    elif rebalancing or any(c.sent != c.share for c in consumers.values()):
        state = "Reconciling"
    else:
        state = "Stable"
    return DescribedConsumerGroup(
        0, group_id, None, state, generation, generation, protocol or FOLLOW_PROTOCOL, tuple(members)
    )


def consumers_hand_over_alone(group: ClassicGroup | None, present: Iterable[str]) -> bool:
    """After the classic member list changed: whether the consumer-protocol members among `present` need a
    hand-over of their own (no classic member is left whose SyncGroup would hand over for them), so what the
    departed classic members held reaches them."""
    classic = set(present_members(group))
    return not classic and any(mid not in classic for mid in present)


def consumer_protocol_refusal(group_id: str) -> ConsumerGroupHeartbeatResponse:
    """A KIP-848 member's heartbeat to a mixed group whose edge was built without a topic lookup (the group
    service always passes one; an edge without one cannot name partitions by topic id)."""
    return ConsumerGroupHeartbeatResponse(
        int(ErrorCode.UNSUPPORTED_VERSION),
        f"group {group_id} is a mixed group (--bridge-zk-groups) and this coordinator has no topic lookup to "
        "serve consumer-protocol members; use group.protocol=classic",
    )
