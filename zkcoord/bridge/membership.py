"""The mixed-group membership bridge (`zkcoord serve --bridge-zk-groups REGEX`): makes the legacy ZooKeeper members
and the broker-protocol members of a matching group one group, and the read/repair API the migrate workflow uses.

Mechanism (docs/migration.md, "Member-by-member migration"): each broker-protocol member is registered under
`/consumers/G/ids/<consumer id>` (zkcoord.bridge.mixed_policy names and encodes it) so legacy members include it;
at the leader's SyncGroup the coordinator computes the legacy algorithm over the combined member list, deletes the
owner znodes its members give up (every member of the new generation has rejoined; eager members revoke all
before JoinGroup, and a cooperative (KIP-429) member's znodes of partitions it still owns are kept, what moves away
from it being withheld until it rejoins without it), creates the owner znodes of their new partitions (waiting for the previous holder's deletion,
bounded) and answers exactly those partitions, whatever the leader proposed. A legacy join, leave or session loss,
or a partition increase, makes the coordinator rebalance the broker-protocol side.

Hostile data is one item's problem: a malformed legacy registration is left out of the group's computation (logged,
rate-limited, with its path and why; the other members go on; a change to it rebalances); stream counts are bounded
by the partition count; a malformed fence fails closed: nothing is written for the group, SyncGroup answers each
member only the partitions whose owner znodes already hold it, no rebalance is requested (no generation churn), and
a change to the fence rebalances.

Guarantees: a broker-protocol member is sent a partition only after its owner znode is held for it; its owner
znode is deleted only once it gave the partition up (rejoined, left, or was removed); the znodes are persistent and
written only under the group's fence (zkcoord.zk.mixed_group), so a coordinator's crash does not free partitions
its members may still consume, and a coordinator that lost the group cannot write any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

from zkcoord.bridge.mixed_policy import (
    CLASSIC,
    CONSUMER_KIND,
    LEGACY_STRATEGIES,
    ClassicMember,
    HandOver,
    Malformed,
    MemberView,
    MixedGroupRefused,
    check_protocols,
    check_strategy,
    check_subscriptions,
    classic_marker,
    consumer_id_for,
    decode_owned_partitions,
    encode_assignment,
    encode_classic_registration,
    legacy_registrations,
    legacy_strategy,
    member_views,
    parse_registration,
    plan_assignment,
    plan_hand_over,
    registered_kind,
    thread_for,
)
from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import ConsumerRegistration
from zkcoord.legacy.ids import is_classic_id
from zkcoord.ratelog import RateLimitedLog
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import mixed_group as zkm
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.member_zk import read_topic_partitions
from zkcoord.zk.session import Client, connect

log = logging.getLogger(__name__)
# Every join, sync and retry of every member meets a bad znode again: a few lines a minute per kind, all counted.
_say = RateLimitedLog(log)
T = TypeVar("T")

__all__ = ["MemberView", "MixedGroupBridge", "MixedGroupRefused", "read_members", "repair"]


def read_members(client: Client, group: str) -> list[MemberView]:
    """The members of `group` (consumer ids in Java order) with their protocol (`legacy` or `classic`) and the
    partitions their owner znodes hold."""
    return member_views(zkm.read_ids(client, group), zkm.read_owners(client, group))


def repair(client: Client, group: str) -> list[str]:
    """Remove what coordinators that are all gone left of a group's broker-protocol members: their ids znodes,
    the owner znodes their threads hold, the fence. Returns the deleted paths.

    Call it only when no coordinator serves the group any more (every `zkcoord serve --bridge-zk-groups` node
    is stopped, or the group's broker-protocol members are all stopped): the znodes are persistent precisely so
    that no one else frees partitions those members may still consume."""
    ids = zkm.read_ids(client, group)
    classic = [cid for cid, data in ids.items() if classic_marker(data) is not None]
    return zkm.repair_ops(client, group, classic, [thread_for(c) for c in classic])


class MixedGroupBridge:
    """Process-wide (one per `serve`, shared by every group service). Blocking ZooKeeper work runs in worker
    threads; call the async methods on the serving loop. `hand_over_timeout_ms` bounds the wait for a previous
    owner's release at one SyncGroup (whatever was not held by then is left for the next rebalance)."""

    def __init__(
        self,
        connect_string: str,
        groups: str,
        *,
        holder: str = "zkcoord",
        hand_over_timeout_ms: int = 10000,
        session_timeout_s: float = 10.0,
        auth: ZkAuth = NO_AUTH,
    ) -> None:
        self.pattern = re.compile(groups)
        self.connect_string = connect_string
        self.holder = holder
        self.hand_over_timeout_ms = hand_over_timeout_ms
        self.session_timeout_s = session_timeout_s
        # The node's ZooKeeper identity: it logs in on a secured ZooKeeper, and under zookeeper.set.acl every
        # znode the bridge creates (ids, owners, the fence) gets Kafka's ACLs through the client's policy.
        self.auth = auth
        self.client: Client | None = None
        self._fences: dict[str, int] = {}
        self._held: dict[str, dict[TopicPartition, str]] = {}  # group -> partition -> our thread
        self._registered: dict[str, dict[str, str]] = {}  # group -> member id -> consumer id
        # group -> member id -> the protocol names its JoinGroup offered (present members only: members_changed)
        self._offered: dict[str, dict[str, tuple[str, ...]]] = {}
        self._watches: dict[str, Callable[[], None]] = {}
        self._callbacks: dict[str, Callable[[], None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watched_bad: set[str] = set()  # malformed znodes with a pending exists-watch (one each)
        # group -> the partitions its last hand-over left unheld (the service rebalances again soon, or hands a
        # withheld one on)
        self._unheld: dict[str, dict[TopicPartition, str]] = {}  # ... and the member id each goes to
        # group -> partition -> (giver, recipient) member ids of what its last hand-over withheld (`withheld`)
        self._withheld: dict[str, dict[TopicPartition, tuple[str, str]]] = {}
        # group -> (new KIP-429 members registered only at their hand-on, their owner znodes to take then)
        self._deferred: dict[str, tuple[dict[str, ClassicMember], list[tuple[TopicPartition, str]]]] = {}
        # group -> member id -> its partitions of the last hand-over (held or not)
        self._shares: dict[str, dict[str, tuple[TopicPartition, ...]]] = {}

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.client = await asyncio.to_thread(
            connect, self.connect_string, session_timeout_s=self.session_timeout_s, auth=self.auth
        )

    async def close(self) -> None:
        for stop in self._watches.values():
            stop()
        self._watches.clear()
        if self.client is not None:
            client, self.client = self.client, None
            await asyncio.to_thread(lambda: (client.stop(), client.close()))

    def bridges(self, group_id: str) -> bool:
        return self.pattern.fullmatch(group_id) is not None

    @property
    def incomplete(self) -> Mapping[str, bool]:
        """Group -> whether its last hand-over left a partition unheld (read-only: only a hand-over sets it)."""
        return MappingProxyType({g: bool(tps) for g, tps in self._unheld.items()})

    def _take_later(self, group: str, fence: int, members: set[str], deadline: float) -> None:
        """Register the deferred members among `members` and take their pending owner znodes (waiting for the
        legacy members' release, bounded by `deadline`)."""
        deferred, later = self._deferred.get(group, ({}, []))
        mine = {mid: m for mid, m in deferred.items() if mid in members}
        if not mine:
            return
        client = self._zk()
        registered = self._registered.setdefault(group, {})
        now_ms = int(time.time() * 1000)
        zkm.fenced_write(client, group, fence, create=[
            (paths.id_path(group, registered[mid]), encode_classic_registration(m, now_ms)) for mid, m in mine.items()
        ])  # fmt: skip
        threads = {thread_for(registered[mid]) for mid in mine}
        pending = [(tp, th) for tp, th in later if th in threads]
        self._deferred[group] = (
            {mid: m for mid, m in deferred.items() if mid not in mine},
            [a for a in later if a not in pending],
        )
        held = self._held.setdefault(group, {})
        self._take(client, group, fence, pending, held, deadline)
        unheld = self._unheld.get(group, {})
        self._unheld[group] = {
            tp: to for tp, to in unheld.items() if held.get(tp) != thread_for(registered.get(to, ""))
        }

    def hand_over_incomplete(self, group: str, holding: Iterable[str] = ()) -> bool:
        """Whether the group's last hand-over left a partition unheld, other than those going to the members in
        `holding` (whose answers the service holds for a `hand_on`): the service rebalances again soon."""
        holding = set(holding)
        return any(to not in holding for to in self._unheld.get(group, {}).values())

    def withheld(self, group: str) -> Mapping[TopicPartition, tuple[str, str]]:
        """Partition -> (giver, recipient): what the group's last hand-over withheld from `recipient` because
        `giver`, a KIP-429 classic member, still owned it (both classic members), and `hand_on` has not moved."""
        return MappingProxyType(self._withheld.get(group, {}))

    def _lock(self, group: str) -> asyncio.Lock:
        return self._locks.setdefault(group, asyncio.Lock())

    def _zk(self) -> Client:
        if self.client is None:
            raise RuntimeError("mixed-group bridge used before start()")
        return self.client

    # -- adoption ------------------------------------------------------------------------------------------

    def _adopt(self, group: str) -> int:
        """Blocking: take the group's fence (once per bridge) and learn what our members' znodes hold."""
        fence = self._fences.get(group)
        if fence is None:
            client = self._zk()
            fence = self._fences[group] = zkm.adopt(client, group, self.holder)
            ids = zkm.read_ids(client, group)
            ours = {cid for cid, data in ids.items() if classic_marker(data) is not None}
            self._registered[group] = {
                (classic_marker(ids[cid]) or {}).get("member_id", cid): cid for cid in sorted(ours)
            }
            threads = {thread_for(cid) for cid in ours}
            self._held[group] = {tp: th for tp, th in zkm.read_owners(client, group).items() if th in threads}
            log.info(
                "group=%s adopted: %d classic members, %d owner znodes",
                group,
                len(ours),
                len(self._held[group]),
            )
        return fence

    def _legacy(self, group: str, ids: dict[str, bytes]) -> dict[str, ConsumerRegistration]:
        """The readable legacy registrations; each malformed one is logged, watched (a repair or removal
        rebalances) and left out, so it is that member's problem only."""
        legacy, bad = legacy_registrations(group, ids, paths.id_path)
        for item in bad:
            self._malformed(group, "mixed-malformed-registration", item, "left out of the group's assignment")
        return legacy

    def _malformed(self, group: str, kind: str, item: Malformed, consequence: str) -> None:
        _say.log(logging.ERROR, kind, "group=%s malformed znode %s: %s; %s until it is repaired or removed",
                 group, item.path, item.reason, consequence)  # fmt: skip
        if item.path in self._watched_bad or self.client is None:
            return
        self._watched_bad.add(item.path)
        loop = self._loop

        def changed(_event: object) -> None:
            self._watched_bad.discard(item.path)
            callback = self._callbacks.get(group)
            if callback is not None and loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(callback)

        try:
            self.client.exists(item.path, watch=changed)
        except Exception:  # the next join or sync meets it again and retries the watch
            self._watched_bad.discard(item.path)

    def _fence_malformed(self, group: str, exc: MalformedZnode, consequence: str) -> None:
        self._malformed(group, "mixed-malformed-fence", Malformed(exc.path, exc.reason), consequence)

    def _refenced(self, group: str, fn: Callable[..., T], *args: object) -> T:
        """Run `fn`; if another coordinator adopted the group since, adopt it back once and rerun: the service
        calls only while it serves the group, so the other one's time is over (it cannot write any more)."""
        try:
            return fn(*args)
        except zkm.FenceMoved:
            log.warning("group=%s: adopted by another coordinator meanwhile; adopting it again", group)
            self._fences.pop(group, None)
            return fn(*args)

    # -- the group service's hooks -------------------------------------------------------------------------

    def usable_protocols(self, protocol_type: str, protocols: Iterable[tuple[str, bytes]]) -> tuple[str, ...]:
        """The names of the offered protocols a bridged group hosts; raises MixedGroupRefused, saying why, for a
        member that offers none (mixed_policy.check_protocols)."""
        return check_protocols(protocol_type, protocols)

    async def check_join(self, group: str, topics: Sequence[str], protocol: str) -> None:
        """Refuse a classic member whose subscription or strategy disagrees with the legacy members'."""
        await asyncio.to_thread(self._check_join, group, tuple(topics), protocol)

    def _check_join(self, group: str, topics: tuple[str, ...], protocol: str) -> None:
        client = self._zk()
        legacy = self._legacy(group, zkm.read_ids(client, group))
        check_subscriptions(legacy, [ClassicMember("joining", "", topics)], protocol)
        parts = self._partitions(client, topics)
        if protocol in LEGACY_STRATEGIES:  # a cooperative group follows the legacy members' algorithm
            check_strategy(protocol, legacy, parts, zkm.read_owners(client, group))

    @staticmethod
    def _partitions(client: Client, topics: Iterable[str]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic in sorted(set(topics)):
            found = read_topic_partitions(client, topic)
            out[topic] = list(found or ())
        return out

    def watch(self, group: str, topics: Sequence[str], on_change: Callable[[], None]) -> None:
        """Call `on_change()` on the loop whenever the group's legacy members change (one joins, leaves or
        loses its session: the ids children other than our own `<group>_classic-<hex>` ones) or a subscribed
        topic's partition data changes. The watch is set once per group; a later call only replaces the callback
        (a reloaded group service rebinds it to itself)."""
        self._callbacks[group] = on_change
        if group in self._watches or self._loop is None:
            return
        loop = self._loop
        self._watches[group] = lambda: None  # placeholder until the watch is set
        seen: list[frozenset[str] | None] = [None]

        def fire() -> None:
            callback = self._callbacks.get(group)
            if callback is not None:
                callback()

        def changed(children: tuple[str, ...] | None) -> None:
            if children is not None:
                legacy = frozenset(c for c in children if not is_classic_id(group, c))
                previous, seen[0] = seen[0], legacy
                if previous is None or previous == legacy:
                    # the first read, or only our own registrations moved: registering a classic member (the
                    # first one into a group too) must not restart the rebalance whose hand-over registered it
                    return
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(fire)

        def setup() -> None:
            self._watches[group] = zkm.watch_group(self._zk(), group, topics, changed)

        loop.run_in_executor(None, setup)

    async def assign(
        self,
        group: str,
        protocol: str,
        members: Sequence[tuple[str, str, tuple[str, ...]]],
        timeout_ms: int,
        metadata: Mapping[str, bytes] | None = None,
        owned: Mapping[str, Sequence[TopicPartition]] | None = None,
    ) -> dict[str, bytes]:
        """The leader's SyncGroup: register the generation's members, hand partitions over, and return each
        member's assignment (ConsumerProtocolAssignment bytes) of exactly the partitions held for it.
        `metadata`: member id -> the subscription of each KIP-429 member (the group service hands on only those of
        members answered a cooperative name), whose owned partitions its hand-over keeps.
        `owned`: member id -> what it may still consume whatever the protocol (a consumer-protocol member,
        KIP-848): its owner znodes are kept and those partitions withheld from others until it gives them up."""
        async with self._lock(group):
            subscriptions = metadata or {}
            still = owned or {}
            classic = tuple(
                ClassicMember(
                    mid,
                    client,
                    topics,
                    tuple(still[mid]) if mid in still else self._still_owned(subscriptions.get(mid)),
                    CONSUMER_KIND if mid in still else CLASSIC,  # `owned` names exactly the consumer members
                    () if mid in still else self._offered.get(group, {}).get(mid, ()),
                )
                for mid, client, topics in members
            )
            return await asyncio.to_thread(
                self._refenced,
                group,
                self._assign,
                group,
                protocol,
                classic,
                timeout_ms,
                frozenset(subscriptions),
            )

    @staticmethod
    def _still_owned(subscription: bytes | None) -> tuple[TopicPartition, ...]:
        """What a KIP-429 member says it still owns; eager members (no subscription handed on) own nothing at a
        rebalance. A subscription that cannot be read counts as owning nothing new: its znodes then go only when
        the member leaves."""
        if subscription is None:
            return ()
        return decode_owned_partitions(subscription) or ()

    def _assign(
        self,
        group: str,
        protocol: str,
        classic: tuple[ClassicMember, ...],
        timeout_ms: int,
        cooperative: frozenset[str] = frozenset(),
    ) -> dict[str, bytes]:
        client = self._zk()
        try:
            fence = self._adopt(group)
        except MalformedZnode as exc:
            self._fence_malformed(group, exc, "nothing is written for the group and no partition moves")
            return self._frozen(group, classic)
        ids = zkm.read_ids(client, group)
        legacy = self._legacy(group, ids)
        check_subscriptions(legacy, classic, protocol)
        parts = self._partitions(client, {t for m in classic for t in m.topics})
        registered = self._registered.setdefault(group, {})
        wanted = self._consumer_ids(group, [m.member_id for m in classic])
        now_ms = int(time.time() * 1000)
        create = [
            (paths.id_path(group, cid), encode_classic_registration(m, now_ms))
            for m in classic
            if (cid := wanted[m.member_id]) not in ids
        ]
        gone = [cid for mid, cid in registered.items() if mid not in wanted]
        target: dict[TopicPartition, str] = {}
        strategy = protocol
        if protocol not in LEGACY_STRATEGIES:
            strategy = legacy_strategy(protocol, legacy, parts, zkm.read_owners(client, group))
        held = self._held.setdefault(group, {})
        # What each KIP-429 member still owns and holds stays with it (the classic part is spread stickily).
        keeping = {
            tp: m.member_id
            for m in classic
            for tp in m.owned
            if held.get(tp) == thread_for(wanted[m.member_id])
        }
        shares = plan_assignment(strategy, legacy, classic, group, parts, wanted, keeping)
        for mid, tps in shares.items():
            for tp in tps:
                target[tp] = thread_for(wanted[mid])
        threads = {thread_for(c) for c in registered.values()} | set(target.values())
        still_owned = {tp: thread_for(wanted[m.member_id]) for m in classic for tp in m.owned}
        plan = plan_hand_over(target, held, threads, still_owned)
        by_thread = {thread_for(cid): mid for mid, cid in wanted.items()}
        kinds = {m.member_id: m.kind for m in classic}
        self._withheld[group] = {
            tp: (giver, to)
            for tp, th in plan.withheld
            if kinds.get(giver := by_thread.get(held.get(tp, ""), "")) == CLASSIC
            and kinds.get(to := by_thread.get(th, "")) == CLASSIC
        }
        self._shares[group] = dict(shares)
        # A new KIP-429 member that is to receive a withheld partition: the service holds its answer until the
        # giver's rejoin (`hand_on`), so it is registered only then. Until then the legacy members do not count
        # it and keep consuming its share, which it could not consume before its answer anyway; at the hand-on
        # they release it (make before break) and its answer carries all of it.
        deferred = {
            to: m
            for m in classic
            if (to := m.member_id) in {r for _g, r in self._withheld[group].values()}
            and to in cooperative
            and wanted[to] not in ids
        }
        if deferred:
            # Only when the others' shares do not wait for it: every partition going to another classic member
            # is in the classic part the legacy members compute without the deferred ones (else they would keep
            # it until the hand-on, and the whole SyncGroup would wait for it).
            others = [m for m in classic if m.member_id not in deferred]
            without = {
                tp
                for tps in plan_assignment(strategy, legacy, others, group, parts, wanted).values()
                for tp in tps
            }
            if any(tp not in without for m in others for tp in shares[m.member_id]):
                deferred = {}
        later = [(tp, th) for tp, th in plan.acquire if by_thread.get(th) in deferred]
        if deferred:
            create = [(path, data) for path, data in create if path.rsplit("/", 1)[-1] not in
                      {wanted[mid] for mid in deferred}]  # fmt: skip
            plan = HandOver(plan.release, tuple(a for a in plan.acquire if a not in later), plan.withheld)
        self._deferred[group] = (deferred, later)
        if plan.withheld:
            # KIP-429: the owner is answered without them, revokes them and rejoins; the follow-up hands them over.
            log.info(
                "group=%s withholding %d partitions their cooperative owners still own: %s",
                group,
                len(plan.withheld),
                ", ".join(f"{tp}->{th}" for tp, th in plan.withheld[:10]),
            )
        # Release first: every eager member of this generation has rejoined (revoked), a cooperative member
        # rejoined without what it revoked, and a member gone holds nothing.
        release = [paths.owner_path(group, tp.topic, tp.partition) for tp in plan.release]
        release += [
            paths.owner_path(group, tp.topic, tp.partition)
            for tp, th in held.items()
            if th in {thread_for(c) for c in gone} and tp not in plan.release
        ]
        zkm.fenced_write(
            client, group, fence, create=create, delete=release + [paths.id_path(group, c) for c in gone]
        )
        for path in release:
            topic, part = path.rsplit("/", 2)[-2:]
            held.pop(TopicPartition(topic, int(part)), None)
        for c in gone:
            registered.pop(next(mid for mid, cid in registered.items() if cid == c), None)
        registered.update(wanted)
        deadline = time.monotonic() + timeout_ms / 1000
        self._take(client, group, fence, list(plan.acquire), held, deadline)
        out: dict[str, bytes] = {}
        for m in classic:
            thread = thread_for(wanted[m.member_id])
            out[m.member_id] = encode_assignment(tp for tp in shares[m.member_id] if held.get(tp) == thread)
        self._unheld[group] = {tp: by_thread.get(th, "") for tp, th in target.items() if held.get(tp) != th}
        return out

    async def hand_on(
        self, group: str, giver: str, still_owned: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[str, bytes]:
        """`giver` rejoined without partitions withheld from others for it (none of them in `still_owned`: its
        KIP-429 JoinGroup proves it revoked them): in one fenced multi-op their owner znodes go from its thread
        to the threads of the members they were withheld for. A recipient the hand-over left unregistered (a
        new member) is registered now and its owner znodes taken, waiting at most `timeout_ms` for the legacy
        members' release. Returns those members' assignments (of what is held for each now) by member id; {}
        when nothing moved."""
        async with self._lock(group):
            return await asyncio.to_thread(
                self._refenced, group, self._hand_on, group, giver, frozenset(still_owned), timeout_ms
            )

    def _hand_on(
        self, group: str, giver: str, still_owned: frozenset[TopicPartition], timeout_ms: int
    ) -> dict[str, bytes]:
        deadline = time.monotonic() + timeout_ms / 1000
        withheld = self._withheld.get(group, {})
        registered = self._registered.get(group, {})
        held = self._held.get(group, {})
        mine = registered.get(giver)
        moves = [
            (tp, to)
            for tp, (g, to) in sorted(withheld.items())
            if g == giver
            and tp not in still_owned
            and mine is not None
            and held.get(tp) == thread_for(mine)
            and to in registered
        ]
        if not moves:
            return {}
        fence = self._adopt(group)
        zkm.fenced_write(
            self._zk(),
            group,
            fence,
            delete=[paths.owner_path(group, tp.topic, tp.partition) for tp, _ in moves],
            create=[
                (
                    paths.owner_path(group, tp.topic, tp.partition),
                    zkm.owner_payload(thread_for(registered[to])),
                )
                for tp, to in moves
            ],
        )
        for tp, to in moves:
            held[tp] = thread_for(registered[to])
        # A new dict, never changed in place: the serving loop reads `withheld` (a view) while this thread runs.
        moved = {tp for tp, _ in moves}
        self._withheld[group] = {tp: v for tp, v in withheld.items() if tp not in moved}
        self._unheld[group] = {
            tp: to
            for tp, to in self._unheld.get(group, {}).items()
            if held.get(tp) != thread_for(registered.get(to, ""))
        }
        self._take_later(group, fence, {to for _, to in moves}, deadline)
        log.info(
            "group=%s handed on in the same generation %d partitions %s revoked: %s",
            group,
            len(moves),
            giver,
            ", ".join(f"{tp}->{to}" for tp, to in moves[:10]),
        )
        shares = self._shares.get(group, {})
        out: dict[str, bytes] = {}
        for to in sorted({to for _, to in moves}):
            thread = thread_for(registered[to])
            out[to] = encode_assignment(tp for tp in shares.get(to, ()) if held.get(tp) == thread)
        return out

    @classmethod
    def _take(
        cls,
        client: Client,
        group: str,
        fence: int,
        pending: list[tuple[TopicPartition, str]],
        held: dict[TopicPartition, str],
        deadline: float,
    ) -> None:
        """Take the owner znodes in `pending` for their threads: all in one multi-op when all are free (the usual
        case); else, with a hint that the hand-over waits for them (so a leaving zkcoord member consumes them
        until now and releases them at once: make before break), one by one as their holders let go, until
        `deadline`. What is taken is added to `held`."""
        if not pending or cls._take_all(client, group, fence, pending, held):
            return
        hints = zkm.announce_wanted(client, group, [tp for tp, _ in pending]) if pending else []
        try:
            cls._acquire_pending(client, group, fence, list(pending), held, deadline)
        finally:
            zkm.withdraw_wanted(client, hints)

    @staticmethod
    def _take_all(
        client: Client,
        group: str,
        fence: int,
        pending: list[tuple[TopicPartition, str]],
        held: dict[TopicPartition, str],
    ) -> bool:
        """Every owner znode in `pending` created for its thread in one fenced multi-op (added to `held`), or none
        (False: one of them is held)."""
        try:
            zkm.fenced_write(client, group, fence, create=[
                (paths.owner_path(group, tp.topic, tp.partition), zkm.owner_payload(th)) for tp, th in pending
            ])  # fmt: skip
        except zkm.OwnerHeld:
            return False
        held.update(dict(pending))
        return True

    @staticmethod
    def _acquire_pending(
        client: Client,
        group: str,
        fence: int,
        pending: list[tuple[TopicPartition, str]],
        held: dict[TopicPartition, str],
        deadline: float,
    ) -> None:
        """Take each owner znode in `pending` for its thread, waiting (a watch, until `deadline`) for a holder's
        deletion; what is still held then is left for the next rebalance."""
        while pending:
            # A previous holder releases its partitions together (one multi-op): take all free ones together
            # too, rather than one round trip each after each wait.
            if len(pending) > 1 and MixedGroupBridge._take_all(client, group, fence, pending, held):
                return
            tp, thread = pending.pop(0)
            path = paths.owner_path(group, tp.topic, tp.partition)
            try:
                zkm.fenced_write(client, group, fence, create=[(path, zkm.owner_payload(thread))])
                held[tp] = thread
                continue
            except zkm.OwnerHeld:
                pass
            current = zkm.owner_holder(client, group, tp)
            if current == thread:
                held[tp] = thread
                continue
            left = deadline - time.monotonic()
            if left > 0 and zkm.wait_gone(client, path, left):
                pending.insert(0, (tp, thread))
                continue
            log.warning(
                "group=%s %s: still owned by %s after the hand-over wait; left for the next rebalance",
                group,
                tp,
                current,
            )

    def _consumer_ids(self, group: str, member_ids: Sequence[str]) -> dict[str, str]:
        """Member id -> consumer id: the registered one, else a new one sorting after every classic id the
        group has (`consumer_id_for`: join order, so a join moves no classic member's range)."""
        registered = self._registered.get(group, {})
        taken = list(registered.values())
        out: dict[str, str] = {}
        for mid in member_ids:
            out[mid] = registered.get(mid) or consumer_id_for(group, mid, taken)
            taken.append(out[mid])
        return out

    def _frozen(self, group: str, classic: Sequence[ClassicMember]) -> dict[str, bytes]:
        """Fail closed: each member gets only the partitions whose owner znodes hold its thread right now (read
        from ZooKeeper, so nothing another coordinator took over is sent), nothing is written, and no rebalance
        is scheduled (a change to the bad znode triggers one)."""
        owners = zkm.read_owners(self._zk(), group)
        self._unheld[group] = {}
        self._withheld[group] = {}
        self._deferred[group] = ({}, [])
        out: dict[str, bytes] = {}
        for m in classic:
            thread = thread_for(self._consumer_ids(group, [m.member_id])[m.member_id])
            out[m.member_id] = encode_assignment(tp for tp, th in sorted(owners.items()) if th == thread)
        return out

    async def preregister(
        self, group: str, member: tuple[str, str, tuple[str, ...]], kind: str = CLASSIC
    ) -> None:
        """Register a joining member under ids before its rebalance completes, so the legacy members rebalance
        (and release what it will get) while the broker-protocol side is still joining. `kind`: CLASSIC or CONSUMER_KIND."""
        mid, client_id, topics = member
        if mid in self._registered.get(group, {}):
            return
        async with self._lock(group):
            await asyncio.to_thread(
                self._refenced,
                group,
                self._preregister,
                group,
                ClassicMember(
                    mid,
                    client_id,
                    topics,
                    kind=kind,
                    protocols=self._offered.get(group, {}).get(mid, ()) if kind == CLASSIC else (),
                ),
            )

    def _preregister(self, group: str, member: ClassicMember) -> None:
        try:
            fence = self._adopt(group)
        except MalformedZnode as exc:
            self._fence_malformed(group, exc, "the member is not registered early")
            return
        registered = self._registered.setdefault(group, {})
        if member.member_id in registered:
            return
        cid = self._consumer_ids(group, [member.member_id])[member.member_id]
        data = encode_classic_registration(member, int(time.time() * 1000))
        with contextlib.suppress(zkm.OwnerHeld):  # already there (adopted from a previous coordinator)
            zkm.fenced_write(self._zk(), group, fence, create=[(paths.id_path(group, cid), data)])
        registered[member.member_id] = cid

    def offered(self, group: str, member_id: str, names: Sequence[str]) -> None:
        """Keep the protocol names a classic member's JoinGroup offered, for its registration (written once, by
        `preregister` or the hand-over that first includes it)."""
        if member_id:
            self._offered.setdefault(group, {})[member_id] = tuple(names)

    async def members_changed(self, group: str, present: Iterable[str]) -> None:
        """The group's members are now `present` (member ids): release what members gone held, remove their ids."""
        present_set = set(present)
        offered = self._offered.get(group)
        if offered is not None:  # bounded by the members present
            kept = {m: n for m, n in offered.items() if m in present_set}
            if kept:
                self._offered[group] = kept
            else:
                del self._offered[group]
        if group in self._fences and not any(
            mid not in present_set for mid in self._registered.get(group, {})
        ):
            return
        async with self._lock(group):
            await asyncio.to_thread(self._refenced, group, self._release_gone, group, present_set)

    def _release_gone(self, group: str, present: set[str]) -> None:
        client = self._zk()
        try:
            fence = self._adopt(group)
        except (
            MalformedZnode
        ) as exc:  # fail closed: departed members' owner znodes stay (their partitions idle)
            self._fence_malformed(group, exc, "departed members' owner znodes are kept")
            return
        registered = self._registered.setdefault(group, {})
        gone = {mid: cid for mid, cid in registered.items() if mid not in present}
        if not gone:
            return
        threads = {thread_for(c) for c in gone.values()}
        held = self._held.setdefault(group, {})
        victims = [tp for tp, th in held.items() if th in threads]
        zkm.fenced_write(
            client,
            group,
            fence,
            delete=[paths.owner_path(group, tp.topic, tp.partition) for tp in victims]
            + [paths.id_path(group, c) for c in gone.values()],
        )
        for tp in victims:
            held.pop(tp, None)
        for mid in gone:
            registered.pop(mid, None)
        log.info(
            "group=%s released %d partitions of %d departed classic members", group, len(victims), len(gone)
        )

    async def adopted_members(
        self, group: str, adopt: bool = True
    ) -> dict[str, tuple[str, tuple[str, ...], tuple[TopicPartition, ...], str | None]]:
        """Adopt the group (as any write would; not with `adopt=False`: a plain read) and return every
        broker-protocol member registered for it, by member id: (client id, subscribed topics, the partitions its
        owner znodes hold, its kind from the registration: CLASSIC, CONSUMER_KIND, None when unmarked). A restarted or moved coordinator reads here the consumer-protocol members (KIP-848) it
        has no records of, whose owner znodes it must keep until they are heard from or their session passes. A
        malformed fence adopts nothing (it fails closed: nothing is released either) and the members are read as
        they are."""

        def read() -> dict[str, tuple[str, tuple[str, ...], tuple[TopicPartition, ...], str | None]]:
            client = self._zk()
            if adopt:
                with contextlib.suppress(MalformedZnode):
                    self._adopt(group)
            ids = zkm.read_ids(client, group)
            owners = zkm.read_owners(client, group)
            out = {}
            for cid, data in sorted(ids.items()):
                marker = classic_marker(data)
                if marker is None:
                    continue
                parsed = parse_registration(paths.id_path(group, cid), data)
                topics = () if isinstance(parsed, Malformed) else tuple(sorted(parsed.topic_counts))
                thread = thread_for(cid)
                held = tuple(sorted(tp for tp, th in owners.items() if th == thread))
                kind = registered_kind(marker)
                out[marker.get("member_id", cid)] = (marker.get("client_id", ""), topics, held, kind)
            return out

        async with self._lock(group):
            return await asyncio.to_thread(self._refenced, group, read)

    async def legacy_members(
        self, group: str
    ) -> dict[str, tuple[tuple[str, ...], tuple[TopicPartition, ...]]]:
        """The group's legacy (ZooKeeper) members by consumer id: (subscribed topics, the partitions their owner
        znodes hold), for ConsumerGroupDescribe. An owner znode whose consumer is not registered (a member
        mid-exit, a stale znode) is listed too, with no topics, so nothing owned is hidden. Read only."""

        def read() -> dict[str, tuple[tuple[str, ...], tuple[TopicPartition, ...]]]:
            client = self._zk()
            ids = zkm.read_ids(client, group)
            legacy = self._legacy(group, ids)
            out = {}
            for view in member_views(ids, zkm.read_owners(client, group)):
                if view.protocol == CLASSIC:
                    continue
                reg = legacy.get(view.consumer_id)
                out[view.consumer_id] = (
                    tuple(sorted(reg.topic_counts)) if reg is not None else (),
                    view.owned,
                )
            return out

        return await asyncio.to_thread(read)

    async def legacy_owns(self, group: str, tps: Sequence[TopicPartition]) -> bool:
        """True when every partition's owner znode is held by a legacy member (not one of ours)."""

        def check() -> bool:
            owners = zkm.read_owners(self._zk(), group)
            ours = {thread_for(c) for c in self._registered.get(group, {}).values()}
            return all(tp in owners and owners[tp] not in ours | {zkm.MALFORMED_OWNER} for tp in tps)

        return await asyncio.to_thread(check)
