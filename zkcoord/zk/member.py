"""LegacyConsumer: a 0.8-era ZooKeeper consumer-group member that shares a group with JVM consumers (same
znodes, same payloads, same deterministic assignment) and never hands out a record from a partition it does
not own in ZooKeeper.

How it runs (numbered as the original's `ZookeeperConsumerConnector`):

1. `start()` connects (or uses the given kazoo client), registers `/consumers/G/ids/<consumerId>` (ephemeral,
   the JVM's exact JSON; a node held by another session is a duplicate consumer id and is refused at once),
   watches the ids children and `/brokers/topics/T` data of subscribed topics (plus `/brokers/topics`
   children for wildcards and `/brokers/ids` children while no broker exists), and asks for a rebalance.
2. Every watch and session event only feeds the state table (`zkcoord.legacy.member_state`) and marks a
   rebalance due; one thread (`<consumerId>_watcher_executor`, as in the original) runs rebalances, so a burst
   of events coalesces into one run. The state alone says whether records may be handed out (the fence),
   whether the member is stable, and whether it stops; this module carries out what the table decides.
3. A rebalance attempt, one named step each (`_attempt`). Faithful (eager, as the original): fence (stop
   handing out records) → commit consumed offsets (auto-commit) → `before_release` → delete every owner
   znode I hold → read the group → plan (`zkcoord.legacy.rebalance`) → claim my owner znodes one by one with
   rollback → read my offsets (after the claim, so no previous owner can commit after the read) → install
   and unfence → `after_claim`. Fast (incremental hand-over): read the group → plan, keeping the owner
   znodes the new assignment leaves me (checked to be still mine) → stop handing out only what moves, commit
   it, `before_release` it, delete its owner znodes → claim the new ones by multi-op (on a conflict wait for
   the conflicting znode's deletion) → read only their offsets → install → `after_claim`. Kept partitions
   are handed out throughout: no fence, no fetch restart, no offset re-read.
4. Retries: faithful = `rebalance.max.retries` attempts `rebalance.backoff.ms` apart, then RebalanceFailed is
   reported and the member idles until the next event (as the original); fast = retry until the share is
   owned. Both leave the same znodes.
5. Session: SUSPENDED fences at once; a reconnect on the same session runs a rebalance before unfencing; LOST
   drops ownership (the server deleted the ephemerals), then a new session re-registers and rebalances. Every
   attempt captures the session and generation first and drops its result if either moved.
6. Offsets: consumed offsets are committed to `/consumers/G/offsets/T/P` with versioned writes (a member that
   lost a partition cannot move the new owner's offset back), unchanged ones skipped, batched in multi-ops
   under the request limit in fast mode. `offsets.storage=kafka` (with or without dual commit) goes through
   `zkcoord.zk.member_offsets` (the bridge's DualCommitter); this module only calls its hook.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, NoNodeError
from kazoo.protocol.states import KazooState

from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.legacy import ids, paths
from zkcoord.legacy.codecs import ConsumerRegistration, SubscriptionPattern
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.filters import TopicFilter
from zkcoord.legacy.member_state import (
    MUST_REGISTER,
    PAUSED,
    SETTLED,
    STOPPING,
    MemberEvent,
    MemberState,
    hands_out,
    transition,
)
from zkcoord.legacy.rebalance import (
    RebalancePlan,
    TopicPartition,
    plan_rebalance,
    successors_waiting_on_hints,
)
from zkcoord.zk import member_offsets, member_zk, retry
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.member_fetch import Fetcher, KafkaFetcher, Message
from zkcoord.zk.member_zk import DuplicateConsumerId
from zkcoord.zk.registry import leader_endpoint
from zkcoord.zk.retry import RebalanceFailed, RebalanceStopped, SessionMoved
from zkcoord.zk.session import connect

log = logging.getLogger(__name__)

__all__ = [
    "DuplicateConsumerId",
    "Fetcher",
    "LegacyConsumer",
    "MemberState",
    "Message",
    "RebalanceFailed",
    "RebalanceListener",
]


class RebalanceListener(Protocol):
    """Callbacks of a rebalance (the original's ConsumerRebalanceListener, with correct types)."""

    def before_release(self, consumer_id: str, partitions: Mapping[str, frozenset[int]]) -> None: ...

    def after_claim(self, consumer_id: str, assignment: Mapping[TopicPartition, str]) -> None: ...


@dataclass(slots=True)
class _Owned:
    thread_id: str
    consumed: int  # next offset to hand out; -1 until auto.offset.reset resolved when none was stored
    checkpoint: int  # last offset known to be in ZooKeeper (-1 none)
    version: int  # offset znode version (-1 missing)

    @classmethod
    def possibly_held(cls, thread_id: str) -> _Owned:
        """An owner znode that may exist under my session (a claim that timed out or was overtaken): never
        handed out; the next attempt releases it."""
        return cls(thread_id, -2, -2, -2)

    @property
    def held_only(self) -> bool:
        return self.version == -2


@dataclass(slots=True)
class MemberStats:
    rebalances: int = 0  # successful
    attempts: int = 0
    failed_attempts: int = 0
    gave_up: int = 0
    claim_waits: int = 0
    last_error: str | None = None
    last_stable_at: float = 0.0
    history: list[tuple[float, int]] = field(default_factory=list)  # (time, partitions owned) per install
    # offsets.storage=kafka / dual commit: the bridge result of the last commit (every per-store failure)
    last_commit_result: Any = None
    commit_failures: int = 0  # partition-store outcomes that failed or were skipped, summed over commits
    # Completed rebalances and their summed duration (first attempt to stable): a scrape-time summary metric.
    rebalance_count: int = 0
    rebalance_seconds: float = 0.0
    kept_partitions: int = 0  # incremental hand-over: owner znodes kept across installs, summed


FetcherFactory = Callable[["LegacyConsumer"], Fetcher]


class LegacyConsumer:
    """One group member. Use as a context manager, iterate for records, call `commit_offsets()`."""

    def __init__(
        self,
        config: LegacyConsumerConfig,
        topics: Mapping[str, int] | None = None,
        *,
        whitelist: str | None = None,
        blacklist: str | None = None,
        num_streams: int = 1,
        client: KazooClient | None = None,
        listener: RebalanceListener | None = None,
        fetcher_factory: FetcherFactory | None = None,
        offsets: member_offsets.OffsetsFactory | None = None,
        hostname: Callable[[], str] = socket.gethostname,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        monotonic: Callable[[], float] = time.monotonic,
        uuid_bits: Callable[[], int] = lambda: uuid.uuid4().int >> 64,
        sleep: Callable[[float], None] = time.sleep,
        zk_auth: ZkAuth = NO_AUTH,
        kafka_security: Mapping[str, Any] | None = None,
    ) -> None:
        if sum(x is not None for x in (topics, whitelist, blacklist)) != 1:
            raise ConfigError("give exactly one of topics={topic: streams}, whitelist=REGEX, blacklist=REGEX")
        self.config = config
        self.group = paths.validate_group(config.group_id)
        if offsets is None:
            member_offsets.require_zookeeper_only(config)
        self._offsets_factory = offsets or member_offsets.for_member
        self._now = monotonic
        self._wall_ms = wall_clock_ms
        self._sleep = sleep
        self._listener = listener
        self._fetcher_factory = fetcher_factory
        ts = wall_clock_ms()
        if config.consumer_id is not None:
            self.consumer_id = ids.consumer_id_from_suffix(self.group, config.consumer_id)
        else:
            msb = uuid_bits()
            if msb >= 2**63:
                msb -= 2**64
            self.consumer_id = ids.consumer_id(
                self.group, host=hostname(), timestamp_ms=ts, uuid8=ids.uuid_prefix(msb)
            )
        if topics is not None:
            for t in topics:
                paths.validate_topic(t, max_length=paths.TOPIC_MAX_LENGTH_0_8_2)
            self.registration = ConsumerRegistration.static(dict(topics), timestamp_ms=ts)
        else:
            pattern = (
                SubscriptionPattern.WHITE_LIST if whitelist is not None else SubscriptionPattern.BLACK_LIST
            )
            raw = whitelist if whitelist is not None else blacklist
            assert raw is not None
            regex = (
                TopicFilter.whitelist(raw) if whitelist is not None else TopicFilter.blacklist(raw)
            ).regex
            self.registration = ConsumerRegistration.wildcard(
                regex, num_streams, pattern=pattern, timestamp_ms=ts
            )
        self._own_client = client is None
        self.client: KazooClient | None = client
        self._zk_auth = zk_auth  # used when the member connects its own client
        # kafka-python's security arguments for the data path (--command-config), given to the fetcher.
        self.kafka_security: Mapping[str, Any] = dict(kafka_security or {})
        self._zk: member_zk.Deadlined | None = None  # the client with a deadline on every blocking call
        self.stats = MemberStats()
        self.offset_storage: member_offsets.MemberOffsets | None = None

        # One lock for the state and the ownership, which change together; its condition wakes the rebalance
        # thread, the fetch path and `wait_stable` on every change.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._state = MemberState.CREATED
        self._owned: dict[TopicPartition, _Owned] = {}
        # Fast mode, while an incremental rebalance releases them: partitions whose entries stay in `_owned`
        # (so commits and positions() still see them, for the listener's before_release) but that are no
        # longer handed out.
        self._releasing: frozenset[TopicPartition] = frozenset()
        self._assign_version = 0  # bumped on every change of what the fetch path may hand out
        self._generation = 0  # bumped on every session change and every rebalance start
        self._session = -1  # the session my registration belongs to
        # A rebalance is due: set by every watch and session event (and by close), cleared when an attempt
        # starts. It coalesces bursts into one rebalance and cuts a fast-mode claim wait short
        # (`member_zk.wait_deleted` watches it), so it stays an Event rather than a state of the table.
        self._due = threading.Event()
        self._thread: threading.Thread | None = None
        self._watched: set[str] = set()  # paths with a watch installed (each watch is set once)
        self._last_plan: RebalancePlan | None = None
        self._next_auto_commit = 0.0
        # Fetch-path state, touched only by the iterating thread.
        self._fetcher: Fetcher | None = None
        self._fetcher_version = -1
        self._fetching: dict[TopicPartition, _Owned] = {}  # what the last assign gave the fetcher
        self._buffer: deque[Message] = deque()

    # --- lifecycle -------------------------------------------------------------------------------------------

    def __enter__(self) -> LegacyConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> LegacyConsumer:
        self._feed(MemberEvent.START)
        cfg = self.config
        if self.client is None:
            self.client = connect(
                cfg.zookeeper_connect,
                timeout=cfg.connection_timeout_ms / 1000.0,
                session_timeout_s=cfg.zookeeper_session_timeout_ms / 1000.0,
                auth=self._zk_auth,
            )
        client = self.client
        self._zk = member_zk.Deadlined(client, cfg.call_deadline_ms / 1000.0)
        self.offset_storage = self._offsets_factory(cfg, self._zk, self.group, self._fast)
        client.add_listener(self._on_state)
        try:
            self._register()
        except DuplicateConsumerId:
            self._feed(MemberEvent.DUPLICATE)
            raise
        client.ChildrenWatch(paths.ids_path(self.group), self._on_ids_change, send_event=False)
        if self.registration.is_wildcard:
            self._watch_topic_list()
        self._next_auto_commit = self._now() + cfg.auto_commit_interval_ms / 1000.0
        self._thread = threading.Thread(
            target=self._run, name=f"{self.consumer_id}_watcher_executor", daemon=True
        )
        self._thread.start()
        self._signal()
        return self

    def close(self, *, commit: bool | None = None) -> None:
        """Stop rebalancing, commit (auto-commit or `commit=True`), release owners, deregister, disconnect."""
        with self._lock:
            if self._state in (MemberState.CLOSING, MemberState.CLOSED):
                return
            self._feed(MemberEvent.CLOSE)
        self._due.set()  # ends a claim wait at once
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        client = self._zk
        do_commit = self.config.auto_commit_enable if commit is None else commit
        try:
            if client is not None and client.connected:
                if do_commit:
                    self._commit()
                with self._lock:
                    owned = list(self._owned)
                    self._drop_ownership_locked()
                    session = self._session
                if member_zk.session_id(client) == session:
                    member_zk.release(
                        client,
                        self.group,
                        owned,
                        session,
                        batched=self._fast,
                        budget=self.config.multi_budget_bytes,
                    )
                    member_zk.delete_registration(client, self.group, self.consumer_id, session)
        finally:
            with self._lock:
                self._drop_ownership_locked()
                self._feed(MemberEvent.CLOSED)
            if self.client is not None:
                self.client.remove_listener(self._on_state)
                if self._own_client:
                    self.client.stop()
                    self.client.close()
            self._close_fetcher()
            if self.offset_storage is not None:
                self.offset_storage.close()

    def leave(self, timeout: float = 5.0) -> bool:
        """Leave make-before-break (fast mode), then call `close()` once the thread that consumes has stopped.
        The member deregisters first, so everyone rebalances while it still owns its share: partitions going to
        legacy members are released at once (as close() does), those going to broker-protocol members (a mixed
        group's coordinator registered them) stay handed out until the coordinator's hand-over waits for them
        (its hint znode appears, `paths.wanted_path`) or `timeout` seconds pass; each is committed and released
        then. Keep consuming from another thread meanwhile: `next_message` hands out what is still owned until
        it is released. Returns False, doing nothing, in faithful mode or when a rebalance is due or running
        (then `close()` is the way out); whatever a failure left owned, `close()` releases."""
        with self._lock:
            leaving = self._fast and self._state is MemberState.STABLE
            if leaving:
                self._feed(MemberEvent.LEAVE)
                session = self._session
        client = self._zk
        if not leaving or client is None:
            return False
        try:
            self._hand_off(client, session, timeout)
        except Exception as exc:
            log.warning(
                "group=%s member=%s leave: %s; close() releases the rest", self.group, self.consumer_id, exc
            )
        return True

    def _hand_off(self, client: member_zk.Client, session: int, timeout: float) -> None:
        member_zk.delete_registration(client, self.group, self.consumer_id, session)
        deadline = self._now() + timeout
        hinted = threading.Event()
        with self._lock:
            held = sorted(tp for tp, o in self._owned.items() if not o.held_only)
        snapshot = member_zk.read_snapshot(client, self.group, need_all_topics=self.registration.is_wildcard)
        cfg = self.config
        linger = successors_waiting_on_hints(
            group=self.group,
            consumer_id=self.consumer_id,
            snapshot=snapshot,
            owned=held,
            strategy=cfg.partition_assignment_strategy,
            roundrobin_generation=cfg.roundrobin_generation,
            exclude_internal_topics=cfg.exclude_internal_topics,
        )
        self._release_now([tp for tp in held if tp not in linger], session)
        waiting = list(linger)

        def on_hint(_event: object) -> None:
            hinted.set()

        while waiting and self._state is MemberState.LEAVING:  # each turn releases one or waits for a hint
            hinted.clear()
            left = deadline - self._now()
            wanted = member_zk.wanted(client, self.group, waiting, on_hint)
            go = waiting if left <= 0 else list(wanted)
            if go:
                self._release_now(go, session)
                waiting = [tp for tp in waiting if tp not in go]
            else:
                hinted.wait(left)
        log.info(
            "group=%s member=%s left: %d partitions handed over", self.group, self.consumer_id, len(held)
        )

    def _release_now(self, tps: list[TopicPartition], session: int) -> None:
        """Stop handing out `tps`, commit, tell the listener, delete their owner znodes."""
        if not tps:
            return
        client = self._zk
        assert client is not None
        with self._lock:
            self._releasing = frozenset(tps)
            self._assign_version += 1
            self._changed.notify_all()
        released = False
        try:
            if self.config.auto_commit_enable:
                self._commit(session=session)
            self._before_release(tps)
            member_zk.release(
                client, self.group, tps, session, batched=True, budget=self.config.multi_budget_bytes
            )
            released = True
        finally:
            with self._lock:
                for tp in tps if released else ():  # else close() releases them
                    self._owned.pop(tp, None)
                self._releasing = frozenset()
                self._assign_version += 1
                self._changed.notify_all()

    @property
    def _fast(self) -> bool:
        return self.config.mode == "fast"

    # --- state -----------------------------------------------------------------------------------------------

    def _feed(self, event: MemberEvent) -> MemberState:
        """Move to the state the table gives for `event`; a move that raises or lowers the fence changes the
        assignment version, so the fetch path and observers see it."""
        with self._lock:
            before = self._state
            self._state = transition(before, event)
            if hands_out(before) != hands_out(self._state):
                self._assign_version += 1
            if self._state is not before:
                log.debug(
                    "group=%s member=%s %s: %s -> %s",
                    self.group,
                    self.consumer_id,
                    event,
                    before,
                    self._state,
                )
            self._changed.notify_all()
            return self._state

    def _drop_ownership_locked(self) -> None:
        self._owned.clear()
        self._releasing = frozenset()
        self._assign_version += 1
        self._changed.notify_all()

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def _stopping(self) -> bool:
        return self._state in STOPPING

    @property
    def _closed(self) -> bool:
        """close() was called (tests and observers tell live members by it)."""
        return self._state in (MemberState.CLOSING, MemberState.CLOSED)

    # --- views -----------------------------------------------------------------------------------------------

    def stats_snapshot(self) -> MemberStats:
        """The counters as of one moment, copied under the member's lock (a metrics scrape reads them from another
        thread: a rebalance's count and duration, and the install's counters, are each kept in one locked step)."""
        with self._lock:
            return replace(self.stats, history=list(self.stats.history))

    def owned(self) -> dict[TopicPartition, str]:
        """What this member believes it owns (and may hand out records from): empty while fenced."""
        with self._lock:
            if self.fenced:
                return {}
            return {tp: o.thread_id for tp, o in self._handed_locked().items()}

    def ownership_view(self) -> tuple[int, dict[TopicPartition, str]]:
        """(assignment version, believed ownership) read atomically: while the version is unchanged the
        member has not fenced, released or claimed anything, so observers can check it against znodes."""
        with self._lock:
            owned = {} if self.fenced else {tp: o.thread_id for tp, o in self._handed_locked().items()}
            return self._assign_version, owned

    def _handed_locked(self) -> dict[TopicPartition, _Owned]:
        """The entries the fetch path may hand out from (fence aside): neither possibly held nor releasing."""
        return {tp: o for tp, o in self._owned.items() if not o.held_only and tp not in self._releasing}

    @property
    def fenced(self) -> bool:
        return not hands_out(self._state)

    @property
    def session(self) -> int:
        return self._session

    def is_stable(self) -> bool:
        """No rebalance pending or running and the last one succeeded."""
        return self._state in SETTLED

    def wait_stable(self, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._state in SETTLED, timeout)

    def positions(self) -> dict[TopicPartition, int]:
        """Consume positions of what I own, including partitions an incremental rebalance is releasing (so a
        listener's before_release sees them)."""
        with self._lock:
            return {tp: o.consumed for tp, o in self._owned.items() if not o.held_only}

    # --- events ----------------------------------------------------------------------------------------------

    def _signal(self) -> None:
        with self._lock:
            self._due.set()
            self._feed(MemberEvent.REQUEST)

    def _on_ids_change(self, _children: list[str]) -> bool:
        if self._stopping:
            return False
        self._signal()
        return True

    def _on_topic_data(self, topic: str) -> Callable[[Any, Any], bool]:
        def fire(_data: Any, _stat: Any) -> bool:
            if self._stopping or paths.topic_path(topic) not in self._watched:
                return False
            self._signal()
            return True

        return fire

    def _on_broker_list(self, children: list[str]) -> bool:
        if self._stopping:
            return False
        if children:
            self._signal()
        return True

    def _on_state(self, state: KazooState) -> None:
        # Runs on kazoo's connection thread: never block here, only feed the table and mark a rebalance due.
        with self._lock:
            if state == KazooState.SUSPENDED:
                log.info("group=%s member=%s connection suspended: fencing", self.group, self.consumer_id)
                self._feed(MemberEvent.SUSPEND)
            elif state == KazooState.LOST:
                log.info("group=%s member=%s session lost: dropping ownership", self.group, self.consumer_id)
                self._feed(MemberEvent.SESSION_LOST)
                self._drop_ownership_locked()
            else:
                self._feed(MemberEvent.RECONNECT)
            self._generation += 1
            self._due.set()

    # --- watcher thread --------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                while (not self._due.is_set() or self._state in PAUSED) and not self._stopping:
                    timeout = self._next_auto_commit - self._now()
                    if self.config.auto_commit_enable and timeout <= 0:
                        break
                    self._changed.wait(timeout=min(1.0, max(timeout, 0.01)))
                if self._stopping:
                    return
                due = self._due.is_set() and self._state not in PAUSED
            if self.config.auto_commit_enable and self._now() >= self._next_auto_commit:
                self._next_auto_commit = self._now() + self.config.auto_commit_interval_ms / 1000.0
                try:
                    self._commit()
                except Exception:
                    log.warning(
                        "group=%s member=%s exception during autoCommit",
                        self.group,
                        self.consumer_id,
                        exc_info=True,
                    )
            if due:
                self._synced_rebalance()

    def _synced_rebalance(self) -> None:
        cfg = self.config
        started = self._now()

        def attempt() -> bool:
            with self._lock:
                if self._stopping or self._state in PAUSED:
                    raise RebalanceStopped("stopping")
                self._due.clear()
            self.stats.attempts += 1
            return self._attempt()

        def failed(n: int, exc: BaseException | None) -> None:
            self.stats.failed_attempts += 1
            if exc is not None:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.info(
                    "group=%s member=%s exception during rebalance: %s", self.group, self.consumer_id, exc
                )
            # The original closes fetchers (and auto-commits) after a failed attempt; ours are fenced already.

        if self._fast:
            policy = retry.fast_rebalance(
                should_stop=lambda: self._stopping, sleep=self._sleep, on_attempt_failed=failed
            )
        else:
            policy = retry.faithful_rebalance(
                consumer_id=self.consumer_id,
                max_retries=cfg.rebalance_max_retries,
                backoff_ms=cfg.backoff_ms,
                should_stop=lambda: self._stopping,
                sleep=self._sleep,
                on_attempt_failed=failed,
            )
        try:
            policy(attempt)
        except RebalanceStopped:
            return
        except RebalanceFailed as exc:
            self.stats.gave_up += 1
            self.stats.last_error = str(exc)
            log.error(
                "group=%s member=%s error during syncedRebalance: %s", self.group, self.consumer_id, exc
            )
            self._settle(MemberEvent.GIVE_UP)
            return
        except (SessionMoved, ConnectionClosedError) as exc:
            log.info("group=%s member=%s rebalance dropped: %s", self.group, self.consumer_id, exc)
            self._signal()
            if not self._stopping:
                self._sleep(0.05)  # the session is changing; let kazoo settle before the next try
            return
        except DuplicateConsumerId as exc:
            self.stats.last_error = str(exc)
            log.error("%s", exc)
            self._feed(MemberEvent.DUPLICATE)
            return
        except Exception as exc:
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("group=%s member=%s rebalance error", self.group, self.consumer_id)
            if retry.classify(exc) is retry.ErrorClass.RETRY:
                self._signal()
            else:
                self._settle(MemberEvent.GIVE_UP)
            return
        self._settle(MemberEvent.DONE, started)

    def _settle(self, event: MemberEvent, started: float | None = None) -> bool:
        """End a rebalance with DONE or GIVE_UP unless another became due meanwhile (it runs next). A rebalance
        DONE (first attempt at `started`) is counted in the same locked step that makes the member stable, as the
        install counts `rebalances`: a reader under the lock never sees a stable member whose rebalance is not
        counted yet, nor a count without its duration."""
        with self._lock:
            if self._due.is_set():
                return False
            self._feed(event)
            if event is MemberEvent.DONE and started is not None:
                now = self._now()
                self.stats.last_stable_at = now
                self.stats.rebalance_count += 1
                self.stats.rebalance_seconds += now - started
            return True

    def _register(self) -> None:
        # Never under self._lock: kazoo's connection thread takes that lock in _on_state, and it must stay
        # free to deliver this call's reply.
        assert self._zk is not None
        session = member_zk.register(self._zk, self.group, self.consumer_id, self.registration)
        with self._lock:
            self._session = session
            self._feed(MemberEvent.REGISTERED)
        log.info("group=%s member=%s registered (session 0x%x)", self.group, self.consumer_id, session)

    # --- one rebalance attempt -------------------------------------------------------------------------------

    def _attempt(self) -> bool:
        """One rebalance attempt (§3.5, with the fixes). True when done. Every ZooKeeper call in it has a
        deadline (`zkcoord.zk.call.timeout.ms`): a call blocked on a suspended connection fails the
        attempt with ZooKeeperCallTimeout and the retry policy takes over."""
        session, generation = self._check_registration()
        assert self._zk is not None
        if not member_zk.broker_ids(self._zk):
            # As the original: nothing to fetch from; wait for a broker to appear.
            self._watch_brokers()
            log.warning("group=%s member=%s no broker is available; waiting", self.group, self.consumer_id)
            return True
        if self._fast:
            versions = self._still_held(session)
            with self._lock:
                keeping = {tp: self._owned[tp].thread_id for tp in versions if tp in self._owned}
            plan = self._read_and_plan(keeping=keeping)
            self._reconcile_commit_release(plan, session)
            self._retag(plan, versions)
        else:
            self._fence_commit_release(session)
            plan = self._read_and_plan()
        if not self._claim(plan, session):
            return False
        return self._install(plan, session, generation)

    def _check_registration(self) -> tuple[int, int]:
        """Register again if the session moved (or was lost), capture (session, generation) for the fences
        of the later steps, and check that my ids znode belongs to my session."""
        client = self._zk
        assert client is not None
        with self._lock:
            reregister = self._state in MUST_REGISTER or member_zk.session_id(client) != self._session
            if reregister:
                self._feed(MemberEvent.REREGISTER)
                self._drop_ownership_locked()
        if reregister:
            self._register()
        with self._lock:
            self._generation += 1
            generation = self._generation
            session = self._session
        owner = member_zk.registration_owner(client, self.group, self.consumer_id)
        if owner is None:
            self._feed(MemberEvent.REREGISTER)
            self._register()
            with self._lock:
                session = self._session
        elif owner != session:
            raise DuplicateConsumerId(paths.id_path(self.group, self.consumer_id), owner, session)
        return session, generation

    def _fence_commit_release(self, session: int) -> None:
        """Fence before anything else, then commit what was consumed, tell the listener, release every owner
        znode I hold (eager release-all, as the original)."""
        client = self._zk
        assert client is not None
        with self._lock:
            self._feed(MemberEvent.FENCE)
            owned_now = sorted(self._owned)
        if self.config.auto_commit_enable and owned_now:
            self._commit(session=session)
        self._before_release(owned_now)
        member_zk.release(
            client, self.group, owned_now, session, batched=self._fast, budget=self.config.multi_budget_bytes
        )
        with self._lock:
            self._drop_ownership_locked()

    def _still_held(self, session: int) -> dict[TopicPartition, int]:
        """Incremental hand-over: the installed partitions whose owner znode is still mine (my session, my
        thread id), so they may be kept, with the znodes' data versions. Checked in ZooKeeper (one pipelined
        round) rather than assumed."""
        client = self._zk
        assert client is not None
        with self._lock:
            installed = {tp: o.thread_id for tp, o in self._owned.items() if not o.held_only}
        return member_zk.held_by(client, self.group, installed, session)

    def _retag(self, plan: RebalancePlan, versions: Mapping[TopicPartition, int]) -> None:
        """Kept partitions now under another of my threads: rewrite their owner payload in place (the znode is
        never deleted), then believe the new thread id."""
        if not plan.retag:
            return
        client = self._zk
        assert client is not None
        member_zk.retag(client, self.group, plan.retag, versions, budget=self.config.multi_budget_bytes)
        with self._lock:
            for c in plan.retag:
                o = self._owned.get(c.tp)
                if o is not None:
                    o.thread_id = c.thread_id
            self._assign_version += 1
            self._changed.notify_all()

    def _reconcile_commit_release(self, plan: RebalancePlan, session: int) -> None:
        """Incremental hand-over: stop handing out only what this plan releases (what it keeps stays handed
        out if it was), commit (what moves and what stays), tell the listener, delete the owner znodes of what
        moves. The releasing entries stay visible to commits and positions() until their owner znodes are
        deleted, so a listener committing in before_release (auto.commit.enable=false) commits them.
        Nothing moves: nothing is written."""
        client = self._zk
        assert client is not None
        keep = {c.tp for c in plan.keep}
        with self._lock:
            self._feed(MemberEvent.RECONCILE)
            releasing = {tp: o for tp, o in self._owned.items() if tp not in keep}
            if releasing:
                # From here on nothing of these is handed out (next_message checks under this lock).
                self._releasing = frozenset(releasing)
                self._assign_version += 1
                self._changed.notify_all()
        gone = sorted(set(releasing) | set(plan.release))
        if not gone:
            return
        released = False
        try:
            if self.config.auto_commit_enable and releasing:
                # What moves and what stays, as the eager path commits everything it owns at a rebalance.
                self._commit(session=session)
            told = sorted(tp for tp, o in releasing.items() if not o.held_only)
            self._before_release(told)
            member_zk.release(
                client, self.group, gone, session, batched=True, budget=self.config.multi_budget_bytes
            )
            released = True
        finally:
            with self._lock:
                for tp, o in releasing.items():
                    if self._owned.get(tp) is not o:
                        continue  # dropped or replaced meanwhile (session moved)
                    if released:
                        del self._owned[tp]
                    else:
                        # Possibly held until deleted: the next attempt deletes it.
                        self._owned[tp] = _Owned.possibly_held(o.thread_id)
                self._releasing = frozenset()

    def _read_and_plan(self, keeping: Mapping[TopicPartition, str] | None = None) -> RebalancePlan:
        """Read the group and plan my share (`zkcoord.legacy.rebalance`; `keeping` = incremental hand-over);
        watch the topics it covers."""
        client = self._zk
        assert client is not None
        cfg = self.config
        snapshot = member_zk.read_snapshot(client, self.group, need_all_topics=self.registration.is_wildcard)
        with self._lock:
            owned = tuple(self._owned) if keeping is not None else ()
        plan = plan_rebalance(
            consumer_id=self.consumer_id,
            snapshot=snapshot,
            owned=owned,
            strategy=cfg.partition_assignment_strategy,
            roundrobin_generation=cfg.roundrobin_generation,
            exclude_internal_topics=cfg.exclude_internal_topics,
            keeping=keeping,
        )
        self._watch_topics(plan.my_topics)
        if not any(cid == self.consumer_id for cid, _reg in snapshot.registrations):
            # My registration vanished between the check and the read (session moving): try again.
            raise SessionMoved("own registration missing from the group snapshot")
        return plan

    def _claim(self, plan: RebalancePlan, session: int) -> bool:
        """Create my owner znodes (faithful: one by one with rollback; fast: multi-op, and on a conflict wait
        for the conflicting znode's deletion, then claim once more at once when no group event came meanwhile:
        the plan still stands, and a whole new attempt would only re-read the same group). False on a
        conflict: the attempt failed."""
        client = self._zk
        assert client is not None
        cfg = self.config
        if not plan.claims:
            return True
        for turn in (1, 2):
            try:
                if self._fast:
                    result = member_zk.claim_batched(
                        client, self.group, plan.claims, session, budget=cfg.multi_budget_bytes
                    )
                else:
                    result = member_zk.claim_one_by_one(client, self.group, plan.claims, session)
            except member_zk.ZooKeeperCallTimeout:
                # A create that timed out may still be applied when the connection comes back: remember
                # the claims as possibly mine (fenced, nothing handed out) so the next attempt releases
                # whichever of them exist under my session.
                with self._lock:
                    self._owned.update({c.tp: _Owned.possibly_held(c.thread_id) for c in plan.claims})
                raise
            if result.ok:
                return True
            if not self._fast:
                return False
            others = member_zk.delete_stale_own(client, result.conflicts, session)
            if not others:
                return False
            self.stats.claim_waits += 1
            gone = member_zk.wait_deleted(
                client, others, cfg.claim_deadline_ms / 1000.0, self._due, clock=self._now
            )
            if turn == 2 or not gone or self._due.is_set():
                return False
        return False

    def _install(self, plan: RebalancePlan, session: int, generation: int) -> bool:
        """Read my offsets (after the claim, so no previous owner can commit after the read), then install
        the ownership and lower the fence, unless the session or generation moved meanwhile."""
        client = self._zk
        assert client is not None and self.offset_storage is not None
        offsets = self.offset_storage.fetch(plan.fetch_offsets)
        with self._lock:
            if member_zk.session_id(client) != session or self._session != session:
                raise SessionMoved(f"session moved during the rebalance (was 0x{session:x})")
            if self._generation != generation:
                # A session event arrived meanwhile; its own rebalance will redo this.
                log.info(
                    "group=%s member=%s dropping stale rebalance gen=%d",
                    self.group,
                    self.consumer_id,
                    generation,
                )
                # Still mine in ZooKeeper: remember them so the next attempt releases them (kept ones stay).
                self._owned.update({c.tp: _Owned.possibly_held(c.thread_id) for c in plan.claims})
                return False
            kept = {c.tp: self._owned.get(c.tp) for c in plan.keep}
            if any(o is None or o.held_only for o in kept.values()):
                raise SessionMoved("a kept partition was dropped during the rebalance")
            claimed = {
                c.tp: _Owned(
                    c.thread_id,
                    offsets[c.tp].position,
                    offsets[c.tp].zk_checkpoint,
                    offsets[c.tp].zk_version,
                )
                for c in plan.claims
            }
            self._owned = {tp: o for tp, o in {**kept, **claimed}.items() if o is not None}
            if claimed:
                self._assign_version += 1
            self._feed(MemberEvent.INSTALL)
            self._last_plan = plan
            self.stats.rebalances += 1
            self.stats.kept_partitions += len(plan.keep)
            self.stats.history.append((self._now(), len(self._owned)))
        log.info(
            "group=%s member=%s gen=%d owns %d partitions (%d kept, %d claimed)",
            self.group,
            self.consumer_id,
            generation,
            len(plan.keep) + len(plan.claims),
            len(plan.keep),
            len(plan.claims),
        )
        if self._listener is not None:
            self._listener.after_claim(self.consumer_id, dict(plan.assignment))
        return True

    # --- watches ---------------------------------------------------------------------------------------------

    def _watch_topics(self, topics: tuple[str, ...]) -> None:
        assert self.client is not None
        for topic in topics:
            path = paths.topic_path(topic)
            if path not in self._watched:
                self._watched.add(path)
                self.client.DataWatch(path, self._on_topic_data(topic))

    def _watch_brokers(self) -> None:
        assert self.client is not None
        if paths.BROKER_IDS not in self._watched:
            self._watched.add(paths.BROKER_IDS)
            assert self._zk is not None
            self._zk.ensure_path(paths.BROKER_IDS)
            self.client.ChildrenWatch(paths.BROKER_IDS, self._on_broker_list)

    def _watch_topic_list(self) -> None:
        assert self.client is not None
        if paths.BROKER_TOPICS not in self._watched:
            self._watched.add(paths.BROKER_TOPICS)
            assert self._zk is not None
            self._zk.ensure_path(paths.BROKER_TOPICS)
            self.client.ChildrenWatch(paths.BROKER_TOPICS, self._on_ids_change, send_event=False)

    # --- offsets ---------------------------------------------------------------------------------------------

    def commit_offsets(self) -> int:
        """Commit every consumed offset that moved; returns how many were written. As the 0.8.2 consumer's
        explicit commitOffsets(), a retriable broker failure is retried offsets.commit.max.retries times
        (auto-commits, at a rebalance and at close, are not retried: the next one carries the offsets)."""
        return self._commit(retries=self.config.offsets_commit_max_retries)

    def _before_release(self, tps: Iterable[TopicPartition]) -> None:
        """Tell the listener (if any) which partitions are about to be released, by topic; nothing if none."""
        by_topic: dict[str, set[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        if self._listener is not None and by_topic:
            self._listener.before_release(self.consumer_id, {t: frozenset(ps) for t, ps in by_topic.items()})

    def _commit(
        self,
        *,
        session: int | None = None,
        retries: int = 0,
    ) -> int:
        """Commit what moved of my owned partitions (with those an incremental rebalance is releasing); a
        retriable broker failure is retried `retries` times."""
        client = self._zk
        storage = self.offset_storage
        if client is None or storage is None:
            return 0
        with self._lock:
            source = self._owned
            expected = self._session if session is None else session
            consumed = {tp: o.consumed for tp, o in source.items() if o.consumed >= 0}
            checkpoints = {tp: o.checkpoint for tp, o in source.items()}
            versions = {tp: o.version for tp, o in source.items()}

        def check_session() -> None:
            if member_zk.session_id(client) != expected:
                raise SessionMoved("not committing: the session that owns these partitions is gone")

        outcome = storage.commit(consumed, checkpoints, versions, check_session, retries)
        with self._lock:
            for tp, (offset, version) in outcome.zk_written.items():
                o = source.get(tp)
                if o is not None:
                    o.checkpoint = offset
                    o.version = version
        if outcome.result is not None:
            self.stats.last_commit_result = outcome.result
            bad = len(outcome.result.failures) + len(outcome.result.skipped)
            if bad:
                self.stats.commit_failures += bad
                log.warning(
                    "group=%s member=%s commit incomplete: %s",
                    self.group,
                    self.consumer_id,
                    "; ".join(outcome.result.describe()),
                )
        return outcome.count

    # --- data path -------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Message]:
        timeout = None if self.config.consumer_timeout_ms < 0 else self.config.consumer_timeout_ms / 1000.0
        while not self._stopping:
            msg = self.next_message(timeout)
            if msg is None:
                return
            yield msg

    def next_message(self, timeout: float | None) -> Message | None:
        """The next record from an owned partition, or None after `timeout` seconds (None = forever) or on
        close. The fence is checked, under the ownership lock, right before a record is handed out."""
        deadline = None if timeout is None else self._now() + timeout
        while not self._stopping:
            with self._lock:
                version = self._assign_version
                fenced = self.fenced
                handed = {} if fenced else self._handed_locked()
                positions = {tp: o.consumed for tp, o in handed.items()}
            if version != self._fetcher_version:
                # A partition owned without a break since the last assign (the same ownership record, kept
                # by an incremental rebalance) goes on: its buffered records stay and its fetch is not
                # restarted. Every other partition starts again from its consume position.
                continuing = frozenset(
                    tp for tp, o in handed.items() if self._fetching.get(tp) is o and o.consumed >= 0
                )
                self._buffer = deque(
                    m for m in self._buffer if TopicPartition(m.topic, m.partition) in continuing
                )
                if positions:
                    self._ensure_fetcher().assign(positions, continuing)
                    self._take_resets(version)
                elif self._fetcher is not None:
                    self._fetcher.assign({})
                self._fetching = handed
                self._fetcher_version = version
            while self._buffer:
                msg = self._buffer.popleft()
                with self._lock:
                    if self.fenced or self._assign_version != version:
                        self._buffer.appendleft(msg)  # the next turn keeps it if its partition goes on
                        break
                    tp = TopicPartition(msg.topic, msg.partition)
                    o = self._owned.get(tp)
                    if o is None or o.held_only or tp in self._releasing:
                        continue
                    if o.consumed >= 0 and msg.offset < o.consumed:
                        continue
                    o.consumed = msg.offset + 1
                    return msg
            remaining = None if deadline is None else deadline - self._now()
            if remaining is not None and remaining <= 0:
                return None
            step = 0.2 if remaining is None else min(0.2, remaining)
            if not positions:
                with self._lock:
                    if self._assign_version == version and not self._stopping:
                        self._changed.wait(step)
                continue
            assert self._fetcher is not None
            self._buffer.extend(self._fetcher.poll(int(step * 1000)))
            self._take_resets(version)
        return None

    def _take_resets(self, version: int) -> None:
        """Make each resolved auto.offset.reset position the consume position (as the original's
        ConsumerFetcherThread.handleOffsetOutOfRange resets both fetch and consume offset), so the next
        commit (auto-commit, the commit before a rebalance releases, close) writes it even if no record is
        handed out: a later owner then starts there, not at a newer log end."""
        assert self._fetcher is not None
        resets = self._fetcher.reset_positions()
        if not resets:
            return
        with self._lock:
            if self._assign_version != version:
                return  # fenced or re-claimed meanwhile: the new owner state has its own positions
            for tp, offset in resets.items():
                o = self._owned.get(tp)
                if (
                    o is not None
                    and not o.held_only
                    and tp not in self._releasing
                    and o.consumed < 0 <= offset
                ):
                    o.consumed = offset

    def _ensure_fetcher(self) -> Fetcher:
        if self._fetcher is None:
            if self._fetcher_factory is not None:
                self._fetcher = self._fetcher_factory(self)
            else:
                self._fetcher = KafkaFetcher(self, self.kafka_security)
        return self._fetcher

    def _close_fetcher(self) -> None:
        if self._fetcher is not None:
            try:
                self._fetcher.close()
            finally:
                self._fetcher = None

    def leader_endpoints(self, tps: list[TopicPartition], protocol: str = "PLAINTEXT") -> list[str]:
        """`host:port` of the leaders ZooKeeper names for `tps` (partition state -> broker registration ->
        the listener of security `protocol`)."""
        assert self.client is not None
        out = []
        for tp in tps:
            try:
                host, port = leader_endpoint(self.client, tp.topic, tp.partition, protocol)
            except (NoNodeError, ZkcoordError, LookupError) as exc:
                log.info("no leader for %s yet: %s", tp, exc)
                continue
            out.append(f"{host}:{port}")
        return sorted(set(out))
