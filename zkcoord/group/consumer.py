"""The consumer rebalance protocol's handlers (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe, the session
and rebalance timers, and the member-epoch checks of OffsetCommit/OffsetFetch for consumer groups.

Follows Kafka's `GroupMetadataManager.consumerGroupHeartbeat` and `CurrentAssignmentBuilder`, step for step:

1. validate the request (INVALID_REQUEST with Kafka's message), find or create the group and the member, and check
   the member epoch (FENCED_MEMBER_EPOCH unless it is the current one, or the previous one with owned partitions
   all still assigned: a lost response);
2. a changed subscription or subscribed-topic metadata (a partition increase) bumps the group epoch (for a group
   without regular expressions the topics are looked up again only when the edge's topic version moved or the
   subscribed names changed, as Kafka refreshes a group's subscription metadata only when the metadata image
   changed);
3. a group epoch ahead of the assignment epoch computes a new target assignment with the group's server-side
   assignor (only the members whose target changed are written);
4. the member reconciles toward its target: partitions leaving it are revoked first (UNREVOKED_PARTITIONS, the
   epoch stays), and it is given a partition only once no other member owns it (UNRELEASED_PARTITIONS until then),
   so a partition never reaches a new owner before the old one released it;
5. the answer carries the member epoch, the heartbeat interval and, when it changed, the assignment.

Static members (KIP-345 carried into KIP-848) are found by their instance id: one leaving with epoch -2 keeps its
assignment until its session expires, and a new member id joining with the same instance id within that time
takes its place and its assignment (no new group epoch); while the old one has not left, the new one is refused
(UNRELEASED_INSTANCE_ID), and a member id that is not the instance's current one is fenced (FENCED_INSTANCE_ID).
A member may subscribe with a regular expression (v1, `consumer_regex`): each expression of the group is resolved
against the topics that exist and stored (ConsumerGroupRegularExpression records); a new expression is resolved at
once, the others again on a heartbeat once `group.consumer.regex.refresh.interval.ms` has passed, and a changed
resolution bumps the group epoch like a changed subscription.

Every change is a record (`zkcoord.records.consumer_groups`) applied through `replay_consumer` as it is emitted,
so the live groups are always what replaying the log gives. Session deadlines and rebalance deadlines are timers.
Deterministic: the inputs are state, request, now_ms, token, the topic lookup and catalog and the edge's fresh
member id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from zkcoord.errors import ErrorCode as E
from zkcoord.group import consumer_regex
from zkcoord.group.consumer_assignors import assign
from zkcoord.group.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from zkcoord.group.consumer_model import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicAssignment,
    replay_consumer,
    to_partitions,
)
from zkcoord.group.model import CoordinatorState
from zkcoord.group.results import Cancel, Result, Schedule, TimerKey, TimerKind, TimerOp
from zkcoord.records.consumer_groups import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    ConsumerRegexKey,
    ConsumerValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    RegexValue,
    TargetAssignmentEpochValue,
    TargetMemberValue,
    TopicMetadata,
)
from zkcoord.records.offsets import Record

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MAX_NAME_BYTES = 32767  # a Kafka string field

# The edge's view of the topics: name -> (topic id hex, partition count), None when the topic does not exist.
TopicLookup = Callable[[str], "tuple[str, int] | None"]
# The edge's list of every topic's name, for resolving regular expressions (None: no catalog, they match nothing).
TopicCatalog = Callable[[], Iterable[str]]


class _Out:
    """One handler's effects: records are replayed into the consumer groups as they are emitted."""

    def __init__(self, st: CoordinatorState) -> None:
        self.st = st
        self.records: list[Record] = []
        self.timers: list[TimerOp] = []

    def record(
        self, key: ConsumerGroupKey | ConsumerMemberKey | ConsumerRegexKey, value: ConsumerValue | None
    ) -> None:
        self.records.append((key, value))
        replay_consumer(self.st.consumer_groups, key, value)

    def result(self, *responses: tuple[int, object]) -> Result:
        return Result(tuple(self.records), tuple(responses), tuple(self.timers))  # type: ignore[arg-type]


def _error(code: E, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(int(code), message)


def _invalid(req: ConsumerGroupHeartbeatRequest) -> str | None:
    """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` messages; None when the request is well formed."""
    # Kafka's throwIfEmptyString: a string of whitespace only is empty too.
    if not req.group_id.strip():
        return "GroupId can't be empty."
    if req.instance_id is not None and not req.instance_id.strip():
        return "InstanceId can't be empty."
    if req.rack_id is not None and not req.rack_id.strip():
        return "RackId can't be empty."
    if req.member_epoch == 0:
        if req.api_version >= 1 and not req.member_id:
            return "MemberId can't be empty."
        if req.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if req.rebalance_timeout_ms < 0:
            return "RebalanceTimeoutMs must be positive."
        if req.topic_partitions is None or req.topic_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    elif req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH) or req.member_epoch > 0:
        if not req.member_id.strip():
            return "MemberId can't be empty."
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return "InstanceId can't be null."
    else:
        return f"MemberEpoch is invalid: {req.member_epoch}."
    return None


def _owned(req: ConsumerGroupHeartbeatRequest) -> TopicAssignment | None:
    if req.topic_partitions is None:
        return None
    out: dict[str, set[int]] = {}
    for t, ps in req.topic_partitions:
        out.setdefault(t, set()).update(ps)
    return {t: frozenset(ps) for t, ps in out.items() if ps}


def _is_subset(owned: TopicAssignment | None, assigned: TopicAssignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def heartbeat_interval(st: CoordinatorState) -> int:
    return st.config.group_consumer_heartbeat_interval_ms


def session_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> TimerKey:
    return TimerKey(TimerKind.CONSUMER_REBALANCE, group_id, member_id)


def is_consumer_group(st: CoordinatorState, group_id: str) -> bool:
    return group_id in st.consumer_groups


def classic_group_blocks(st: CoordinatorState, group_id: str) -> bool:
    """A classic group with members holds this id (online migration is not served: Kafka's 'not a consumer
    group'). An Empty classic group, offsets only, becomes a consumer group on the first consumer member."""
    classic = st.groups.get(group_id)
    return classic is not None and bool(classic.members or classic.pending_members)


# ------------------------------------------------------------------------------------------------- heartbeat


def handle_consumer_heartbeat(
    st: CoordinatorState,
    req: ConsumerGroupHeartbeatRequest,
    now_ms: int,
    token: int,
    topics: TopicLookup,
    new_member_id: str,
    catalog: TopicCatalog | None = None,
    topics_version: int | None = None,
) -> Result:
    """ConsumerGroupHeartbeat after the common status checks (coordinator, loading). `new_member_id` is the edge's
    fresh uuid, used only for a v0 member joining without an id; `catalog` lists the topics regexes resolve in.
    `topics_version` moves whenever `topics` may answer differently (a topic created, deleted or grown, an id
    stored); None: unknown, the subscribed topics are looked up on every heartbeat."""
    out = _Out(st)
    resp = _heartbeat(out, st, req, now_ms, topics, new_member_id, catalog, topics_version)
    return out.result((token, resp))


def _heartbeat(
    out: _Out,
    st: CoordinatorState,
    req: ConsumerGroupHeartbeatRequest,
    now_ms: int,
    topics: TopicLookup,
    new_member_id: str,
    catalog: TopicCatalog | None = None,
    topics_version: int | None = None,
) -> ConsumerGroupHeartbeatResponse:
    cfg = st.config
    invalid = _invalid(req)
    if invalid is not None:
        return _error(E.INVALID_REQUEST, invalid)
    if req.subscribed_topic_regex:
        bad = consumer_regex.check(req.subscribed_topic_regex)
        if bad is not None:
            return _error(E.INVALID_REGULAR_EXPRESSION, bad)
    if req.server_assignor is not None and req.server_assignor not in cfg.group_consumer_assignors:
        supported = ", ".join(cfg.group_consumer_assignors)
        return _error(
            E.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {supported}.",
        )
    if classic_group_blocks(st, req.group_id):
        return _error(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
    group = st.consumer_groups.get(req.group_id)
    member = group.members.get(req.member_id) if group is not None and req.member_id else None
    if group is None and req.member_epoch != 0:
        # Kafka: only a joining member (epoch 0) creates the group; a leave looks the group up by id.
        leaving = req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH)
        what = "Group" if leaving else "Consumer group"
        return _error(E.GROUP_ID_NOT_FOUND, f"{what} {req.group_id} not found.")
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        assert group is not None
        if req.instance_id is not None:
            static, refused = _static_member(group, req)
            if refused is not None:
                return refused
            assert static is not None
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                _static_leave(out, group, static)
                return ConsumerGroupHeartbeatResponse(0, None, static.member_id, STATIC_LEAVE_EPOCH, 0)
            member = static
        if member is None:
            return _error(
                E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
            )
        _remove_member(out, group, member)
        return ConsumerGroupHeartbeatResponse(0, None, req.member_id, req.member_epoch, 0)
    owned = _owned(req)
    if req.member_epoch == 0:
        member_id = req.member_id or new_member_id
        if group is None:
            out.record(ConsumerGroupKey(GROUP_METADATA, req.group_id), GroupEpochValue(0))
            group = st.consumer_groups[req.group_id]
        member = group.members.get(member_id)
        held_by = group.static_members.get(req.instance_id) if req.instance_id is not None else None
        if held_by is not None and (
            held_by != member_id or group.members[held_by].member_epoch == STATIC_LEAVE_EPOCH
        ):
            # A static member comes back under a new member id: it takes the place (and the assignment) of the
            # one its instance id names, if that one has left (epoch -2). A hosted classic member is replaced
            # without that check, as Kafka does.
            old = group.members[held_by]
            if old.metadata.classic is None and old.member_epoch != STATIC_LEAVE_EPOCH:
                return _error(
                    E.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join the group because the instance id is owned by {held_by} member.",
                )
            if member is not None and member is not old:
                # this member id was in the group under another instance id (or none): it goes first
                _remove_member(out, group, member)
            _replace_static_member(out, group, old, member_id)
        elif member is None and len(group.members) >= cfg.group_consumer_max_size:
            return _error(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {cfg.group_consumer_max_size} members.",
            )
        elif member is not None and member.has_assignment_record:
            # A member re-joining with epoch 0 has given up everything it held (the client drops its partitions
            # before it rejoins): its current assignment starts over, releasing its partitions to the others.
            out.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member_id), None)
            out.timers.append(Cancel(rebalance_key(group.group_id, member_id)))  # nothing left to revoke
    else:
        if group is not None and req.instance_id is not None:
            member, refused = _static_member(group, req)
            if refused is not None:
                return refused
        if group is None or member is None:
            return _error(
                E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
            )
        member_id = member.member_id
        if req.member_epoch > member.member_epoch:
            return _error(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({req.member_epoch}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if req.member_epoch < member.member_epoch and not (
            req.member_epoch == member.previous_member_epoch and _is_subset(owned, member.assigned)
        ):
            return _error(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({req.member_epoch}) than the one known by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    before = group.members.get(member_id)
    old_assigned = dict(before.assigned) if before is not None else None
    bump = _update_member(out, group, member_id, req)
    bump = _refresh_regexes(out, st, group, catalog, now_ms) or bump
    checked = group.topics_checked
    if (
        topics_version is None
        or group.regex_subscribers  # names through regexes: looked up every time
        or checked is None
        or checked[0] != topics_version
        or checked[2] is not group.topics
        or checked[1] != group.subscribers.keys()
    ):
        bump = _update_topics(out, group, topics) or bump
        if topics_version is not None:
            group.topics_checked = (topics_version, frozenset(group.subscribers), group.topics)
    if bump:
        out.record(ConsumerGroupKey(GROUP_METADATA, group.group_id), GroupEpochValue(group.group_epoch + 1))
    if group.group_epoch > group.assignment_epoch:
        _new_target(out, st, group)
    member = group.members[member_id]
    before_reconcile = (member.has_assignment_record, member.current_value())
    _reconcile(out, group, member, owned)
    member = group.members[member_id]
    if (member.has_assignment_record, member.current_value()) != before_reconcile:
        # Kafka's maybeReconcile: whenever the member's assignment changes, a member left with partitions to
        # give up gets a whole rebalance timeout from now (a member that revoked some and was asked for more
        # in the same answer is not fenced on the first deadline), any other has none.
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            out.timers.append(
                Schedule(
                    rebalance_key(group.group_id, member_id), now_ms + member.metadata.rebalance_timeout_ms
                )
            )
        else:
            out.timers.append(Cancel(rebalance_key(group.group_id, member_id)))
    out.timers.append(
        Schedule(session_key(group.group_id, member_id), now_ms + cfg.group_consumer_session_timeout_ms)
    )
    # Kafka sends the assignment to a joining member, on a full request (after an error the client re-sends
    # everything: rebalance timeout, topics and owned partitions) and when the assignment changed; otherwise the
    # member keeps what it was last told.
    full = req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and owned is not None
    send = req.member_epoch == 0 or full or old_assigned != member.assigned
    return ConsumerGroupHeartbeatResponse(
        0,
        None,
        member_id,
        member.member_epoch,
        heartbeat_interval(st),
        to_partitions(member.assigned) if send else None,
    )


def _static_member(
    group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest
) -> tuple[ConsumerMember | None, ConsumerGroupHeartbeatResponse | None]:
    """The member holding `req`'s instance id, or Kafka's refusal: UNKNOWN_MEMBER_ID when none does,
    FENCED_INSTANCE_ID when another member id holds it now (this one was replaced)."""
    held_by = group.static_members.get(req.instance_id or "")
    if held_by is None:
        return None, _error(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
    if held_by != req.member_id:
        return None, _error(
            E.FENCED_INSTANCE_ID,
            f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {held_by}.",
        )
    return group.members[held_by], None


def _static_leave(out: _Out, group: ConsumerGroup, member: ConsumerMember) -> None:
    """A static member leaving for a while (epoch -2): it keeps its assignment, gives up what it was revoking, and
    stays until its session expires (its session timer runs on) or its instance id comes back."""
    value = CurrentAssignmentValue(
        STATIC_LEAVE_EPOCH,
        member.previous_member_epoch,
        int(member.state),
        to_partitions(member.assigned),
        (),
    )
    out.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id), value)
    out.timers.append(Cancel(rebalance_key(group.group_id, member.member_id)))  # nothing left to revoke


def _replace_static_member(out: _Out, group: ConsumerGroup, old: ConsumerMember, member_id: str) -> None:
    """Kafka's replaceMember: the old member's records are tombstoned and the new member id gets its metadata,
    target and current assignment (member epoch 0), so it reconciles to the same partitions with no new group
    epoch. The old member's session timer stays: it finds no member when it fires."""
    gid = group.group_id
    metadata, target = old.metadata, to_partitions(group.target.get(old.member_id, {}))
    current = CurrentAssignmentValue(
        0, 0, int(old.state), to_partitions(old.assigned), to_partitions(old.pending_revocation)
    )
    out.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, old.member_id), None)
    out.record(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, old.member_id), None)
    out.record(ConsumerMemberKey(MEMBER_METADATA, gid, old.member_id), None)
    out.record(ConsumerMemberKey(MEMBER_METADATA, gid, member_id), metadata)
    out.record(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, member_id), TargetMemberValue(target))
    out.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, member_id), current)
    out.timers.append(Cancel(rebalance_key(gid, old.member_id)))


def _update_member(
    out: _Out, group: ConsumerGroup, member_id: str, req: ConsumerGroupHeartbeatRequest
) -> bool:
    """Write the member's metadata when it changed; True when the group epoch must move (new member, new
    subscription, new assignor)."""
    member = group.members.get(member_id)
    old = member.metadata if member is not None else None
    if old is not None and _nothing_new(req, old):
        return False  # the steady heartbeat: the value below would be `old`, so it is not built
    value = _member_value(req, old)
    if value == old:
        return False
    out.record(ConsumerMemberKey(MEMBER_METADATA, group.group_id, member_id), value)
    return (
        old is None
        or old.subscribed_topic_names != value.subscribed_topic_names
        or old.subscribed_topic_regex != value.subscribed_topic_regex
        or old.server_assignor != value.server_assignor
    )


def _nothing_new(req: ConsumerGroupHeartbeatRequest, old: MemberMetadataValue) -> bool:
    """True only when `_member_value(req, old) == old`: every field of the request unchanged or not sent."""
    return (
        old.classic is None
        and req.subscribed_topic_names is None
        and (
            req.subscribed_topic_regex is None
            or (req.subscribed_topic_regex or None) == old.subscribed_topic_regex
        )
        and req.rebalance_timeout_ms in (-1, old.rebalance_timeout_ms)
        and req.instance_id in (None, old.instance_id)
        and req.rack_id in (None, old.rack_id)
        and req.server_assignor in (None, old.server_assignor)
        and req.client_id == old.client_id
        and req.client_host == old.client_host
    )


def _member_value(req: ConsumerGroupHeartbeatRequest, old: MemberMetadataValue | None) -> MemberMetadataValue:
    """The member's metadata after this heartbeat: what it sent, and what it left out as it was."""
    names = (
        tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_names is not None
        else (old.subscribed_topic_names if old is not None else ())
    )
    return MemberMetadataValue(
        instance_id=req.instance_id if req.instance_id is not None else (old.instance_id if old else None),
        rack_id=req.rack_id if req.rack_id is not None else (old.rack_id if old else None),
        client_id=req.client_id,
        client_host=req.client_host,
        subscribed_topic_names=names,
        server_assignor=req.server_assignor
        if req.server_assignor is not None
        else (old.server_assignor if old else None),
        rebalance_timeout_ms=req.rebalance_timeout_ms
        if req.rebalance_timeout_ms != -1
        else (old.rebalance_timeout_ms if old else -1),
        # "" is no expression (librdkafka sends it beside topic names; it clears an earlier one); None: unchanged
        subscribed_topic_regex=(req.subscribed_topic_regex or None)
        if req.subscribed_topic_regex is not None
        else (old.subscribed_topic_regex if old else None),
    )


def _refresh_regexes(
    out: _Out, st: CoordinatorState, group: ConsumerGroup, catalog: TopicCatalog | None, now_ms: int
) -> bool:
    """Resolve the group's regular expressions, all together (as Kafka's batch refresh does): at once when one is
    new, else once the refresh interval has passed since the last time; tombstone those no member subscribes to any
    more. True when a stored resolution changed (the group epoch must move: members' subscribed topics changed)."""
    for regex in sorted(group.regexes):
        if group.regex_subscribers[regex] <= 0:
            out.record(ConsumerRegexKey(REGULAR_EXPRESSION, group.group_id, regex), None)
    wanted = sorted(r for r, n in group.regex_subscribers.items() if n > 0)
    due = now_ms - group.regexes_refreshed_ms >= st.config.group_consumer_regex_refresh_interval_ms
    if not wanted or not (due or any(r not in group.regexes for r in wanted)):
        return False
    group.regexes_refreshed_ms = now_ms
    names = sorted(catalog()) if catalog is not None else []
    changed = False
    for regex in wanted:
        topics = consumer_regex.resolve(regex, names)
        known = group.regexes.get(regex)
        if known is not None and known.topics == topics:
            continue
        out.record(ConsumerRegexKey(REGULAR_EXPRESSION, group.group_id, regex), RegexValue(topics, 0, now_ms))
        changed = changed or known is not None
    return changed


def _update_topics(out: _Out, group: ConsumerGroup, topics: TopicLookup) -> bool:
    """Refresh the subscribed topics' metadata; True (bump the epoch) when a topic appeared, vanished or grew."""
    fresh: list[TopicMetadata] = []
    for name in group.subscribed_topic_names():
        found = topics(name)
        if found is not None:
            fresh.append(TopicMetadata(found[0], name, found[1]))
    if {t.name: t for t in fresh} == group.topics:
        return False
    out.record(ConsumerGroupKey(PARTITION_METADATA, group.group_id), PartitionMetadataValue(tuple(fresh)))
    return True


def assignor_of(st: CoordinatorState, group: ConsumerGroup) -> str:
    """Kafka's choice: the server assignor most members ask for (ties: first in the configured list), else the
    configured default (the first of group.consumer.assignors)."""
    configured = st.config.group_consumer_assignors
    asked = Counter(m.metadata.server_assignor for m in group.members.values() if m.metadata.server_assignor)
    if not asked:
        return configured[0]
    return max(configured, key=lambda a: (asked.get(a, 0), -configured.index(a)))


def _new_target(out: _Out, st: CoordinatorState, group: ConsumerGroup) -> None:
    ids = {t.name: t.topic_id for t in group.topics.values()}
    subscriptions = {
        mid: frozenset(ids[n] for n in group.member_topic_names(m) if n in ids)
        for mid, m in sorted(group.members.items())
    }
    counts = {t.topic_id: t.partitions for t in group.topics.values()}
    target = assign(assignor_of(st, group), subscriptions, counts, group.target)
    for mid in sorted(target):
        if target[mid] != group.target.get(mid, {}):
            out.record(
                ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, group.group_id, mid),
                TargetMemberValue(to_partitions(target[mid])),
            )
    out.record(
        ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group.group_id),
        TargetAssignmentEpochValue(group.group_epoch),
    )


def _reconcile(
    out: _Out, group: ConsumerGroup, member: ConsumerMember, owned: TopicAssignment | None
) -> None:
    """CurrentAssignmentBuilder: move `member` one step toward its target; writes its assignment when it changed."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        # Still holding a partition it must give up (owned None: it did not say): nothing moves until it does.
        if owned is None or any(
            owned.get(t, frozenset()) & ps for t, ps in member.pending_revocation.items()
        ):
            return
    elif (
        member.state is MemberState.STABLE
        and member.member_epoch == group.assignment_epoch
        and member.has_assignment_record
    ):
        return
    target = group.target.get(member.member_id, {})
    epoch = group.assignment_epoch
    keep: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    unreleased = False
    for t in sorted(set(target) | set(member.assigned)):
        want = target.get(t, frozenset())
        have = member.assigned.get(t, frozenset())
        retained = want & have
        gone = have - want
        free = frozenset(
            p for p in want - have if group.owners.get((t, p), member.member_id) == member.member_id
        )
        unreleased = unreleased or bool(want - have - free)
        if retained | free:
            keep[t] = retained | free
        if gone:
            revoke[t] = gone
    if revoke and (owned is None or any(owned.get(t, frozenset()) & ps for t, ps in revoke.items())):
        # Give up first; the member keeps its epoch until it has (Kafka: UNREVOKED_PARTITIONS). A member that
        # says it owns none of them (a static member's new process, which joins owning nothing) has nothing to
        # give up: it goes to the new epoch at once (Kafka's ownsRevokedPartitions).
        kept = {t: ps & member.assigned.get(t, frozenset()) for t, ps in keep.items()}
        new = ConsumerMember(
            member.member_id,
            member.metadata,
            member.member_epoch,
            member.previous_member_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            {t: ps for t, ps in kept.items() if ps},
            revoke,
        )
    else:
        previous = member.member_epoch if member.member_epoch != epoch else member.previous_member_epoch
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        new = ConsumerMember(member.member_id, member.metadata, epoch, previous, state, keep, {})
    value = new.current_value()
    if member.has_assignment_record and value == member.current_value():
        return
    out.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id), value)


def _remove_member(out: _Out, group: ConsumerGroup, member: ConsumerMember) -> None:
    """Kafka's member removal: current assignment, target and subscription tombstones, then a new group epoch."""
    gid, mid = group.group_id, member.member_id
    out.record(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, mid), None)
    out.record(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, mid), None)
    out.record(ConsumerMemberKey(MEMBER_METADATA, gid, mid), None)
    regex = member.metadata.subscribed_topic_regex
    if regex is not None and regex in group.regexes and group.regex_subscribers[regex] <= 0:
        out.record(ConsumerRegexKey(REGULAR_EXPRESSION, gid, regex), None)  # its last subscriber is gone
    out.record(ConsumerGroupKey(GROUP_METADATA, gid), GroupEpochValue(group.group_epoch + 1))
    out.timers.append(Cancel(session_key(gid, mid)))
    out.timers.append(Cancel(rebalance_key(gid, mid)))


def tombstone_consumer_group(st: CoordinatorState, group_id: str) -> list[Record]:
    """DeleteGroups of an empty consumer group: Kafka's group tombstones (target assignment metadata, partition
    metadata, then the group epoch), applied through `replay_consumer`. The caller checked it has no member."""
    out = _Out(st)
    group = st.consumer_groups.get(group_id)
    for regex in sorted(group.regexes) if group is not None else ():
        out.record(ConsumerRegexKey(REGULAR_EXPRESSION, group_id, regex), None)
    out.record(ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group_id), None)
    out.record(ConsumerGroupKey(PARTITION_METADATA, group_id), None)
    out.record(ConsumerGroupKey(GROUP_METADATA, group_id), None)
    return out.records


# ---------------------------------------------------------------------------------------------------- timers


def on_consumer_timer(st: CoordinatorState, key: TimerKey, now_ms: int) -> Result:
    """A member's session expired, or it did not revoke within its rebalance timeout: it is fenced (removed)."""
    out = _Out(st)
    group = st.consumer_groups.get(key.group_id)
    member = group.members.get(key.member_id) if group is not None else None
    if group is None or member is None:
        return out.result()
    if key.kind is TimerKind.CONSUMER_REBALANCE and member.state is not MemberState.UNREVOKED_PARTITIONS:
        return out.result()
    _remove_member(out, group, member)
    return out.result()


def arm_loaded_sessions(st: CoordinatorState, now_ms: int) -> tuple[TimerOp, ...]:
    """After a load: every consumer member gets a fresh session deadline, and one that still has partitions to
    give up a fresh rebalance deadline (as Kafka's onLoaded does)."""
    timeout = st.config.group_consumer_session_timeout_ms
    ops: list[TimerOp] = []
    for gid, group in sorted(st.consumer_groups.items()):
        for mid, member in sorted(group.members.items()):
            ops.append(Schedule(session_key(gid, mid), now_ms + timeout))
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                ops.append(Schedule(rebalance_key(gid, mid), now_ms + member.metadata.rebalance_timeout_ms))
    return tuple(ops)


# ----------------------------------------------------------------------------------------------------- describe


def _described(
    group: ConsumerGroup, assignment: Mapping[str, frozenset[int]]
) -> tuple[DescribedTopicPartitions, ...]:
    return tuple(
        DescribedTopicPartitions(t, group.topic_name(t), tuple(sorted(ps)))
        for t, ps in sorted(assignment.items())
        if ps
    )


def describe_consumer_group(st: CoordinatorState, group_id: str) -> DescribedConsumerGroup:
    group = st.consumer_groups.get(group_id)
    if group is None:
        return DescribedConsumerGroup(int(E.GROUP_ID_NOT_FOUND), group_id, f"Group {group_id} not found.")
    members = tuple(
        DescribedConsumerMember(
            m.member_id,
            m.metadata.instance_id,
            m.metadata.rack_id,
            m.member_epoch,
            m.metadata.client_id,
            m.metadata.client_host,
            m.metadata.subscribed_topic_names,
            _described(group, m.assigned),
            _described(group, group.target.get(mid, {})),
            m.metadata.subscribed_topic_regex,
        )
        for mid, m in sorted(group.members.items())
    )
    return DescribedConsumerGroup(
        0,
        group_id,
        None,
        group.state_name(),
        group.group_epoch,
        group.assignment_epoch,
        assignor_of(st, group),
        members,
    )


def handle_consumer_describe(
    st: CoordinatorState,
    req: ConsumerGroupDescribeRequest,
    now_ms: int,
    token: int,
    status: Callable[[str], E | None],
) -> Result:
    """ConsumerGroupDescribe: one entry per asked group, in order; `status` gives the per-group coordinator error."""
    groups = []
    for gid in req.group_ids:
        err = status(gid)
        if err is not None:
            groups.append(DescribedConsumerGroup(int(err), gid))
        elif gid in st.groups and gid not in st.consumer_groups:
            groups.append(
                DescribedConsumerGroup(
                    int(E.GROUP_ID_NOT_FOUND), gid, f"Group {gid} is not a consumer group."
                )
            )
        else:
            groups.append(describe_consumer_group(st, gid))
    return Result(responses=((token, ConsumerGroupDescribeResponse(tuple(groups))),))  # type: ignore[arg-type]


def error_response(
    req: ConsumerGroupHeartbeatRequest | ConsumerGroupDescribeRequest, code: E
) -> ConsumerGroupHeartbeatResponse | ConsumerGroupDescribeResponse:
    """The whole-request error answer (a coordinator move, a failed write): the code, per group for Describe."""
    if isinstance(req, ConsumerGroupHeartbeatRequest):
        return ConsumerGroupHeartbeatResponse(int(code))
    return ConsumerGroupDescribeResponse(tuple(DescribedConsumerGroup(int(code), g) for g in req.group_ids))


# ------------------------------------------------------------------------------------------------------ offsets


def commit_error(
    st: CoordinatorState, group_id: str, member_id: str, member_epoch: int, api_version: int
) -> E | None:
    """Kafka's `ConsumerGroup.validateOffsetCommit` for a consumer group: None when the commit may be stored."""
    group = st.consumer_groups.get(group_id)
    if group is None:
        return None
    if member_epoch < 0 and not member_id:
        # An admin client or a consumer without group management: only into an empty group.
        return None if not group.members else E.UNKNOWN_MEMBER_ID
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    classic = member.metadata.classic is not None  # a classic member hosted in the group (online migration)
    if api_version < 9 and not classic:
        return E.UNSUPPORTED_VERSION  # a consumer-protocol member commits with v9+
    if member_epoch != member.member_epoch:
        return E.ILLEGAL_GENERATION if classic else E.STALE_MEMBER_EPOCH
    return None


def fetch_error(st: CoordinatorState, group_id: str, member_id: str | None, member_epoch: int) -> E | None:
    """Kafka's `ConsumerGroup.validateOffsetFetch` (OffsetFetch v9 with a member id): None when it may read."""
    group = st.consumer_groups.get(group_id)
    if group is None or member_id is None or member_epoch < 0:
        return None
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return E.ILLEGAL_GENERATION if member.metadata.classic is not None else E.STALE_MEMBER_EPOCH
    return None
