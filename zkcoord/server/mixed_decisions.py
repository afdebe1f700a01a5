"""The group service's decisions for mixed groups, as pure functions of the classic group's live state: which
protocols a joining member keeps, when it is registered in the legacy tree early, when the leader's SyncGroup is
replaced by the bridge's hand-over (and with which members, subscriptions and wait), which generation -1 commit may be
a legacy member's, what the bridge is told of the member list, what the offset mirror is handed, and what follows
a hand-over. No I/O, no clock, no asyncio (the import contract holds it to the pure core's rules); the asyncio edge
that carries them out is `zkcoord.server.mixed_groups`.

Why here and not in `zkcoord.bridge.mixed_policy`: the server and the bridge are independent layers (the server
knows the bridge only through `seams.MembershipBridge`), and these decisions read the classic group's state, which
the server owns; the bridge's own decisions (names, assignment, hand-over plan) stay in `mixed_policy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatResponse
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest
from zkcoord.group.model import ClassicGroup, CoordinatorState, subscription_topics
from zkcoord.group.state import GroupState
from zkcoord.records.offsets import OffsetCommitValue
from zkcoord.topic_partition import TopicPartition

# A hand-over that left a partition unheld (its previous owner did not let go in time) is tried again this much
# later, by a rebalance, once the owner znode can be taken.
FOLLOW_UP_REBALANCE_S: Final = 1.0
# The hand-over's wait for previous owners never goes below this, whatever the members' timeouts.
MIN_HAND_OVER_MS: Final = 500
# Before the bridge releases departed members' owner znodes, the group's offsets get this long to reach ZooKeeper.
SETTLE_BEFORE_RELEASE_MS: Final = 5000

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
    """The member's protocols the legacy side knows, in the member's order (what the group is joined with)."""
    names = set(usable)
    return tuple((n, m) for n, m in req.protocols if n in names)


def join_refusal(exc: BaseException) -> ErrorCode:
    """The answer to a member the bridge refused: fatal when its own protocol or subscription disagrees with the
    legacy members' (Kafka's INCONSISTENT_GROUP_PROTOCOL); anything else (a ZooKeeper failure) is not its fault,
    so a retriable answer: it joins again after its backoff."""
    if getattr(exc, "code", None) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def registers_early(group: ClassicGroup | None, member_id: str) -> bool:
    """Whether a joining member is registered in the legacy tree before its rebalance completes: when its id is
    known (KIP-394's second JoinGroup), so the legacy members rebalance while this side joins. Not into an Empty
    group, whose first rebalance waits group.initial.rebalance.delay.ms: the legacy members keep consuming."""
    return (
        bool(member_id)
        and group is not None
        and member_id in group.pending_members
        and group.state is not GroupState.EMPTY
        and group.initial_join is None
    )


@dataclass(frozen=True, slots=True)
class HandOverCall:
    """What the bridge is asked at the leader's SyncGroup: the generation's members, their subscriptions (a
    KIP-429 member says in it which partitions it still owns), and how long previous owners may take."""

    protocol: str
    members: tuple[BridgeMember, ...]
    subscriptions: dict[str, bytes]
    timeout_ms: int


def hand_over_call(group: ClassicGroup | None, req: SyncGroupRequest) -> HandOverCall | None:
    """The hand-over replacing this SyncGroup's assignment, or None when the request is not the current leader's
    SyncGroup of a completing rebalance (then the classic handler answers it as usual).

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
    subscriptions = {m.member_id: m.metadata(protocol) for m in group.members.values()}
    return HandOverCall(protocol, members, subscriptions, timeout_ms)


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


def consumer_protocol_refusal(group_id: str) -> ConsumerGroupHeartbeatResponse:
    """A KIP-848 member's heartbeat to a mixed group: not served (the legacy tree has no place for its epochs)."""
    return ConsumerGroupHeartbeatResponse(
        int(ErrorCode.UNSUPPORTED_VERSION),
        f"group {group_id} is a mixed group (--bridge-zk-groups): consumer-protocol members are not "
        "served in mixed groups yet; use group.protocol=classic",
    )
