"""The asyncio edge of mixed groups (`serve --bridge-zk-groups`): carries out `mixed_decisions` at the group
service's requests, between the coordinator runtime and the `MembershipBridge`.

JoinGroup keeps only legacy-compatible protocols (a member that disagrees with the legacy members is refused),
under the names the classic core's one-name rule then applies to (`core_protocols`), and each member is answered in
a name of its own (JoinGroup, SyncGroup v5+: `answered_name`); the leader's SyncGroup assignment is replaced by the bridge's (held in ZooKeeper first, cooperative members' partitions
withheld until they revoke, and a follow-up rebalance when a previous owner did not let go in time; a cooperative
recipient's answer is held until its giver's rejoin, answered in place, hands the partition on in the same
generation: `in_place`, `_hand_on`); member
departures release owner znodes; legacy membership changes start a rebalance; legacy members' generation -1
commits are stored. Consumer-protocol members (KIP-848) are registered in ZooKeeper like classic members and
take their share from the same hand-over (the classic leader's SyncGroup when the group has classic members, a
hand-over of their own otherwise); each is sent only what is held for it; a static one (group.instance.id) is
known to the bridge by its instance id, so its replacement after a restart keeps its registration and share. Every decision is a pure function in
`mixed_decisions`; this class only awaits the bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from zkcoord.group import handlers as h
from zkcoord.group.consumer_classic import parse_assignment
from zkcoord.group.consumer_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
)
from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.group.model import ClassicGroup, Member
from zkcoord.server import mixed_decisions as md
from zkcoord.server.coordinator_runtime import CoordinatorRuntime, refusal
from zkcoord.server.seams import MembershipBridge, OffsetMirror
from zkcoord.topic_partition import TopicPartition

log = logging.getLogger(__name__)


async def mirror_settled(
    runtime: CoordinatorRuntime, mirror: OffsetMirror | None, group_id: str, timeout_ms: int
) -> None:
    """Before partitions are handed to legacy members (who read only ZooKeeper), the group's committed offsets
    are in ZooKeeper: resubmitted to the offset mirror (never-regress, so a no-op when they landed) and waited
    for, bounded. Without a mirror, legacy members see only what is already there."""
    if mirror is None:
        return
    offsets = md.committed_offsets(runtime.state.view.offsets.get(group_id, {}))
    if offsets:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(mirror.submit(group_id, offsets)), timeout_ms / 1000)


class MixedGroups:
    """One per group service with a bridge. `rebalance(group_id)` starts a rebalance of the broker-protocol side
    (the service's `request_rebalance`)."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        bridge: MembershipBridge,
        mirror: OffsetMirror | None,
        rebalance: Callable[[str], None],
        topics: md.TopicIds | None = None,
    ) -> None:
        self._runtime = runtime
        self._bridge = bridge
        self._mirror = mirror
        self._classic_rebalance = rebalance
        self._topics = topics
        self._consumers: dict[str, dict[str, md.MixedConsumer]] = {}  # group -> consumer-protocol members
        self._sessions: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._handing: dict[str, bool] = {}  # group -> a hand-over of its own runs (True: run it once more)
        self._reported: dict[str, tuple[str, ...]] = {}  # bridged group -> members last told to the bridge
        # bridged group -> member id -> the protocol name it was last answered in (present members only)
        self._answered: dict[str, dict[str, str]] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        # bridged group -> its consumer members restored from ZooKeeper after this service loaded (once each)
        self._restoring: dict[str, asyncio.Future[None]] = {}
        # (group, giver) -> (generation, what it still owns): a rejoin answered in place whose withheld
        # partitions are to be handed on (`joined` starts it)
        self._handing_on: dict[tuple[str, str], tuple[int, frozenset[TopicPartition]]] = {}
        self._closed = False

    def bridges(self, group_id: str) -> bool:
        return self._bridge.bridges(group_id)

    async def join(self, req: JoinGroupRequest) -> JoinGroupRequest | JoinGroupResponse:
        """Keep only the protocols the legacy side knows; refuse a member that disagrees with the legacy ones."""
        bridge = self._bridge
        try:
            usable = bridge.usable_protocols(req.protocol_type, req.protocols)
            topics = md.join_topics(req.protocols, usable)
            await bridge.check_join(req.group_id, topics, usable[0])
        except Exception as exc:
            code = md.join_refusal(exc)
            log.error("group=%s member %r refused from the mixed group (%s): %s",
                      req.group_id, req.member_id, code.name, exc)  # fmt: skip
            return refusal(req, JoinGroupResponse, code)
        group_id = req.group_id
        bridge.offered(group_id, req.member_id, [n for n, _ in req.protocols])
        bridge.watch(group_id, topics, lambda: self._rebalance(group_id))
        group = self._runtime.state.groups.get(group_id)
        kept = md.kept_protocols(req, usable)
        joining_as = md.answered_name(kept, group.protocol_name if group else None) or usable[0]
        if md.registers_early(group, req.member_id, self._answered.get(group_id), joining_as):
            try:
                await bridge.preregister(group_id, (req.member_id, req.client_id, topics))
            except Exception as exc:
                log.warning(
                    "group=%s member %s: early registration failed (%s)", group_id, req.member_id, exc
                )
        return replace(req, protocols=md.core_protocols(kept))

    def in_place(self, group: ClassicGroup, member: Member, req: JoinGroupRequest) -> bool:
        """The classic core's `RejoinInPlace` policy for mixed groups (`md.rejoins_in_place`): a KIP-429 member
        that rejoins only to show it revoked what was withheld from others for it keeps the current generation,
        and `joined` hands those partitions on."""
        gid = group.group_id
        owned = md.rejoins_in_place(
            group, member, req, self._bridge.withheld(gid), self._answered.get(gid, {})
        )
        if owned is None:
            return False
        self._handing_on[(gid, member.member_id)] = (group.generation, owned)
        return True

    def joined(self, req: JoinGroupRequest, resp: JoinGroupResponse) -> JoinGroupResponse:
        """The core's answer to `req` (as the member sent it), in the member's own protocol name; a rejoin
        answered in place (`in_place`) starts the hand-on of what it gave up."""
        handing = self._handing_on.pop((req.group_id, resp.member_id), None)
        if handing is not None and not resp.error_code and resp.generation_id == handing[0]:
            task = asyncio.ensure_future(self._hand_on(req.group_id, resp.member_id, *handing))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if resp.error_code or not resp.protocol_name:
            return resp
        self._bridge.offered(req.group_id, resp.member_id, [n for n, _ in req.protocols])
        usable = self._bridge.usable_protocols(req.protocol_type, req.protocols)
        name = md.answered_name(md.kept_protocols(req, usable), resp.protocol_name)
        if name is None:
            return resp
        answered = self._answered.setdefault(req.group_id, {})
        if answered.get(resp.member_id) != name:  # once per member and name: what each client was told
            log.info("group=%s member %s (client %s) answered in protocol %r, the group's being %r",
                     req.group_id, resp.member_id, req.client_id, name, resp.protocol_name)  # fmt: skip
        answered[resp.member_id] = name
        return replace(resp, protocol_name=name)

    async def sync(self, req: SyncGroupRequest) -> SyncGroupRequest | SyncGroupResponse:
        """The leader's SyncGroup: the bridge's assignment (held in ZooKeeper) replaces the leader's. A v5+
        request's protocol name must be the member's own; the core is then asked in the group's."""
        group = self._runtime.state.groups.get(req.group_id)
        answered = self._answered.get(req.group_id, {})
        if req.protocol_name is not None and group is not None and group.protocol_name is not None:
            mine = answered.get(req.member_id)
            if not md.sync_protocol_accepted(req.protocol_name, mine, group.protocol_name):
                log.error(
                    "group=%s member %s refused (INCONSISTENT_GROUP_PROTOCOL): its SyncGroup names protocol %r, "
                    "it was answered in %r", req.group_id, req.member_id, req.protocol_name, mine,
                )  # fmt: skip
                return refusal(req, SyncGroupResponse, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            req = replace(req, protocol_name=group.protocol_name)
        call = md.hand_over_call(group, req, answered)
        if call is None:
            return req
        try:
            await self._restored(req.group_id)
            await mirror_settled(self._runtime, self._mirror, req.group_id, call.timeout_ms)
            extra, owned = md.bridge_members(self._consumers.get(req.group_id, {}))
            assignments = await self._bridge.assign(
                req.group_id,
                call.protocol,
                call.members + extra,
                call.timeout_ms,
                call.subscriptions,
                owned=owned,
            )
        except Exception as exc:
            log.error(
                "group=%s gen=%d hand-over failed: %s; rebalancing", req.group_id, req.generation_id, exc
            )
            self._rebalance(req.group_id)
            return refusal(req, SyncGroupResponse, ErrorCode.REBALANCE_IN_PROGRESS)
        group = self._runtime.state.groups.get(req.group_id)
        withheld = self._bridge.withheld(req.group_id)
        holds = md.hand_on_holds(group, withheld, answered)
        if holds and group is not None:
            # KIP-429 members still own partitions others are to get: those others' answers wait (bounded) for
            # the owners' rejoins, which are answered in this generation and hand the partitions on.
            self._runtime.apply(
                h.hold_sync_answers(
                    self._runtime.state,
                    req.group_id,
                    req.generation_id,
                    holds,
                    self._runtime.now_ms() + md.hand_on_wait_ms(group),
                )
            )
        if self._bridge.hand_over_incomplete(req.group_id, holds):
            # A previous owner did not let go in time: try again once its owner znode can be taken.
            asyncio.get_running_loop().call_later(md.FOLLOW_UP_REBALANCE_S, self._rebalance, req.group_id)
        consumers = self._consumers.get(req.group_id, {})
        keys = set(self._consumer_keys(req.group_id))
        self._consumers[req.group_id] = md.shares_from(
            consumers, {mid: parse_assignment(a) for mid, a in assignments.items() if mid in keys}
        )
        return replace(req, assignments=tuple((mid, a) for mid, a in assignments.items() if mid not in keys))

    async def _hand_on(
        self, group_id: str, giver: str, generation: int, owned: frozenset[TopicPartition]
    ) -> None:
        """`giver`'s rejoin, answered in place, proved it revoked what was withheld from others for it: their owner
        znodes go to those others, whose held SyncGroup answers then carry them in the same generation. When
        their answers are no longer held (a deadline, a new rebalance) or the hand-on failed, a rebalance hands
        the partitions over instead."""
        recipients = sorted({to for g, to in self._bridge.withheld(group_id).values() if g == giver})
        try:
            group = self._runtime.state.groups.get(group_id)
            wait = md.hand_on_wait_ms(group) if group is not None else md.MIN_HAND_OVER_MS
            assignments: dict[str, bytes] | None = await self._bridge.hand_on(group_id, giver, owned, wait)
        except Exception as exc:
            log.error("group=%s gen=%d hand-on of what %s gave up failed: %s; rebalancing",
                      group_id, generation, giver, exc)  # fmt: skip
            assignments = None
        waiting = {to for _g, to in self._bridge.withheld(group_id).values()}  # for other givers still
        group = self._runtime.state.groups.get(group_id)
        late = not assignments  # failed, or nothing moved (a new hand-over came between)
        for to in recipients:
            if group is not None and h.sync_held(group, generation, to):
                if to not in waiting or assignments is None:
                    self._runtime.apply(
                        h.release_sync_answer(
                            self._runtime.state,
                            group_id,
                            generation,
                            to,
                            None if assignments is None else assignments.get(to),
                            self._runtime.now_ms(),
                        )
                    )
            elif assignments is not None and to in assignments:
                late = True  # held for it now, but its answer is out: it learns of it by a rebalance
        if late:
            self._rebalance(group_id)

    def synced(self, req: SyncGroupRequest, resp: SyncGroupResponse) -> SyncGroupResponse:
        """The core's answer to `req` (as the member sent it), in the name the member was answered in."""
        if resp.error_code or not resp.protocol_name:
            return resp
        mine = self._answered.get(req.group_id, {}).get(req.member_id) or req.protocol_name
        return resp if mine is None else replace(resp, protocol_name=mine)

    async def legacy_member_commit(self, req: OffsetCommitRequest) -> bool:
        """Whether a commit is a legacy member's (generation -1 into a live mixed group, every partition owned by
        a legacy member in ZooKeeper): then it is stored as one."""
        tps = md.legacy_commit_partitions(self._runtime.state.groups.get(req.group_id), req)
        if tps is None:
            return False
        try:
            return await self._bridge.legacy_owns(req.group_id, tps)
        except Exception as exc:
            log.warning("group=%s legacy commit: ZooKeeper ownership unknown (%s)", req.group_id, exc)
            return False

    def report_members(self, group_id: str) -> None:
        """Tell the bridge when a mixed group's member list changed (a departed member's znodes go)."""
        if not group_id or not self._bridge.bridges(group_id):
            return
        group = self._runtime.state.groups.get(group_id)
        present = (*md.present_members(group), *self._consumer_keys(group_id))
        if self._reported.get(group_id) == present:
            return
        topics = md.watched_topics(group)
        if topics is not None:
            self._bridge.watch(group_id, topics, lambda: self._rebalance(group_id))
        self._reported[group_id] = present
        answered = {m: n for m, n in self._answered.pop(group_id, {}).items() if m in present}
        if answered:
            self._answered[group_id] = answered
        bridge = self._bridge

        async def report() -> None:
            try:
                await self._restored(group_id)
                now = (
                    *md.present_members(self._runtime.state.groups.get(group_id)),
                    *self._consumer_keys(group_id),
                )
                await mirror_settled(self._runtime, self._mirror, group_id, md.SETTLE_BEFORE_RELEASE_MS)
                await bridge.members_changed(group_id, now)
                if md.consumers_hand_over_alone(self._runtime.state.groups.get(group_id), now):
                    # The last classic member is gone: what it held goes to the consumer-protocol members.
                    self._rebalance(group_id)
            except Exception:
                log.exception("group=%s: releasing departed members' znodes failed", group_id)
                self._reported.pop(group_id, None)  # the next event retries

        task = asyncio.ensure_future(report())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ----------------------------------------------------------------- consumer-protocol members (KIP-848)

    def _consumer_keys(self, group_id: str) -> list[str]:
        """The consumer members' ids as the bridge knows them (a static member's: by its instance id)."""
        return sorted(m.key for m in self._consumers.get(group_id, {}).values())

    async def _restored(self, group_id: str) -> None:
        """Once per group and service, before anything it does can release owner znodes: the consumer members
        the previous coordinator registered (no record holds them) are restored from ZooKeeper and fenced until
        they are heard from or their session passes (`md.restored_consumers`). Raises when ZooKeeper cannot
        be read; the next call tries again."""
        future = self._restoring.get(group_id)
        if future is None:
            future = self._restoring[group_id] = asyncio.ensure_future(self._restore(group_id))
        try:
            await asyncio.shield(future)
        except Exception:
            if self._restoring.get(group_id) is future:
                del self._restoring[group_id]
            raise

    async def _restore(self, group_id: str) -> None:
        adopted = await self._bridge.adopted_members(group_id)
        if self._closed:
            return  # the service stopped serving meanwhile: the next coordinator restores them
        members = self._consumers.setdefault(group_id, {})
        group = self._runtime.state.groups.get(group_id)
        restored = md.restored_consumers(md.present_members(group), members, adopted)
        for mid, member in restored.items():
            members[mid] = member
            self._arm_session(group_id, mid)
            log.info(
                "group=%s consumer member %s restored from ZooKeeper after the load, holding %d partitions: "
                "fenced until it heartbeats or its session passes", group_id, mid, len(member.share),
            )  # fmt: skip
        topics = sorted({t for m in restored.values() for t in m.topics})
        if topics:
            self._bridge.watch(group_id, topics, lambda: self._rebalance(group_id))

    def _rebalance(self, group_id: str) -> None:
        """The group's membership or topics changed: the classic members rebalance (their leader's SyncGroup hands
        over for everyone); without classic members the consumer-protocol members get a hand-over of their own."""
        self._classic_rebalance(group_id)
        group = self._runtime.state.groups.get(group_id)
        if group is not None and (group.members or group.pending_members):
            return
        if group_id in self._handing:
            self._handing[group_id] = True
            return
        self._handing[group_id] = False
        task = asyncio.ensure_future(self._hand_over(group_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _hand_over(self, group_id: str) -> None:
        try:
            while True:
                group = self._runtime.state.groups.get(group_id)
                if group is not None and (group.members or group.pending_members):
                    return  # the classic members' next SyncGroup hands over for everyone
                try:
                    await self._restored(group_id)
                    members, owned = md.bridge_members(self._consumers.get(group_id, {}))
                    protocol = (group.protocol_name if group is not None else None) or md.CONSUMER_HAND_OVER
                    await mirror_settled(self._runtime, self._mirror, group_id, md.CONSUMER_HAND_OVER_MS)
                    assignments = await self._bridge.assign(
                        group_id, protocol, members, md.CONSUMER_HAND_OVER_MS, None, owned=owned
                    )
                except Exception as exc:
                    log.error("group=%s consumer members' hand-over failed: %s; retrying", group_id, exc)
                    asyncio.get_running_loop().call_later(md.FOLLOW_UP_REBALANCE_S, self._rebalance, group_id)
                    return
                self._consumers[group_id] = md.shares_from(
                    self._consumers.get(group_id, {}),
                    {mid: parse_assignment(a) for mid, a in assignments.items()},
                )
                if self._bridge.hand_over_incomplete(group_id):
                    asyncio.get_running_loop().call_later(md.FOLLOW_UP_REBALANCE_S, self._rebalance, group_id)
                if not self._handing.get(group_id):
                    return
                self._handing[group_id] = False
        finally:
            self._handing.pop(group_id, None)

    def close(self) -> None:
        """Stop: no consumer member's session timer fires after the service stopped serving (a hand-over under
        way finishes, bounded by its wait), and no restore under way arms one."""
        self._closed = True
        for handle in self._sessions.values():
            handle.cancel()
        self._sessions.clear()

    def _arm_session(self, group_id: str, member_id: str) -> None:
        key = (group_id, member_id)
        old = self._sessions.pop(key, None)
        if old is not None:
            old.cancel()
        timeout_s = self._runtime.config.group_consumer_session_timeout_ms / 1000
        self._sessions[key] = asyncio.get_running_loop().call_later(
            timeout_s, self._expired, group_id, member_id
        )

    def _expired(self, group_id: str, member_id: str) -> None:
        self._sessions.pop((group_id, member_id), None)
        if self._consumers.get(group_id, {}).pop(member_id, None) is not None:
            log.info("group=%s consumer member %s: session expired; its partitions go", group_id, member_id)
            self._rebalance(group_id)

    def _leave(self, group_id: str, member_id: str) -> None:
        handle = self._sessions.pop((group_id, member_id), None)
        if handle is not None:
            handle.cancel()
        self._consumers.get(group_id, {}).pop(member_id, None)
        self._rebalance(group_id)

    async def consumer_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, new_member_id: str
    ) -> ConsumerGroupHeartbeatResponse:
        """A consumer-protocol member's heartbeat into a mixed group: joins register it in ZooKeeper (the legacy
        members count it), leaves release its partitions at the next hand-over, every answer carries exactly the
        partitions whose owner znodes are held for it."""
        if self._topics is None:
            return md.consumer_protocol_refusal(req.group_id)
        lookup = self._topics
        group_id = req.group_id
        try:
            await self._restored(group_id)
        except Exception as exc:
            log.warning("group=%s consumer members not restored yet (%s)", group_id, exc)
            return ConsumerGroupHeartbeatResponse(int(ErrorCode.COORDINATOR_NOT_AVAILABLE), str(exc))
        members = self._consumers.setdefault(group_id, {})
        refused = md.consumer_heartbeat_refusal(members, req)
        if refused is not None:
            return refused
        interval = self._runtime.config.group_consumer_heartbeat_interval_ms
        if req.member_epoch == -2 and req.member_id in members:
            # A static member's leave: its share stays held for its replacement until its session passes.
            members[req.member_id] = md.static_left(members[req.member_id])
            log.info("group=%s static member %s (instance %s) left; its partitions wait for its replacement",
                     group_id, req.member_id, req.instance_id)  # fmt: skip
            return ConsumerGroupHeartbeatResponse(0, None, req.member_id, req.member_epoch, 0)
        if req.member_epoch < 0:
            self._leave(group_id, req.member_id)
            return ConsumerGroupHeartbeatResponse(0, None, req.member_id, req.member_epoch, 0)
        if req.member_epoch == 0:
            member_id = req.member_id or new_member_id
            topics = tuple(sorted(set(req.subscribed_topic_names or ())))
            try:
                await self._bridge.check_join(group_id, topics, md.CONSUMER_HAND_OVER)
            except Exception as exc:
                code = md.join_refusal(exc)
                log.error("group=%s consumer member %r refused from the mixed group (%s): %s",
                          group_id, member_id, code.name, exc)  # fmt: skip
                return ConsumerGroupHeartbeatResponse(int(code), str(exc))
            join = md.consumer_joined(members, member_id, req.client_id, topics, req.instance_id)
            joined = join.member
            if join.replaced is not None:
                # A static member's replacement takes its predecessor's place (same registration and share).
                members.pop(join.replaced, None)
                handle = self._sessions.pop((group_id, join.replaced), None)
                if handle is not None:
                    handle.cancel()
                log.info("group=%s static member %s (instance %s) takes the place of %s",
                         group_id, member_id, req.instance_id, join.replaced)  # fmt: skip
            members[member_id] = joined
            try:
                await self._bridge.preregister(
                    group_id, (joined.key, req.client_id, topics), md.CONSUMER_KIND
                )
            except Exception as exc:
                log.warning("group=%s member %s: early registration failed (%s)", group_id, member_id, exc)
            self._bridge.watch(group_id, topics, lambda: self._rebalance(group_id))
            self._arm_session(group_id, member_id)
            if join.hand_over:
                self._rebalance(group_id)
            return md.consumer_answer(joined, True, lookup, interval)
        member = members[req.member_id]
        resuming = member.restored
        if resuming:
            member = md.resumed(member, req.member_epoch)
            log.info("group=%s consumer member %s resumed at epoch %d after the load",
                     group_id, req.member_id, member.epoch)  # fmt: skip
        owned = md.reported_owned(req, member.topics, lookup)
        full = resuming or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        step = md.consumer_step(member, owned, req.subscribed_topic_names, full)
        members[req.member_id] = step.member
        self._arm_session(group_id, req.member_id)
        if step.hand_over:
            self._rebalance(group_id)
        return md.consumer_answer(step.member, step.send, lookup, interval)

    async def describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of a mixed group: its classic, consumer-protocol and legacy members
        (`md.describe_mixed`); COORDINATOR_NOT_AVAILABLE (retriable) when ZooKeeper cannot be read."""
        if self._topics is None:
            return DescribedConsumerGroup(
                int(ErrorCode.GROUP_ID_NOT_FOUND), group_id, "Group is a mixed group."
            )
        try:
            if group_id not in self._restoring:
                # A describe writes nothing: the group is adopted (its fence bumped) only when ZooKeeper holds
                # members of ours to restore, as their next heartbeat would.
                ours = await self._bridge.adopted_members(group_id, adopt=False)
                if any(held and kind != md.CLASSIC_KIND for _client, _topics, held, kind in ours.values()):
                    await self._restored(group_id)
            legacy = await self._bridge.legacy_members(group_id)
        except Exception as exc:
            log.warning("group=%s ConsumerGroupDescribe: ZooKeeper not readable (%s)", group_id, exc)
            return DescribedConsumerGroup(int(ErrorCode.COORDINATOR_NOT_AVAILABLE), group_id, str(exc))
        group = self._runtime.state.groups.get(group_id)
        consumers = self._consumers.get(group_id, {})
        if group is None and not consumers and not legacy:
            return DescribedConsumerGroup(
                int(ErrorCode.GROUP_ID_NOT_FOUND), group_id, f"Group {group_id} not found."
            )
        return md.describe_mixed(group_id, group, consumers, legacy, self._topics)

    def consumer_commit(self, group_id: str, member_id: str, epoch: int) -> ErrorCode | None:
        """For a commit into a mixed group: None when it is not a consumer-protocol member's; else NONE when the
        member may commit (its current or previous epoch) or STALE_MEMBER_EPOCH."""
        return md.consumer_commit_check(self._consumers.get(group_id, {}), member_id, epoch)
