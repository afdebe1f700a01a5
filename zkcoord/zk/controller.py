"""Controller election and the controller's duties over ZooKeeper: at most one node acts as controller, and
every controller write is fenced by the controller epoch it won, so a deposed controller cannot change state.

Election (as Kafka 0.8-2.x `ZookeeperLeaderElector` + `KafkaController.incrementControllerEpoch`):
1. create the ephemeral `/controller` = `{"version":1,"brokerid":N,"timestamp":"<ms>"}`; NodeExists owned by our
   own session (a retried create) is a win, owned by another session is a loss;
2. the winner bumps `/controller_epoch` with a versioned set (creates it as "1" when absent); a version
   conflict or NodeExists means another controller moved in (`ControllerMoved`): resign;
3. losers keep a watch on `/controller` and run again when it disappears.

Fencing: the epoch write leaves `/controller_epoch` at a znode version that only this controller knows; every
later controller write is one multi-op that starts with `check(/controller_epoch, version)`. A new controller
must bump that version first, so from that moment the old controller's multis fail as a whole
(`ControllerMoved`). In addition the controller stops acting before anything else when its connection is
suspended or its session lost (the kazoo state listener feeds SUSPENDED / LOST to the lifecycle table,
`zkcoord.zk.controller_state`, and the state is checked before every write); after a reconnect on the same
session it resumes only if the epoch znode is still its own.

Connection generations: the state listener bumps a generation counter on every connection state change, under
the same lock that guards the state (`zkcoord.zk.coalescing.CoalescingWorker`). The worker notes the generation
when a pass begins and may feed WON / RESUMED (→ ACTIVE) only under that lock, only while the generation is
unchanged and the client connected. So a pass whose reads
were made before a suspension can never switch a node back on after the listener switched it off (a stale
pass is retried in the new generation and re-verifies `/controller` and the epoch first).

Duties (one worker thread, coalesced work, each pass idempotent; the table decides which steps a pass runs): watch `/brokers/ids`, `/brokers/topics`
(and each topic's assignment, for partition increases) and `/admin/delete_topics`; delete marked topics once
every live node has acknowledged that its partition logs and group offsets of the topic are gone (its
`/zkcoord/topic-deletions/T/<node id>`, Kafka's StopReplica(delete) round in znodes);
create `__consumer_offsets` when absent; plan leaders with `zkcoord.placement.leadership` (balanced offsets
partitions, sticky data partitions) and write partition state `{"controller_epoch","leader","version",
"leader_epoch","isr"}` for every partition whose leader changed.

Malformed znodes are their own problem (each logged once per version, counted in `malformed_seen`): a broker
registration that does not parse is not live; a topic whose assignment or any partition state does not parse
is left out of planning (and left intact) while every other topic is served, and is still deleted when marked;
a `/controller` that parses neither as JSON nor as the pre-0.8.2 plain id is deleted (version-checked) and the
election runs again, as Kafka's ZookeeperLeaderElector resigns (deleting `/controller`) when it cannot parse it.
That holds for the controller's own znode too: its data watch wakes it when the data is rewritten, and data that
no longer parses or names another node makes it stop acting first (Kafka's `maybeResign`), then delete the znode
(version-checked) and stand for election again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import KazooState

from zkcoord.errors import MalformedZnode, ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import (
    BrokerRegistration,
    ControllerInfo,
    PartitionState,
    TopicAssignment,
    encode_controller_epoch,
)
from zkcoord.placement.coordinator import DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS, OFFSETS_TOPIC
from zkcoord.placement.leadership import (
    NO_LEADER,
    Leadership,
    Placement,
    TopicSpec,
    plan_leadership,
    single_replica_assignment,
)
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import controller_state, registry
from zkcoord.zk.coalescing import CoalescingWorker
from zkcoord.zk.controller_state import ControllerEvent, ControllerState, ControllerWork
from zkcoord.zk.registry import read_controller_epoch

log = logging.getLogger(__name__)

_CONNECTION_EVENTS = {
    KazooState.SUSPENDED: ControllerEvent.SUSPENDED,
    KazooState.LOST: ControllerEvent.LOST,
    KazooState.CONNECTED: ControllerEvent.CONNECTED,
}

INITIAL_CONTROLLER_EPOCH = 1
# Keeps every multi far below jute.maxbuffer (1 MB): a partition-state op is ~150 bytes.
MAX_OPS_PER_MULTI = 500


class ControllerMoved(ZkcoordError):
    """Another controller was elected since this one won: its write was refused as a whole."""

    retriable = False


@dataclass(frozen=True, slots=True)
class ControllerFence:
    """What a controller won: its epoch and the `/controller_epoch` znode version its bump produced."""

    epoch: int
    zk_version: int


def fenced_commit(client: KazooClient, fence: ControllerFence, ops: Sequence[Callable[[Any], None]]) -> None:
    """Run `ops` (each adds one operation to a kazoo transaction) after `check(/controller_epoch, version)`,
    all or nothing. Raises ControllerMoved when the epoch moved, the first real error otherwise."""
    tx = client.transaction()
    tx.check(paths.CONTROLLER_EPOCH, fence.zk_version)
    for op in ops:
        op(tx)
    results = tx.commit()
    failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
    if not failures:
        return
    if isinstance(results[0], (BadVersionError, NoNodeError)):
        raise ControllerMoved(
            f"controller epoch {fence.epoch} (znode version {fence.zk_version}) was superseded"
        )
    raise failures[0]


def increment_controller_epoch(client: KazooClient) -> ControllerFence:
    """Kafka's `incrementControllerEpoch`: versioned set to epoch+1, or create "1"; ControllerMoved on a race."""
    current = read_controller_epoch(client)
    if current is None:
        try:
            stat = client.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
        except NodeExistsError as exc:
            raise ControllerMoved("another controller created /controller_epoch first") from exc
        del stat
        again = read_controller_epoch(client)
        if again is None or again[0] != INITIAL_CONTROLLER_EPOCH:
            raise ControllerMoved("/controller_epoch changed right after it was created")
        return ControllerFence(INITIAL_CONTROLLER_EPOCH, again[1])
    epoch, version = current
    try:
        stat = client.set(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=version)
    except BadVersionError as exc:
        raise ControllerMoved(f"/controller_epoch moved past {epoch} while bumping it") from exc
    return ControllerFence(epoch + 1, stat.version)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One consistent-enough read of the tree the controller plans from."""

    live: tuple[int, ...]
    topics: dict[str, TopicAssignment]
    states: dict[tuple[str, int], tuple[PartitionState, int]]  # state and its znode version
    partitions_parents: frozenset[str]  # topics whose /partitions znode exists
    partition_nodes: frozenset[tuple[str, int]]  # partitions whose /partitions/p znode exists
    delete_marks: tuple[str, ...]
    state_nodes: frozenset[tuple[str, int]] = frozenset()  # partitions whose state znode exists (even if bad)
    malformed: frozenset[str] = frozenset()  # topics left out of planning: assignment or a state unparsable
    deletion_acks: dict[str, frozenset[int]] = field(
        default_factory=dict
    )  # marked topic -> nodes done with it
    topic_versions: dict[str, int] = field(
        default_factory=dict
    )  # topic -> its /brokers/topics/T znode version


class Controller:
    """Runs for one node: elects, and while elected reconciles partition leadership. Thread-safe start/close.

    `on_change(active, fence)` is called from the worker thread whenever the node becomes or stops being
    controller. `clock_ms` stamps the `/controller` timestamp. `before_activate(site)` (tests) runs on the
    worker right before it tries to become active ("won", "resumed", "verified").
    """

    def __init__(
        self,
        client: KazooClient,
        node_id: int,
        *,
        offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        on_change: Callable[[bool, ControllerFence | None], None] | None = None,
        resync_interval_s: float = 5.0,
        before_activate: Callable[[str], None] | None = None,
        new_topic_id: Callable[[], uuid.UUID] = registry.new_topic_id,
    ) -> None:
        self.client = client
        self._new_topic_id = new_topic_id
        self.node_id = node_id
        self.offsets_topic_num_partitions = offsets_topic_num_partitions
        self._clock_ms = clock_ms
        self._on_change = on_change
        self._resync_interval_s = resync_interval_s
        # The lifecycle (zkcoord.zk.controller_state), its pending work and the connection generation live in
        # the worker, under its lock; the listener only feeds events (see the module doc).
        self._worker: CoalescingWorker[ControllerState, ControllerEvent, ControllerWork] = CoalescingWorker(
            f"controller-{node_id}",
            controller_state.transition,
            ControllerState.FOLLOWER,
            self._pass,
            idle_event=ControllerEvent.RESYNC,
            idle_s=lambda: self._resync_interval_s,
            initial_work=frozenset({ControllerWork.ELECT}),
            on_exit=self._on_worker_exit,
        )
        # The last fence won: it counts only while the state holds one (HELD, ACTIVE).
        self._fence: ControllerFence | None = None
        self._reported_active = False  # what on_change last said (worker thread only)
        self._session: int | None = None
        self.reconciles = 0
        self.elections_won = 0
        # Malformed znodes seen: path -> the modification zxid last reported (one log line per version).
        self.malformed_seen: dict[str, int] = {}
        # Activations refused because the connection changed while the pass ran (a stale pass).
        self.stale_activations = 0
        # Test seam: called on the worker thread with the activation site ("won", "resumed", "verified")
        # right before the worker tries to set `active`, so a test can force a state change in between.
        self._before_activate = before_activate

    # -- public --------------------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return controller_state.acts(self._worker.state)

    @property
    def fence(self) -> ControllerFence | None:
        return self._fence if self.active else None

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self._worker.start()

    def close(self, resign: bool = True) -> None:
        """Stop the worker; with `resign`, delete our `/controller` so another node takes over at once."""
        was_active = controller_state.acts(self._worker.close(ControllerEvent.CLOSE))
        self.client.remove_listener(self._on_state)
        if resign and was_active and self.client.connected:
            self._delete_own_controller_znode()

    def request_reconcile(self) -> None:
        self._worker.feed(ControllerEvent.TREE_CHANGED)

    # -- kazoo callbacks (connection thread: feed events only, never call ZooKeeper) ------------------------

    def _on_state(self, state: KazooState) -> None:
        event = _CONNECTION_EVENTS.get(state)
        if event is not None:  # a new generation: whatever a running pass read before this no longer counts
            self._worker.feed_connection(event)

    def _on_watch(self, event: Any) -> None:
        if event is not None and getattr(event, "path", None) == paths.CONTROLLER:
            self._worker.feed(ControllerEvent.CONTROLLER_CHANGED)
        else:
            self._worker.feed(ControllerEvent.TREE_CHANGED)

    # -- worker ------------------------------------------------------------------------------------------

    def _held_fence(self) -> ControllerFence | None:
        return self._fence if controller_state.holds_fence(self._worker.state) else None

    def _pass(self, work: frozenset[ControllerWork], gen: int) -> None:
        """One pass over the work taken (zkcoord.zk.controller_state decides the steps); each step idempotent."""
        try:
            verify = controller_state.must_verify(self._worker.state, work)
            if verify:
                self._verify_after_reconnect(gen)
            if controller_state.must_elect(self._worker.state, work, verify):
                self._elect(gen)
            if controller_state.must_reconcile(self._worker.state, work, verify):
                self._reconcile()
        except ControllerMoved as exc:
            log.warning("node=%d stepping down: %s", self.node_id, exc)
            self._worker.feed(ControllerEvent.RESIGN)
        except KazooException as exc:
            log.info("node=%d controller pass interrupted: %r; retrying", self.node_id, exc)
            self._worker.feed(ControllerEvent.INTERRUPTED)
            self._worker.backoff(0.2)
        except MalformedZnode as exc:
            log.error("node=%d controller pass hit a malformed znode (left intact): %s", self.node_id, exc)
            self._worker.backoff(1.0)
        except Exception:
            log.exception("node=%d controller pass failed", self.node_id)
            self._worker.feed(ControllerEvent.FAILED)
            self._worker.backoff(1.0)
        active = self.active
        if active != self._reported_active:
            self._reported_active = active
            if self._on_change is not None:
                self._on_change(active, self._fence if active else None)

    def _on_worker_exit(self) -> None:
        if self._on_change is not None and self._reported_active:
            self._on_change(False, None)

    def _activate(self, gen: int, fence: ControllerFence, site: str) -> bool:
        """Become active with `fence` only if the connection has not changed since the pass began (`gen`):
        checked and fed under the listener's lock, so the listener's step-down cannot be overwritten by a
        pass that read ZooKeeper before it. A refused activation keeps the fence and asks for a verify in
        the new generation (which drops the fence if the session or the epoch is no longer ours)."""
        if self._before_activate is not None:
            self._before_activate(site)
        won = site == "won"
        self._fence = fence
        if self._worker.feed_if_current(
            gen,
            ControllerEvent.WON if won else ControllerEvent.RESUMED,
            ControllerEvent.WON_STALE if won else ControllerEvent.RESUMED_STALE,
            lambda: self.client.state == KazooState.CONNECTED,
        ):
            return True
        self.stale_activations += 1
        log.info(
            "node=%d controller activation (%s) refused: the connection changed during the pass",
            self.node_id,
            site,
        )
        return False

    def _session_id(self) -> int | None:
        cid = self.client.client_id
        return None if cid is None else int(cid[0])

    def _elect(self, gen: int) -> None:
        if not self.client.connected:
            return  # the CONNECTED event wakes us with a verify, which elects when we hold no fence
        # The session the create runs on; a later verify drops a fence won on a session that has since gone.
        session = self._session_id()
        info = ControllerInfo(self.node_id, self._clock_ms())
        try:
            self.client.create(paths.CONTROLLER, info.encode(), ephemeral=True)
        except NodeExistsError:
            try:
                data, stat = self.client.get(paths.CONTROLLER, watch=self._on_watch)
            except NoNodeError:
                self._worker.feed(ControllerEvent.RETRY_ELECTION)
                return
            if session is None or stat.ephemeralOwner != session:
                try:
                    current = ControllerInfo.decode(paths.CONTROLLER, data)
                except MalformedZnode as exc:
                    self._remove_malformed_controller(exc, stat.version)
                    return
                log.debug("node=%d: controller is node %d", self.node_id, current.brokerid)
                self._worker.feed(ControllerEvent.LOST_ELECTION)
                return
            if not self._own_controller_data_is_ours(data, stat.version):
                return
            fence = self._held_fence()
            if fence is not None:  # our own znode and we already won: a spurious wake-up
                self._activate(gen, fence, "resumed")
                return
        # We hold /controller: watch it so a loss of it (session expiry) is seen, then take the epoch.
        self.client.exists(paths.CONTROLLER, watch=self._on_watch)
        try:
            fence = increment_controller_epoch(self.client)
        except ControllerMoved:
            self._delete_own_controller_znode()
            raise
        self._session = session
        self.elections_won += 1
        log.info("node=%d elected controller, epoch %d", self.node_id, fence.epoch)
        self._activate(gen, fence, "won")

    def _verify_after_reconnect(self, gen: int) -> None:
        """Same session back after a disconnect: resume only if /controller and the epoch are still ours."""
        fence = self._held_fence()
        if fence is not None and not self.client.connected:
            return  # kazoo reports no session id while connecting; the CONNECTED event asks again
        if fence is None or self._session != self._session_id():
            self._worker.feed(ControllerEvent.SESSION_CHANGED)
            return
        try:
            _, stat = self.client.get(paths.CONTROLLER, watch=self._on_watch)
        except NoNodeError:
            self._worker.feed(ControllerEvent.RESIGN)
            return
        current = read_controller_epoch(self.client)
        if stat.ephemeralOwner != self._session or current != (fence.epoch, fence.zk_version):
            self._worker.feed(ControllerEvent.RESIGN)
            return
        self._activate(gen, fence, "verified")

    def _remove_malformed_controller(self, exc: MalformedZnode, version: int) -> None:
        """Kafka resigns (deletes /controller) when it cannot parse it; the delete is version-checked so only
        the malformed data we read goes, and its watch wakes every node into a new election."""
        log.error("node=%d /controller is malformed, deleting it to re-elect: %s", self.node_id, exc)
        self.malformed_seen[paths.CONTROLLER] = version
        self._worker.feed(ControllerEvent.RESIGN)  # stop acting before the delete; the next pass elects
        with contextlib.suppress(NoNodeError, BadVersionError):
            self.client.delete(paths.CONTROLLER, version=version)

    def _own_controller_data_is_ours(self, data: bytes, version: int) -> bool:
        """Our own ephemeral /controller, but its data may have been rewritten (a `set` by a tool or an attacker;
        a data change wakes us through the watch). It must still name this node: otherwise resign as Kafka does
        (`KafkaController.maybeResign`: the controller id read back is not ours, so it stops acting; a parse
        failure reads as no controller) and delete it, version-checked, so the election runs again at once
        (`ZookeeperLeaderElector.resign`) instead of every node believing a controller nobody is."""
        try:
            named = ControllerInfo.decode(paths.CONTROLLER, data).brokerid
        except MalformedZnode as exc:
            self._remove_malformed_controller(exc, version)
            return False
        if named == self.node_id:
            return True
        log.error("node=%d /controller (our own session's) now names node %d: resigning and re-electing",
                  self.node_id, named)  # fmt: skip
        self._worker.feed(ControllerEvent.RESIGN)  # stop acting before the delete; the next pass elects
        with contextlib.suppress(NoNodeError, BadVersionError):
            self.client.delete(paths.CONTROLLER, version=version)
        return False

    def _report_malformed(self, path: str, zxid: int, exc: MalformedZnode) -> None:
        if self.malformed_seen.get(path) != zxid:
            self.malformed_seen[path] = zxid
            log.error("node=%d ignoring malformed znode (left intact): %s", self.node_id, exc)

    def _delete_own_controller_znode(self) -> None:
        with contextlib.suppress(KazooException):
            _, stat = self.client.get(paths.CONTROLLER)
            if stat.ephemeralOwner == self._session_id():
                self.client.delete(paths.CONTROLLER, version=stat.version)

    # -- reconciliation --------------------------------------------------------------------------------

    def _commit(self, ops: Sequence[Callable[[Any], None]]) -> None:
        fence = self.fence
        if fence is None:
            raise ControllerMoved(f"node {self.node_id} is no longer the active controller")
        for i in range(0, len(ops), MAX_OPS_PER_MULTI):
            if not self.active:
                raise ControllerMoved(f"node {self.node_id} stopped being controller mid-write")
            fenced_commit(self.client, fence, ops[i : i + MAX_OPS_PER_MULTI])

    def read_view(self) -> ClusterView:
        c = self.client
        w = self._on_watch
        live: list[int] = []
        # watch_each: a repaired registration wakes a pass
        for node, (bdata, bstat) in registry.read_broker_znodes(c, w, watch_each=True).items():
            bpath = paths.broker_path(node)
            try:
                BrokerRegistration.decode(bpath, bdata)
            except MalformedZnode as exc:
                self._report_malformed(bpath, bstat.mzxid, exc)
                continue
            live.append(node)
        topics: dict[str, TopicAssignment] = {}
        states: dict[tuple[str, int], tuple[PartitionState, int]] = {}
        parents: set[str] = set()
        part_nodes: set[tuple[str, int]] = set()
        state_nodes: set[tuple[str, int]] = set()
        malformed: set[str] = set()
        versions: dict[str, int] = {}
        for topic in sorted(c.get_children(paths.BROKER_TOPICS, watch=w)):
            tpath = paths.topic_path(topic)
            try:
                data, tstat = c.get(tpath, watch=w)
            except NoNodeError:
                continue
            assignment: TopicAssignment | None = None
            try:
                assignment = TopicAssignment.decode(tpath, data)
            except MalformedZnode as exc:
                self._report_malformed(tpath, tstat.mzxid, exc)
                malformed.add(topic)
            topic_states: dict[tuple[str, int], tuple[PartitionState, int]] = {}
            try:
                existing = c.get_children(paths.topic_partitions_path(topic))
            except NoNodeError:
                existing = None
            if existing is not None:
                parents.add(topic)
                for name in existing:
                    if not name.isdigit():
                        continue
                    p = int(name)
                    part_nodes.add((topic, p))
                    spath = paths.partition_state_path(topic, p)
                    try:
                        sdata, sstat = c.get(spath)
                    except NoNodeError:
                        continue
                    state_nodes.add((topic, p))
                    try:
                        topic_states[(topic, p)] = (PartitionState.decode(spath, sdata), sstat.version)
                    except MalformedZnode as exc:
                        self._report_malformed(spath, sstat.mzxid, exc)
                        malformed.add(topic)
            if topic in malformed or assignment is None:
                continue
            topics[topic] = assignment
            versions[topic] = tstat.version
            states.update(topic_states)
        marks = tuple(sorted(c.get_children(paths.ADMIN_DELETE_TOPICS, watch=w)))
        acks: dict[str, frozenset[int]] = {}
        for topic in marks:
            acks[topic] = frozenset(int(n) for n in self._acks_of(topic) if n.isdigit())
        return ClusterView(
            tuple(sorted(live)),
            topics,
            states,
            frozenset(parents),
            frozenset(part_nodes),
            marks,
            frozenset(state_nodes),
            frozenset(malformed),
            acks,
            versions,
        )

    def _reconcile(self) -> None:
        self.client.ensure_path(paths.BROKER_IDS)
        self.client.ensure_path(paths.BROKER_TOPICS)
        self.client.ensure_path(paths.ADMIN_DELETE_TOPICS)
        view = self.read_view()
        if view.delete_marks:
            self._delete_topics(view)
            view = self.read_view()
        if OFFSETS_TOPIC not in view.topics and OFFSETS_TOPIC not in view.malformed and view.live:
            assignment = TopicAssignment.of(
                single_replica_assignment(self.offsets_topic_num_partitions, view.live),
                topic_id=self._new_topic_id(),
            )
            with contextlib.suppress(NodeExistsError):  # another writer created it: use theirs
                self._commit([lambda tx: tx.create(paths.topic_path(OFFSETS_TOPIC), assignment.encode())])
            view = self.read_view()
        self._assign_topic_ids(view)
        self._write_leaders(view)
        self.reconciles += 1

    def _assign_topic_ids(self, view: ClusterView) -> None:
        """Give every topic znode without a KIP-516 id one (Kafka 2.8's controller, `setTopicIds`): a version-3
        rewrite that changes nothing else, conditional on the znode version read and fenced by the controller
        epoch, so a topic changed meanwhile (re-created, grown) is left to the next pass, which its data watch
        starts. A topic being deleted gets none."""
        marked = set(view.delete_marks)
        for topic in sorted(t for t, a in view.topics.items() if a.topic_id is None and t not in marked):
            assignment = view.topics[topic].with_topic_id(self._new_topic_id())
            path = paths.topic_path(topic)
            try:
                self._commit([_set_op(path, assignment.encode(), view.topic_versions[topic])])
            except (BadVersionError, NoNodeError) as exc:
                log.info(
                    "node=%d topic %s changed while getting an id (%r); next pass", self.node_id, topic, exc
                )
                self.request_reconcile()
                continue
            log.info("node=%d topic %s: assigned topic id %s", self.node_id, topic, assignment.topic_id)

    def _acks_of(self, topic: str) -> list[str]:
        """The nodes' acknowledgements of a marked topic's deletion, watched. With no acks parent yet, an exists
        watch wakes the pass that sees it created; a parent created between the two reads (a node acking right
        then) is read again, else this pass would wait on an exists watch that no child creation fires."""
        c, w = self.client, self._on_watch
        for _ in range(3):
            try:
                return list(c.get_children(deletion_acks_path(topic), watch=w))
            except NoNodeError:
                if c.exists(deletion_acks_path(topic), watch=w) is None:
                    return []
            except ValueError:  # a mark that is no topic name: nothing acks it (its deletion only drops it)
                return []
        return []  # created and deleted under us three times: the watches set wake the next pass

    def _delete_topics(self, view: ClusterView) -> None:
        for topic in view.delete_marks:
            mark = paths.delete_topic_path(topic)
            ops: list[Callable[[Any], None]] = []
            acked = view.deletion_acks.get(topic, frozenset())
            waiting = sorted(set(view.live) - acked)
            if topic != OFFSETS_TOPIC and topic in view.topics and waiting:
                log.info("node=%d topic %s: deletion waits for node(s) %s", self.node_id, topic, waiting)
                continue  # the acks' watch wakes the next pass
            if (
                topic != OFFSETS_TOPIC
                and topic not in view.topics
                and topic not in view.malformed
                and self.client.exists(paths.topic_path(topic)) is not None
            ):
                # Created after this view read the topics and marked before it read the marks (a view is read
                # over time: under load its ~50 offsets partitions' states take 100+ ms): dropping the mark
                # now would leave the topic and answer the deletion done. The next pass sees it.
                log.info(
                    "node=%d topic %s: marked for deletion, not yet in this view; next pass",
                    self.node_id,
                    topic,
                )
                self.request_reconcile()
                continue
            if topic == OFFSETS_TOPIC:
                log.warning("node=%d refusing to delete the internal topic %s", self.node_id, topic)
            elif topic in view.topics or topic in view.malformed:
                for tp in sorted(p for p in view.partition_nodes if p[0] == topic):
                    if tp in view.state_nodes:
                        ops.append(_delete_op(paths.partition_state_path(*tp)))
                    ops.append(_delete_op(paths.partition_path(*tp)))
                if topic in view.partitions_parents:
                    ops.append(_delete_op(paths.topic_partitions_path(topic)))
                ops.append(_delete_op(paths.topic_path(topic)))
                if self.client.exists(paths.topic_config_path(topic)) is not None:
                    ops.append(_delete_op(paths.topic_config_path(topic)))  # as Kafka's deleteTopicConfigs
            ops.extend(_delete_op(f"{deletion_acks_path(topic)}/{n}") for n in sorted(acked))
            if acked:
                ops.append(_delete_op(deletion_acks_path(topic)))
            ops.append(_delete_op(mark))
            try:
                self._commit(ops)
                log.info("node=%d deleted topic %s", self.node_id, topic)
            except (NoNodeError, NotEmptyError) as exc:
                # Something appeared or vanished concurrently; the next pass sees the new tree.
                log.info("node=%d topic %s deletion raced (%r); will retry", self.node_id, topic, exc)
                self.request_reconcile()

    def _write_leaders(self, view: ClusterView) -> None:
        fence = self._held_fence()
        if fence is None:
            raise ControllerMoved("no fence")
        specs = {
            t: TopicSpec(a.replicas, Placement.BALANCED if t == OFFSETS_TOPIC else Placement.STICKY)
            for t, a in view.topics.items()
        }
        current = {
            TopicPartition(*tp): Leadership(s.leader, s.leader_epoch) for tp, (s, _) in view.states.items()
        }
        plan = plan_leadership(view.live, specs, current)
        leaders = plan.as_dict()
        ops: list[Callable[[Any], None]] = []
        made_parents: set[str] = set()
        for tp in plan.changed:
            lead = leaders[tp]
            topic, p = tp
            old = view.states.get(tp)
            isr = (lead.leader,) if lead.leader != NO_LEADER else (old[0].isr if old else ())
            state = PartitionState(lead.leader, lead.leader_epoch, isr, fence.epoch).encode()
            spath = paths.partition_state_path(topic, p)
            if old is not None:
                ops.append(_set_op(spath, state, old[1]))
                continue
            if topic not in view.partitions_parents and topic not in made_parents:
                ops.append(_create_op(paths.topic_partitions_path(topic), b""))
                made_parents.add(topic)
            if tp not in view.partition_nodes:
                ops.append(_create_op(paths.partition_path(topic, p), b""))
            ops.append(_create_op(spath, state))
        if ops:
            self._commit(ops)
            log.info(
                "node=%d controller epoch %d moved %d partition leader(s)",
                self.node_id,
                fence.epoch,
                len(plan.changed),
            )


def _delete_op(path: str) -> Callable[[Any], None]:
    return lambda tx: tx.delete(path)


def _set_op(path: str, data: bytes, version: int) -> Callable[[Any], None]:
    return lambda tx: tx.set_data(path, data, version)


def _create_op(path: str, data: bytes) -> Callable[[Any], None]:
    return lambda tx: tx.create(path, data)


# -- reads shared with the cluster node (kept here so only zkcoord/zk imports kazoo; /brokers: zk/registry) --

DELETION_ACKS_ROOT = "/zkcoord/topic-deletions"


def deletion_acks_path(topic: str) -> str:
    return f"{DELETION_ACKS_ROOT}/{paths.validate_topic(topic)}"


def request_topic_deletion(client: KazooClient, topic: str) -> None:
    """DeleteTopics on the controller: `registry.mark_topic_for_deletion` (Kafka's AdminZkClient.deleteTopic),
    clearing stale acknowledgements first; a topic already marked stays marked (a retried request tracks the
    same deletion)."""
    mark = paths.delete_topic_path(topic)
    if client.exists(mark) is not None:
        return
    # Acknowledgements without a mark are left from an earlier deletion of the same name (a node that acked
    # after the controller finished): they must not count for this one.
    with contextlib.suppress(NoNodeError):
        for name in client.get_children(deletion_acks_path(topic)):
            with contextlib.suppress(NoNodeError):
                client.delete(f"{deletion_acks_path(topic)}/{name}")
    with contextlib.suppress(registry.TopicAlreadyMarkedForDeletion):
        registry.mark_topic_for_deletion(client, topic)


def read_deletion_marks(client: KazooClient) -> list[str]:
    try:
        return sorted(client.get_children(paths.ADMIN_DELETE_TOPICS))
    except NoNodeError:
        return []


def ack_topic_deletion(client: KazooClient, topic: str, node_id: int) -> None:
    """This node's partition logs and group offsets of a marked topic are gone: tell the controller."""
    with contextlib.suppress(NodeExistsError):
        client.create(f"{deletion_acks_path(topic)}/{node_id}", b"", makepath=True)


ZooKeeperError = KazooException
SESSION_SUSPENDED = KazooState.SUSPENDED
SESSION_LOST = KazooState.LOST
SESSION_CONNECTED = KazooState.CONNECTED


def read_topic_states(
    client: KazooClient, topic: str, watch: Callable[[Any], None] | None = None
) -> tuple[TopicAssignment | None, dict[int, tuple[PartitionState, int]]]:
    """A topic's assignment and each partition state with its znode version; watches set on all of them
    (and on the topic's absence) when `watch` is given."""
    tpath = paths.topic_path(topic)
    try:
        data, _ = client.get(tpath, watch=watch)
    except NoNodeError:
        client.exists(tpath, watch=watch)
        return None, {}
    assignment = TopicAssignment.decode(tpath, data)
    try:
        names = client.get_children(paths.topic_partitions_path(topic), watch=watch)
    except NoNodeError:
        client.exists(paths.topic_partitions_path(topic), watch=watch)
        names = []
    states: dict[int, tuple[PartitionState, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        spath = paths.partition_state_path(topic, int(name))
        try:
            sdata, sstat = client.get(spath, watch=watch)
        except NoNodeError:
            client.exists(spath, watch=watch)
            continue
        states[int(name)] = (PartitionState.decode(spath, sdata), sstat.version)
    return assignment, states


def create_topic_if_absent(
    client: KazooClient,
    topic: str,
    replicas: dict[int, list[int]],
    configs: Mapping[str, str] | None = None,
    topic_id: uuid.UUID | None = None,
) -> tuple[bool, TopicAssignment]:
    """Create `/brokers/topics/T` atomically unless it exists (two nodes auto-creating the same topic must not
    overwrite each other); (created, the assignment now stored). The znode carries the topic's KIP-516 id
    (`topic_id`, else a new random one), as Kafka 2.8+ creates topics. With `configs`, `/config/topics/T` =
    `{"version":1,"config":{...}}` (Kafka's AdminZkClient) is written in the same transaction, so the node that
    loses a creation race never overwrites the winner's configs."""
    path = paths.topic_path(topic)
    assignment = TopicAssignment.of(replicas, topic_id=topic_id or registry.new_topic_id())
    try:
        if configs:
            cpath = paths.topic_config_path(topic)
            doc = json.dumps({"version": 1, "config": dict(sorted(configs.items()))}).encode()
            client.ensure_path(paths.CONFIG_TOPICS)
            client.ensure_path(paths.BROKER_TOPICS)
            stale = client.exists(cpath)  # left by a topic deleted before configs were cleaned up
            tx = client.transaction()
            tx.create(path, assignment.encode())
            if stale is None:
                tx.create(cpath, doc)
            else:
                tx.set_data(cpath, doc, stale.version)
            results = tx.commit()
            failed = next(
                (r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)), None
            )
            if failed is not None:
                raise failed
        else:
            client.create(path, assignment.encode(), makepath=True)
        return True, assignment
    except NodeExistsError:
        data, _ = client.get(path)
        return False, TopicAssignment.decode(path, data)


def read_topic_configs(client: KazooClient, topic: str) -> dict[str, str]:
    """`/config/topics/T`'s config map ({} when absent); MalformedZnode when it does not parse."""
    path = paths.topic_config_path(topic)
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return {}
    if len(data) > 1024 * 1024:
        raise MalformedZnode(path, f"{len(data)} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedZnode(path, f"not JSON ({exc})", data) from None
    configs = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
        raise MalformedZnode(path, '"config" is not an object of strings', data)
    return {str(k): v for k, v in configs.items()}
