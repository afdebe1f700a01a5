"""Online migration between the classic and the consumer protocol (KIP-848): the two group conversions and the
classic members hosted in a consumer group, whose JoinGroup, SyncGroup, Heartbeat and LeaveGroup are answered
from the consumer group.

Follows Kafka 4's `GroupMetadataManager` (`convertToConsumerGroup`, `convertToClassicGroup`,
`classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup`) under `group.consumer.migration.policy`:

- upgrade: a ConsumerGroupHeartbeat joining a non-empty classic group whose members all use protocol type
  "consumer" converts it (parked JoinGroup/SyncGroup answered REBALANCE_IN_PROGRESS, the classic group's metadata
  tombstoned, the consumer group's records written with every member at epoch = generation, STABLE, its current
  assignment as target), so nothing moves until the new member's epoch bump computes a new target;
- hosted classic member: its JoinGroup reconciles it one step (as a consumer member's heartbeat does; the owned
  partitions are the subscription's, none for eager members, which released everything before joining), SyncGroup
  returns its current assignment, Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin (group epoch ahead,
  partitions to revoke, or partitions now free), so a partition reaches a new owner only after its old owner
  rejoined without it;
- downgrade: when the last consumer-protocol member leaves or is fenced and the others are classic, the consumer
  group is tombstoned and a Stable classic group (generation = group epoch) is written, then prepares a
  rebalance. Its members' stored assignments are what they may still hold (Kafka writes their targets): an
  upgrade before they rejoined starts from their real holdings.
"""

from __future__ import annotations

import logging
import struct

from zkcoord.errors import ErrorCode as E
from zkcoord.group import consumer as cons
from zkcoord.group.common import Effects, join_error, sync_error, touch
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from zkcoord.group.consumer_model import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicAssignment,
    to_partitions,
)
from zkcoord.group.membership import _leave_response, _prepare_rebalance
from zkcoord.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import CONSUMER_PROTOCOL_TYPE, ClassicGroup, CoordinatorState, Member, group_record
from zkcoord.group.results import Cancel, Result, Schedule, TimerKey, TimerKind
from zkcoord.group.state import GroupState
from zkcoord.records.consumer_groups import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ClassicMemberMetadata,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    TargetAssignmentEpochValue,
    TargetMemberValue,
)
from zkcoord.records.offsets import GroupMetadataKey

log = logging.getLogger(__name__)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MAX_EMBEDDED_ITEMS = 1 << 20

# ------------------------------------------------------------------------------- the embedded consumer protocol


class MalformedEmbedded(ValueError):
    """ConsumerProtocolSubscription/Assignment bytes that do not parse."""


class _Embedded:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedEmbedded(f"truncated at byte {self.pos} ({n} bytes needed)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > MAX_EMBEDDED_ITEMS or n > len(self.data) - self.pos:
            raise MalformedEmbedded(f"array of {n} items at byte {self.pos - 4}")
        return n

    def string(self) -> str:
        n = self.i16()
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise MalformedEmbedded(f"string at byte {self.pos - n} is not UTF-8") from exc

    def bytes_(self) -> None:
        n = self.i32()
        if n >= 0:
            self.take(n)


def parse_subscription(data: bytes) -> tuple[int, tuple[str, ...], dict[str, tuple[int, ...]], int]:
    """ConsumerProtocolSubscription v0-v3: (version, topics, owned partitions by topic name, generation or -1).
    Fields a version does not have are empty; later versions' extra fields are ignored, as Kafka reads them."""
    r = _Embedded(data)
    version = r.i16()
    if version < 0:
        raise MalformedEmbedded(f"version {version}")
    topics = tuple(r.string() for _ in range(r.count()))
    r.bytes_()  # user data
    owned: dict[str, tuple[int, ...]] = {}
    generation = -1
    if version >= 1:
        for _ in range(r.count()):
            topic = r.string()
            owned[topic] = tuple(r.i32() for _ in range(r.count()))
    if version >= 2:
        generation = r.i32()
    return version, topics, owned, generation


def parse_assignment(data: bytes) -> dict[str, tuple[int, ...]]:
    """The partitions of a ConsumerProtocolAssignment (any version: the prefix is shared); {} for no bytes."""
    if not data:
        return {}
    r = _Embedded(data)
    r.i16()
    out: dict[str, tuple[int, ...]] = {}
    for _ in range(r.count()):
        topic = r.string()
        out[topic] = tuple(r.i32() for _ in range(r.count()))
    return out


def encode_assignment(version: int, partitions: dict[str, tuple[int, ...]]) -> bytes:
    """ConsumerProtocolAssignment in `version` (the layout is the same in v0-v3): topics sorted, no user data."""
    out = bytearray(_I16.pack(max(0, min(version, 3))) + _I32.pack(len(partitions)))
    for topic in sorted(partitions):
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(partitions[topic]))
        for p in sorted(partitions[topic]):
            out += _I32.pack(p)
    out += _I32.pack(-1)
    return bytes(out)


def _by_name(group: ConsumerGroup, assignment: TopicAssignment) -> dict[str, tuple[int, ...]]:
    out = {}
    for tid, ps in assignment.items():
        name = group.topic_name(tid)
        if name and ps:
            out[name] = tuple(sorted(ps))
    return out


def _by_id(by_name: dict[str, tuple[int, ...]], topics: cons.TopicLookup) -> TopicAssignment:
    """Topic names to ids; partitions of topics that do not exist (or beyond their count) are dropped."""
    out: dict[str, frozenset[int]] = {}
    for name, ps in by_name.items():
        found = topics(name)
        if found is None:
            continue
        tid, count = found
        kept = frozenset(p for p in ps if 0 <= p < count)
        if kept:
            out[tid] = out.get(tid, frozenset()) | kept
    return out


# ---------------------------------------------------------------------------------------------- timers, keys


def join_timeout_key(group_id: str, member_id: str) -> TimerKey:
    """A hosted classic member told to rejoin must send JoinGroup within its rebalance timeout."""
    return TimerKey(TimerKind.CLASSIC_JOIN, group_id, member_id)


def sync_timeout_key(group_id: str, member_id: str) -> TimerKey:
    """A hosted classic member answered JoinGroup must send SyncGroup within its rebalance timeout."""
    return TimerKey(TimerKind.CLASSIC_SYNC, group_id, member_id)


def is_classic(member: ConsumerMember) -> bool:
    return member.metadata.classic is not None


def _session_ms(member: ConsumerMember, st: CoordinatorState) -> int:
    c = member.metadata.classic
    return c.session_timeout_ms if c is not None else st.config.group_consumer_session_timeout_ms


class _Both:
    """One handler's effects over both group kinds: consumer records replayed into the consumer groups, classic
    ones into the view, all in one ordered list."""

    def __init__(self, st: CoordinatorState) -> None:
        self.consumer = cons._Out(st)
        self.classic = Effects(st)
        self.classic_first = (
            False  # an upgrade tombstones the classic group before the consumer group's records
        )

    def result(self, *responses: tuple[int, object]) -> Result:
        a, b = self.consumer.records, self.classic.records
        records = (b + a) if self.classic_first else (a + b)
        timers = list(self.consumer.timers) + list(self.classic.timers)
        resp = list(self.classic.responses) + list(responses)
        return Result(tuple(records), tuple(resp), tuple(timers))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------- upgrade


def _upgrade_refusal(st: CoordinatorState, classic: ClassicGroup) -> str | None:
    """Kafka's validateOnlineUpgrade; None when the classic group may become a consumer group."""
    if not st.config.upgrade_enabled:
        return "the online upgrade is disabled"
    if classic.state is GroupState.DEAD:
        return "the group is dead"
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or any(
        m.protocol_type != CONSUMER_PROTOCOL_TYPE for m in classic.members.values()
    ):
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) > st.config.group_consumer_max_size:
        return "the group size exceeds the consumer group maximum size"
    if classic.protocol_name is None:
        return "the group has no protocol yet"
    return None


def _convert_to_consumer(
    b: _Both, st: CoordinatorState, classic: ClassicGroup, topics: cons.TopicLookup, now_ms: int
) -> None:
    """convertToConsumerGroup. Raises MalformedEmbedded (nothing written yet) when a member's embedded protocol
    does not parse."""
    gid = classic.group_id
    protocol = classic.protocol_name or ""
    members = []
    for m in classic.members.values():
        _version, names, _owned, _gen = parse_subscription(m.metadata(protocol))
        assigned = _by_id(parse_assignment(m.assignment), topics)
        members.append((m, names, assigned))
    out = b.classic
    b.classic_first = True
    for m in classic.members.values():  # parked requests learn of the new rebalance; classic timers stop
        if m.join_token is not None:
            out.respond(m.join_token, join_error(m.join_version, m.member_id, E.REBALANCE_IN_PROGRESS))
            classic.set_join_token(m, None)
        if m.sync_token is not None:
            out.respond(m.sync_token, sync_error(E.REBALANCE_IN_PROGRESS))
            m.sync_token = None
        out.cancel(TimerKey(TimerKind.HEARTBEAT, gid, m.member_id))
    for mid in classic.pending_members:
        out.cancel(TimerKey(TimerKind.PENDING_MEMBER, gid, mid))
    out.cancel(TimerKey(TimerKind.JOIN, gid))
    out.cancel(TimerKey(TimerKind.SYNC, gid))
    out.record((GroupMetadataKey(gid), None))
    del st.groups[gid]
    log.info("group=%s upgraded from classic to consumer at generation %d", gid, classic.generation)
    gen = classic.generation
    c = b.consumer
    for m, names, _assigned in members:
        c.record(
            ConsumerMemberKey(MEMBER_METADATA, gid, m.member_id),
            MemberMetadataValue(
                m.group_instance_id,
                None,
                m.client_id,
                m.client_host,
                tuple(sorted(set(names))),
                None,
                m.rebalance_timeout_ms,
                ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
            ),
        )
    c.record(ConsumerGroupKey(GROUP_METADATA, gid), GroupEpochValue(gen))
    group = st.consumer_groups[gid]
    cons._update_topics(c, group, topics)
    for m, _names, assigned in members:
        c.record(
            ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, m.member_id),
            TargetMemberValue(to_partitions(assigned)),
        )
    c.record(ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, gid), TargetAssignmentEpochValue(gen))
    for m, _names, assigned in members:
        c.record(
            ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id),
            CurrentAssignmentValue(gen, gen, int(MemberState.STABLE), to_partitions(assigned), ()),
        )
        c.timers.append(Schedule(cons.session_key(gid, m.member_id), now_ms + m.session_timeout_ms))


def handle_consumer_heartbeat(
    st: CoordinatorState,
    req: ConsumerGroupHeartbeatRequest,
    now_ms: int,
    token: int,
    topics: cons.TopicLookup,
    new_member_id: str,
    catalog: cons.TopicCatalog | None = None,
    topics_version: int | None = None,
) -> Result:
    """ConsumerGroupHeartbeat with online migration: a joining member may upgrade a classic group first; a
    consumer-protocol member leaving a group of classic members downgrades it. `catalog`: every topic's name,
    for regular-expression subscriptions; `topics_version`: as `consumer.handle_consumer_heartbeat`'s."""
    if req.member_epoch > 0:
        # Neither a join (an upgrade) nor a leave (a downgrade): the consumer protocol's own heartbeat, the
        # steady member's hot path, without the two-kind bookkeeping it would not use.
        return cons.handle_consumer_heartbeat(
            st, req, now_ms, token, topics, new_member_id, catalog, topics_version
        )
    b = _Both(st)
    classic = st.groups.get(req.group_id)
    empty = classic is not None and not (classic.members or classic.pending_members)
    if req.member_epoch == 0 and empty and cons._invalid(req) is None:
        # maybeDeleteEmptyClassicGroup: an empty classic group (offsets only) gives way to the consumer group;
        # its metadata is tombstoned so a replay does not find both (its offsets stay).
        b.classic_first = True
        if req.group_id in st.view.groups:
            b.classic.record((GroupMetadataKey(req.group_id), None))
        for kind in (TimerKind.JOIN, TimerKind.SYNC):
            b.classic.cancel(TimerKey(kind, req.group_id))
        del st.groups[req.group_id]
        classic = None
    if (
        req.member_epoch == 0
        and classic is not None
        and (classic.members or classic.pending_members)
        and cons._invalid(req) is None
    ):
        refusal = _upgrade_refusal(st, classic)
        if refusal is not None:
            log.info("group=%s cannot be upgraded to a consumer group: %s", req.group_id, refusal)
            return b.result(
                (token, cons._error(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."))
            )
        try:
            _convert_to_consumer(b, st, classic, topics, now_ms)
        except MalformedEmbedded as exc:
            msg = (
                f"Cannot upgrade classic group {req.group_id} to consumer group because the embedded consumer "
                f"protocol is malformed: {exc}."
            )
            return b.result((token, cons._error(E.GROUP_ID_NOT_FOUND, msg)))
    group = st.consumer_groups.get(req.group_id)
    if (
        req.member_epoch == cons.LEAVE_EPOCH
        and group is not None
        and req.member_id in group.members
        and _downgrade_allowed(st, group, req.member_id)
    ):
        _convert_to_classic(b, st, group, req.member_id, now_ms)
        return b.result((token, ConsumerGroupHeartbeatResponse(0, None, req.member_id, req.member_epoch, 0)))
    resp = cons._heartbeat(b.consumer, st, req, now_ms, topics, new_member_id, catalog, topics_version)
    return b.result((token, resp))


# ------------------------------------------------------------------------------------------------- downgrade


def _downgrade_allowed(st: CoordinatorState, group: ConsumerGroup, leaving: str) -> bool:
    """validateOnlineDowngradeWithFencedMember: the leaving member is the last consumer-protocol one, others
    remain, the policy allows it and they fit in a classic group."""
    member = group.members.get(leaving)
    if member is None or is_classic(member):
        return False
    if any(not is_classic(m) for mid, m in group.members.items() if mid != leaving):
        return False
    if len(group.members) <= 1:
        return False
    if not st.config.downgrade_enabled:
        log.info(
            "group=%s cannot be downgraded to a classic group: the online downgrade is disabled",
            group.group_id,
        )
        return False
    return len(group.members) - 1 <= st.config.group_max_size


def _union(a: TopicAssignment, b: TopicAssignment) -> TopicAssignment:
    return {t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in set(a) | set(b)}


def _convert_to_classic(
    b: _Both, st: CoordinatorState, group: ConsumerGroup, leaving: str, now_ms: int
) -> None:
    """convertToClassicGroup: consumer-group tombstones (Kafka's order), then a Stable classic group whose members
    hold their target assignments, written and rebalanced."""
    gid = group.group_id
    c = b.consumer
    keep = [(mid, m) for mid, m in group.members.items() if mid != leaving]
    # Kafka writes each member's target assignment here; zkcoord writes what the member may still hold (its
    # assigned and pending-revocation partitions), so that an upgrade before the classic rebalance completes
    # starts from the members' real holdings, never handing a partition a classic member still consumes.
    holds = {mid: _union(m.assigned, m.pending_revocation) for mid, m in keep}
    targets = {mid: _by_name(group, holds[mid]) for mid, _m in keep}
    epoch = group.group_epoch
    ids = list(group.members)
    for mid in ids:
        c.timers.append(Cancel(cons.session_key(gid, mid)))
        c.timers.append(Cancel(cons.rebalance_key(gid, mid)))
        c.timers.append(Cancel(join_timeout_key(gid, mid)))
        c.timers.append(Cancel(sync_timeout_key(gid, mid)))
    for mid in ids:
        c.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, mid), None)
    for mid in ids:
        c.record(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, mid), None)
    c.record(ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, gid), None)
    for mid in ids:
        c.record(ConsumerMemberKey(MEMBER_METADATA, gid, mid), None)
    c.record(ConsumerGroupKey(PARTITION_METADATA, gid), None)
    c.record(ConsumerGroupKey(GROUP_METADATA, gid), None)
    classic = ClassicGroup(gid, now_ms)
    classic.generation = epoch
    for mid, m in keep:
        meta = m.metadata
        assert meta.classic is not None
        timeout = (
            meta.rebalance_timeout_ms if meta.rebalance_timeout_ms >= 0 else meta.classic.session_timeout_ms
        )
        classic.add(
            Member(
                mid,
                meta.instance_id,
                meta.client_id,
                meta.client_host,
                timeout,
                meta.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                meta.classic.protocols,
            ),
            None,
            0,
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for mid, member in classic.members.items():
        try:
            version = parse_subscription(member.metadata(classic.protocol_name))[0]
        except MalformedEmbedded:
            version = 0
        member.assignment = encode_assignment(version, targets[mid])
    classic.state = GroupState.STABLE  # Kafka builds the downgraded group Stable, then rebalances it
    classic.state_timestamp = now_ms
    st.groups[gid] = classic
    out = b.classic
    out.record(group_record(classic, now_ms))
    for member in classic.members.values():
        touch(out, classic, member, now_ms, member.session_timeout_ms)
    log.info("group=%s downgraded from consumer to classic at generation %d", gid, epoch)
    _prepare_rebalance(out, classic, now_ms, f"Downgrade group {gid} from consumer to classic.")


# ------------------------------------------------------------------------------------- hosted classic members


def _classic_error(
    st: CoordinatorState, group: ConsumerGroup, member_id: str
) -> tuple[ConsumerMember | None, E]:
    member = group.members.get(member_id)
    if member is None or not is_classic(member):
        return None, E.UNKNOWN_MEMBER_ID
    return member, E.NONE


def _supports(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """ConsumerGroup.supportsClassicProtocols: the consumer type, and a protocol every classic member has."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    classic = [m for m in group.members.values() if m.metadata.classic is not None]
    if not classic:
        return True
    return any(all(n in {p for p, _ in m.metadata.classic.protocols} for m in classic) for n in names)  # type: ignore[union-attr]


def handle_join(
    st: CoordinatorState,
    req: JoinGroupRequest,
    now_ms: int,
    token: int,
    member_uuid: str,
    topics: cons.TopicLookup,
) -> Result:
    """A classic JoinGroup to a consumer group (classicGroupJoinToConsumerGroup)."""
    b = _Both(st)
    v = req.api_version
    cfg = st.config
    group = st.consumer_groups[req.group_id]

    def fail(code: E, member_id: str = req.member_id) -> Result:
        return b.result((token, join_error(v, member_id, code)))

    if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        return fail(E.INVALID_SESSION_TIMEOUT)
    unknown = req.member_id == ""
    member_id = member_uuid if unknown else req.member_id
    if member_id not in group.members and len(group.members) >= cfg.group_consumer_max_size:
        return fail(E.GROUP_MAX_SIZE_REACHED)
    if not _supports(group, req.protocol_type, {n for n, _ in req.protocols}):
        return fail(E.INCONSISTENT_GROUP_PROTOCOL)
    if unknown and v >= 4 and req.group_instance_id is None:
        return b.result((token, join_error(v, member_id, E.MEMBER_ID_REQUIRED)))
    if req.group_instance_id is not None:
        # A hosted classic static member (getOrMaybeSubscribeStaticConsumerGroupMember with the classic protocol):
        # a new member id takes the place of whichever member holds the instance id, without waiting for it to
        # leave; a known member id must be the one the instance id names.
        held_by = group.static_members.get(req.group_instance_id)
        if not unknown and held_by is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        if not unknown and held_by != member_id:
            return fail(E.FENCED_INSTANCE_ID)
        if unknown and held_by is not None:
            cons._replace_static_member(b.consumer, group, group.members[held_by], member_id)
            group.join_deadlines.pop(held_by, None)
            for key in (join_timeout_key(group.group_id, held_by), sync_timeout_key(group.group_id, held_by)):
                b.consumer.timers.append(Cancel(key))
    existing = group.members.get(member_id)
    if existing is not None and not is_classic(existing):
        return fail(E.UNKNOWN_MEMBER_ID)
    try:
        _version, names, owned_by_name, _generation = parse_subscription(req.protocols[0][1])
    except MalformedEmbedded:
        return fail(E.INCONSISTENT_GROUP_PROTOCOL)
    owned: TopicAssignment = _by_id(owned_by_name, topics)
    rebalance_ms = req.session_timeout_ms if req.rebalance_timeout_ms < 0 else req.rebalance_timeout_ms
    old = existing.metadata if existing is not None else None
    value = MemberMetadataValue(
        req.group_instance_id if req.group_instance_id is not None else (old.instance_id if old else None),
        old.rack_id if old else None,
        req.client_id,
        req.client_host,
        tuple(sorted(set(names))),
        None,
        rebalance_ms,
        ClassicMemberMetadata(req.session_timeout_ms, req.protocols),
    )
    c = b.consumer
    bump = False
    if value != old:
        c.record(ConsumerMemberKey(MEMBER_METADATA, group.group_id, member_id), value)
        bump = old is None or old.subscribed_topic_names != value.subscribed_topic_names
    bump = cons._update_topics(c, group, topics) or bump
    if bump:
        c.record(ConsumerGroupKey(GROUP_METADATA, group.group_id), GroupEpochValue(group.group_epoch + 1))
    if group.group_epoch > group.assignment_epoch:
        cons._new_target(c, st, group)
    member = group.members[member_id]
    cons._reconcile(c, group, member, owned)
    member = group.members[member_id]
    gid = group.group_id
    c.timers.append(Cancel(join_timeout_key(gid, member_id)))
    c.timers.append(Schedule(cons.session_key(gid, member_id), now_ms + req.session_timeout_ms))
    c.timers.append(Schedule(sync_timeout_key(gid, member_id), now_ms + rebalance_ms))
    group.join_deadlines.pop(member_id, None)
    response = JoinGroupResponse(
        0,
        member.member_epoch,
        CONSUMER_PROTOCOL_TYPE,
        req.protocols[0][0],
        "",
        False,
        member_id,
        (),
    )
    return b.result((token, response))


def _rejoin_timeout(c: cons._Out, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> None:
    """scheduleConsumerGroupJoinTimeoutIfAbsent: the first 'rejoin' answer starts the member's rebalance timeout."""
    if member.member_id not in group.join_deadlines:
        deadline = now_ms + max(member.metadata.rebalance_timeout_ms, 0)
        group.join_deadlines[member.member_id] = deadline
        c.timers.append(Schedule(join_timeout_key(group.group_id, member.member_id), deadline))


def handle_sync(st: CoordinatorState, req: SyncGroupRequest, now_ms: int, token: int) -> Result:
    """A classic SyncGroup to a consumer group: the member's current assignment, in its protocol's version."""
    b = _Both(st)
    group = st.consumer_groups[req.group_id]
    member, err = _classic_error(st, group, req.member_id)
    if member is None:
        return b.result((token, sync_error(err)))
    classic = member.metadata.classic
    assert classic is not None
    if req.generation_id != member.member_epoch:
        return b.result((token, sync_error(E.ILLEGAL_GENERATION)))
    name = classic.protocols[0][0] if classic.protocols else ""
    if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        req.protocol_name is not None and req.protocol_name != name
    ):
        return b.result((token, sync_error(E.INCONSISTENT_GROUP_PROTOCOL)))
    c = b.consumer
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        _rejoin_timeout(c, group, member, now_ms)
        return b.result((token, sync_error(E.REBALANCE_IN_PROGRESS)))
    gid = group.group_id
    c.timers.append(Cancel(sync_timeout_key(gid, member.member_id)))
    c.timers.append(Schedule(cons.session_key(gid, member.member_id), now_ms + classic.session_timeout_ms))
    try:
        version = parse_subscription(classic.protocols[0][1])[0]
    except MalformedEmbedded:
        version = 0
    assignment = encode_assignment(version, _by_name(group, member.assigned))
    return b.result((token, SyncGroupResponse(0, CONSUMER_PROTOCOL_TYPE, name, assignment)))


def must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Heartbeat's REBALANCE_IN_PROGRESS: the group epoch moved on, the member must revoke, or partitions it
    waits for are free now."""
    if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        target = group.target.get(member.member_id, {})
        for t, ps in target.items():
            for p in ps - member.assigned.get(t, frozenset()):
                owner = group.owners.get((t, p))
                if owner is not None and owner != member.member_id:
                    return False  # still waiting on another member
        return True
    return False


def handle_heartbeat(st: CoordinatorState, req: HeartbeatRequest, now_ms: int, token: int) -> Result:
    b = _Both(st)
    group = st.consumer_groups[req.group_id]
    member, err = _classic_error(st, group, req.member_id)
    if member is None:
        return b.result((token, HeartbeatResponse(int(err))))
    if req.generation_id != member.member_epoch:
        return b.result((token, HeartbeatResponse(int(E.ILLEGAL_GENERATION))))
    c = b.consumer
    c.timers.append(
        Schedule(cons.session_key(group.group_id, member.member_id), now_ms + _session_ms(member, st))
    )
    if must_rejoin(group, member):
        _rejoin_timeout(c, group, member, now_ms)
        return b.result((token, HeartbeatResponse(int(E.REBALANCE_IN_PROGRESS))))
    return b.result((token, HeartbeatResponse(0)))


def handle_leave(st: CoordinatorState, req: LeaveGroupRequest, now_ms: int, token: int) -> Result:
    """classicGroupLeaveToConsumerGroup: each classic member named leaves; one group epoch bump for all."""
    b = _Both(st)
    group = st.consumer_groups[req.group_id]
    c = b.consumer
    results = []
    removed = False
    for leaving in req.members:
        mid = leaving.member_id
        if leaving.group_instance_id is not None and not mid:
            found = [m for m in group.members.values() if m.metadata.instance_id == leaving.group_instance_id]
            mid = found[0].member_id if found else ""
        member, err = _classic_error(st, group, mid)
        if member is None:
            results.append(LeaveGroupMemberResponse(leaving.member_id, leaving.group_instance_id, int(err)))
            continue
        _remove(c, group, mid)
        removed = True
        results.append(LeaveGroupMemberResponse(mid, leaving.group_instance_id, 0))
    if removed:
        cons._update_topics(c, group, lambda name: _known(group, name))  # topics no member subscribes to go
        c.record(ConsumerGroupKey(GROUP_METADATA, group.group_id), GroupEpochValue(group.group_epoch + 1))
    return b.result((token, _leave_response(req, 0, tuple(results))))


def _known(group: ConsumerGroup, name: str) -> tuple[str, int] | None:
    t = group.topics.get(name)
    return (t.topic_id, t.partitions) if t is not None else None


def _remove(c: cons._Out, group: ConsumerGroup, mid: str) -> None:
    gid = group.group_id
    c.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, mid), None)
    c.record(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, mid), None)
    c.record(ConsumerMemberKey(MEMBER_METADATA, gid, mid), None)
    group.join_deadlines.pop(mid, None)
    for key in (cons.session_key, cons.rebalance_key, join_timeout_key, sync_timeout_key):
        c.timers.append(Cancel(key(gid, mid)))


# ----------------------------------------------------------------------------------------------------- timers


def on_timer(st: CoordinatorState, key: TimerKey, now_ms: int) -> Result:
    """A consumer group's member timer: session, revocation, classic join or sync timeout. A fenced member that
    was the last consumer-protocol one downgrades the group (consumerGroupFenceMember)."""
    group = st.consumer_groups.get(key.group_id)
    member = group.members.get(key.member_id) if group is not None else None
    if group is None or member is None:
        if key.kind in (TimerKind.CLASSIC_JOIN, TimerKind.CLASSIC_SYNC):
            return Result()
        return cons.on_consumer_timer(st, key, now_ms)
    if key.kind is TimerKind.CONSUMER_REBALANCE and member.state is not MemberState.UNREVOKED_PARTITIONS:
        return Result()
    if key.kind is TimerKind.CLASSIC_JOIN and group.join_deadlines.get(member.member_id, now_ms + 1) > now_ms:
        return Result()  # the member rejoined since (stale firing)
    if _downgrade_allowed(st, group, member.member_id):
        b = _Both(st)
        _convert_to_classic(b, st, group, member.member_id, now_ms)
        return b.result()
    if key.kind in (TimerKind.CLASSIC_JOIN, TimerKind.CLASSIC_SYNC):
        out = cons._Out(st)
        group.join_deadlines.pop(member.member_id, None)
        cons._remove_member(out, group, member)
        out.timers.append(Cancel(join_timeout_key(group.group_id, member.member_id)))
        out.timers.append(Cancel(sync_timeout_key(group.group_id, member.member_id)))
        return out.result()
    return cons.on_consumer_timer(st, key, now_ms)
