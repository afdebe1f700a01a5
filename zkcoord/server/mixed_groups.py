"""The asyncio edge of mixed groups (`serve --bridge-zk-groups`): carries out `mixed_decisions` at the group
service's requests, between the coordinator runtime and the `MembershipBridge`.

JoinGroup keeps only legacy-compatible protocols (a member that disagrees with the legacy members is refused); the
leader's SyncGroup assignment is replaced by the bridge's (held in ZooKeeper first, cooperative members' partitions
withheld until they revoke, and a follow-up rebalance when a previous owner did not let go in time); member
departures release owner znodes; legacy membership changes start a rebalance; legacy members' generation -1
commits are stored. Every decision is a pure function in `mixed_decisions`; this class only awaits the bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from zkcoord.group.errors import ErrorCode
from zkcoord.group.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from zkcoord.server import mixed_decisions as md
from zkcoord.server.coordinator_runtime import CoordinatorRuntime, refusal
from zkcoord.server.seams import MembershipBridge, OffsetMirror

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
    ) -> None:
        self._runtime = runtime
        self._bridge = bridge
        self._mirror = mirror
        self._rebalance = rebalance
        self._reported: dict[str, tuple[str, ...]] = {}  # bridged group -> members last told to the bridge
        self._tasks: set[asyncio.Future[None]] = set()

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
        bridge.watch(group_id, topics, lambda: self._rebalance(group_id))
        if md.registers_early(self._runtime.state.groups.get(group_id), req.member_id):
            try:
                await bridge.preregister(group_id, (req.member_id, req.client_id, topics))
            except Exception as exc:
                log.warning(
                    "group=%s member %s: early registration failed (%s)", group_id, req.member_id, exc
                )
        return replace(req, protocols=md.kept_protocols(req, usable))

    async def sync(self, req: SyncGroupRequest) -> SyncGroupRequest | SyncGroupResponse:
        """The leader's SyncGroup: the bridge's assignment (held in ZooKeeper) replaces the leader's."""
        call = md.hand_over_call(self._runtime.state.groups.get(req.group_id), req)
        if call is None:
            return req
        try:
            await mirror_settled(self._runtime, self._mirror, req.group_id, call.timeout_ms)
            assignments = await self._bridge.assign(
                req.group_id, call.protocol, call.members, call.timeout_ms, call.subscriptions
            )
        except Exception as exc:
            log.error(
                "group=%s gen=%d hand-over failed: %s; rebalancing", req.group_id, req.generation_id, exc
            )
            self._rebalance(req.group_id)
            return refusal(req, SyncGroupResponse, ErrorCode.REBALANCE_IN_PROGRESS)
        if self._bridge.hand_over_incomplete(req.group_id):
            # A previous owner did not let go in time: try again once its owner znode can be taken.
            asyncio.get_running_loop().call_later(md.FOLLOW_UP_REBALANCE_S, self._rebalance, req.group_id)
        return replace(req, assignments=tuple(assignments.items()))

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
        present = md.present_members(group)
        if self._reported.get(group_id) == present:
            return
        topics = md.watched_topics(group)
        if topics is not None:
            self._bridge.watch(group_id, topics, lambda: self._rebalance(group_id))
        self._reported[group_id] = present
        bridge = self._bridge

        async def report() -> None:
            try:
                await mirror_settled(self._runtime, self._mirror, group_id, md.SETTLE_BEFORE_RELEASE_MS)
                await bridge.members_changed(group_id, present)
            except Exception:
                log.exception("group=%s: releasing departed members' znodes failed", group_id)
                self._reported.pop(group_id, None)  # the next event retries

        task = asyncio.ensure_future(report())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
