"""An offsets partition's groups coming and going: rebuilt from the replayed log on load, forgotten on unload.

`load` rebuilds live groups as Kafka does on partition load; `unload_groups` answers the parked requests of the
groups whose partition moved away and forgets them, writing nothing (the log keeps them for the next coordinator).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice

from zkcoord.group.common import (
    DEAD,
    EMPTY,
    STABLE,
    E,
    Effects,
    heartbeat_key,
    join_error,
    join_key,
    sync_error,
    sync_key,
    touch,
)
from zkcoord.group.consumer import arm_loaded_sessions, rebalance_key, session_key
from zkcoord.group.consumer_model import replay_consumer
from zkcoord.group.model import ClassicGroup, CoordinatorState, Member, replay, replay_many
from zkcoord.group.results import Result, TimerKey, TimerKind
from zkcoord.records.consumer_groups import CONSUMER_KEY_TYPES
from zkcoord.records.offsets import GroupMetadataValue, Record
from zkcoord.records.offsets_bulk import BulkDecoder


def load(st: CoordinatorState, records: Iterable[Record], now_ms: int) -> Result:
    """Replay a log into the view, then rebuild live groups as Kafka does on partition load: a group with members
    is Stable (members get fresh session deadlines), one without is Empty; offset-only groups are simple groups."""
    it = iter(records)
    while chunk := list(
        islice(it, 4096)
    ):  # in chunks: `replay_many` takes offset commits without a call each
        consumer = [r for r in chunk if isinstance(r[0], _CONSUMER_KEYS)]
        replay_many(
            st.view, [r for r in chunk if not isinstance(r[0], _CONSUMER_KEYS)] if consumer else chunk
        )
        for record in consumer:  # KIP-848 groups' records: their own state, disjoint from the view's
            _replay_one(st, record)
    return _rebuild(st, now_ms)


_CONSUMER_KEYS = CONSUMER_KEY_TYPES


def _replay_one(st: CoordinatorState, record: Record) -> None:
    """One record into the view, or a consumer group's into `st.consumer_groups` (`replay_consumer`)."""
    key, value = record
    if isinstance(key, _CONSUMER_KEYS):
        replay_consumer(st.consumer_groups, key, value)  # type: ignore[arg-type]
    else:
        replay(st.view, record)


def load_raw(
    st: CoordinatorState, raw: Iterable[tuple[bytes, bytes | None]], now_ms: int
) -> tuple[Result, int]:
    """`load` from encoded records (a record log's bytes), decoding each as it is replayed (`BulkDecoder`: no
    record object for a common offset commit); returns the result and the number of records."""
    view = st.view
    count = BulkDecoder().offsets_into(raw, view.offsets, lambda record: _replay_one(st, record))
    return _rebuild(st, now_ms), count


def _rebuild(st: CoordinatorState, now_ms: int) -> Result:
    out = Effects(st)
    for gid, value in st.view.groups.items():
        st.groups[gid] = _group_from_record(gid, value, now_ms)
    for gid in st.view.offsets:
        if gid not in st.groups and gid not in st.consumer_groups:
            st.groups[gid] = ClassicGroup(gid, now_ms)
    for group in st.groups.values():
        for member in group.members.values():
            touch(out, group, member, now_ms, member.session_timeout_ms)
    out.timers.extend(arm_loaded_sessions(st, now_ms))
    out.schedule(TimerKey(TimerKind.RETENTION), now_ms + st.config.offsets_retention_check_interval_ms)
    return out.result()


def _group_from_record(gid: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
    group = ClassicGroup(gid, now_ms)
    group.generation = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    group.leader_id = value.leader
    for mv in value.members:
        member = Member(
            mv.member_id,
            mv.group_instance_id,
            mv.client_id,
            mv.client_host,
            mv.rebalance_timeout,
            mv.session_timeout,
            value.protocol_type,
            ((value.protocol or "", mv.subscription),),
        )
        member.assignment = mv.assignment
        group.add(member, None, 0)
    group.state = STABLE if group.members else EMPTY
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def unload_groups(st: CoordinatorState, owned: Callable[[str], bool], now_ms: int) -> Result:
    """Kafka's `onGroupUnloaded` for every group `owned(group_id)` no longer covers (offsets partition moved away):
    parked JoinGroup/SyncGroup are answered NOT_COORDINATOR, timers cancelled, the group goes Dead and leaves memory
    together with its offsets. Nothing is written: the log still holds the group for its next coordinator."""
    out = Effects(st)
    for gid, group in list(st.groups.items()):
        if owned(gid):
            continue
        for member in group.members.values():
            if member.join_token is not None:
                out.respond(
                    member.join_token, join_error(member.join_version, member.member_id, E.NOT_COORDINATOR)
                )
                group.set_join_token(member, None)
            if member.sync_token is not None:
                out.respond(member.sync_token, sync_error(E.NOT_COORDINATOR))
                member.sync_token = None
            out.cancel(heartbeat_key(group, member.member_id))
        for member_id in group.pending_members:
            out.cancel(TimerKey(TimerKind.PENDING_MEMBER, gid, member_id))
        out.cancel(join_key(group))
        out.cancel(sync_key(group))
        group.transition(DEAD, now_ms)
        del st.groups[gid]
        st.view.forget(gid)
    for gid in sorted(st.consumer_groups):  # KIP-848 groups: nothing parked, only their timers to cancel
        if owned(gid):
            continue
        for mid in sorted(st.consumer_groups[gid].members):
            out.cancel(session_key(gid, mid))
            out.cancel(rebalance_key(gid, mid))
        del st.consumer_groups[gid]
        st.view.forget(gid)
    return out.result()
