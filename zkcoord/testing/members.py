"""The test kit's group members: a kafka-python member, a confluent-kafka (librdkafka) member and a zkcoord legacy
member, each consuming on its own thread (or polled by the test) and recording what its rebalance callbacks said,
so a migration test can ask who held which partition when; `RebalanceLog` is the pure record they share.

    first = KafkaPythonMember(bootstrap, "g", "orders", assignor="cooperative-sticky").start()
    wait_for(lambda: first.held() == set(range(6)), 30, "the first member to hold the 6 partitions")
    second = ConfluentMember(bootstrap, "g", "orders", assignor="cooperative-sticky").start()
    wait_for(lambda: len(first.held()) == len(second.held()) == 3, 30, "the two to share them")
    first.stop()                                   # commits, leaves; raises if its poll loop failed
    wait_for(lambda: second.held() == set(range(6)), 30, "the second to take over")
    assert second.revoked() == set() and first.paused() == set()   # cooperative: only what moved was revoked
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.zk.member import LegacyConsumer
from zkcoord.zk.member_offsets import OffsetsFactory
from zkcoord.zk.session import wait_for

Sink = Callable[[int, int], None]  # (partition, offset) of each record a member hands out
OnChange = Callable[
    [str, frozenset[int]], None
]  # (member name, partitions it holds now), after each callback

LIBRDKAFKA_PARTITION_EOF = -191  # an informational "error": the end of a partition was reached


class Change(StrEnum):
    """What a rebalance callback said."""

    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"  # taken away without a revocation (session timed out, fenced): nothing could be committed


class RebalanceLog:
    """One member's rebalance callbacks in order, and what follows from them: the partitions it holds (assigned
    adds, revoked and lost remove: right for eager members, whose revocations name everything, and cooperative
    ones alike), every partition it gave up, and those it gave up and was assigned again (a pause).

    >>> log = RebalanceLog()
    >>> _ = log.record(Change.ASSIGNED, {0, 1, 2}); _ = log.record(Change.REVOKED, {0, 1, 2})
    >>> sorted(log.record(Change.ASSIGNED, {0, 1}))
    [0, 1]
    >>> sorted(log.revoked()), sorted(log.paused())
    ([0, 1, 2], [0, 1])
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[tuple[Change, frozenset[int]]] = []
        self._held: set[int] = set()

    def record(self, kind: Change, partitions: set[int] | frozenset[int]) -> frozenset[int]:
        """Add one callback; returns what the member holds after it."""
        with self._lock:
            self._events.append((kind, frozenset(partitions)))
            if kind is Change.ASSIGNED:
                self._held |= partitions
            else:
                self._held -= partitions
            return frozenset(self._held)

    def closed(self) -> None:
        """The member closed: it holds nothing, whatever its client said on the way out."""
        with self._lock:
            self._held.clear()

    @property
    def events(self) -> list[tuple[Change, frozenset[int]]]:
        with self._lock:
            return list(self._events)

    def held(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._held)

    def revoked(self) -> set[int]:
        """Every partition a revoked or lost callback named."""
        return {p for kind, ps in self.events if kind is not Change.ASSIGNED for p in ps}

    def paused(self) -> set[int]:
        """Partitions the member gave up and was then assigned again: a gap in its holding of a partition it
        kept, read from its own callbacks (a sampler may miss one shorter than its interval)."""
        events = self.events
        return {
            p
            for i, (kind, ps) in enumerate(events)
            if kind is not Change.ASSIGNED
            for p in ps
            if any(later is Change.ASSIGNED and p in back for later, back in events[i + 1 :])
        }


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What both client members are configured with, in the kit's terms (each maps it to its client's names)."""

    bootstrap: str
    group: str
    client_id: str
    assignor: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    auto_commit_interval_ms: int | None  # None: auto-commit off
    config: Mapping[str, Any]  # the client's own settings, over the kit's


class ClientMember:
    """A broker-protocol group member on one topic: the callback record, the poll thread and the clean stop.

    `assignor` is "range", "roundrobin" or "cooperative-sticky" (the client's default when None; librdkafka's
    range); `auto_commit_interval_ms=None` turns auto-commit off; `config` is the client's own settings over the
    kit's defaults (from the earliest offset, 6 s sessions, 300 ms heartbeats, 100 ms fetch wait, 200 ms
    auto-commit). `sink(partition, offset)` receives every record handed out (without one, they are kept in
    `consumed`); `on_change(name, held)` runs after each callback, so a test can keep every member's holdings
    under one lock; `revoke_delay_s` makes a revocation take that long before the partitions count as given up,
    as a callback that flushes its work does (an early hand-over to the next member then shows as a partition
    held twice). `retry_retriable` keeps the poll thread polling after a retriable client error (kafka-python's
    `retriable` errors, e.g. its coordinator restarting), as an application would; the errors are kept in
    `retried`. Either `start()` the member's poll thread, or call `poll()` from the test's own thread."""

    prefix = "member"

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        name: str | None = None,
        *,
        assignor: str | None = None,
        session_timeout_ms: int = 6000,
        heartbeat_interval_ms: int = 300,
        auto_commit_interval_ms: int | None = 200,
        config: Mapping[str, Any] | None = None,
        sink: Sink | None = None,
        on_change: OnChange | None = None,
        revoke_delay_s: float = 0.0,
        poll_timeout_s: float = 0.1,
        retry_retriable: bool = False,
    ) -> None:
        self.name = name or f"{self.prefix}-{uuid.uuid4().hex[:6]}"
        self.topic = topic
        self.log = RebalanceLog()
        self.consumed: list[tuple[int, int]] = []
        self.errors: list[BaseException | str] = []
        self.retried: list[
            BaseException
        ] = []  # retriable errors the poll thread went on after (retry_retriable)
        self._retry_retriable = retry_retriable
        self.assigned_once = threading.Event()
        self._sink = sink
        self._on_change = on_change
        self._revoke_delay_s = revoke_delay_s
        self._poll_timeout_s = poll_timeout_s
        self._lock = threading.Lock()
        self._revoking = 0
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._subscribed = False
        settings = GroupSettings(
            bootstrap, group, self.name, assignor, session_timeout_ms, heartbeat_interval_ms,
            auto_commit_interval_ms, config or {},
        )  # fmt: skip
        self.consumer = self._connect(settings)

    def _connect(self, settings: GroupSettings) -> Any:
        """Build the client (it joins the group only once subscribed, at the first poll)."""
        raise NotImplementedError

    def _subscribe(self) -> None:
        """Subscribe the client to `self.topic` with this member's callbacks."""
        raise NotImplementedError

    @property
    def client_id(self) -> str:
        """The client id it connects with: its name."""
        return self.name

    # --- what it holds ------------------------------------------------------------------------------------------

    def held(self) -> frozenset[int]:
        return self.log.held()

    @property
    def events(self) -> list[tuple[Change, frozenset[int]]]:
        return self.log.events

    def revoked(self) -> set[int]:
        return self.log.revoked()

    def paused(self) -> set[int]:
        return self.log.paused()

    @property
    def revoking(self) -> int:
        """Revocation callbacks running: the member still holds what it is giving up."""
        with self._lock:
            return self._revoking

    def stable(self) -> bool:
        """Assigned at least once (a member that joined a group that has partitions for it)."""
        return self.assigned_once.is_set()

    def _callback(self, kind: Change, partitions: set[int]) -> None:
        revoking = kind is not Change.ASSIGNED
        if revoking:
            with self._lock:
                self._revoking += 1
        try:
            if kind is Change.REVOKED and partitions and self._revoke_delay_s:
                self._halt.wait(
                    self._revoke_delay_s
                )  # the user's work before giving up (not a synchronisation)
            held = self.log.record(kind, partitions)
            if kind is Change.ASSIGNED:
                self.assigned_once.set()
            if self._on_change is not None:
                self._on_change(self.name, held)
        finally:
            if revoking:
                with self._lock:
                    self._revoking -= 1

    def _record(self, partition: int, offset: int) -> None:
        if self._sink is not None:
            self._sink(partition, offset)
        else:
            self.consumed.append((partition, offset))

    # --- polling ------------------------------------------------------------------------------------------------

    def poll(self, timeout_s: float | None = None) -> None:
        """One poll of the client (callbacks run inside it); records go to the sink. The first one subscribes:
        a member joins its group when it is started or first polled, not when it is built."""
        if not self._subscribed:
            self._subscribed = True
            self._subscribe()
        self._poll(self._poll_timeout_s if timeout_s is None else timeout_s)

    def _poll(self, timeout_s: float) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        try:
            while not self._halt.is_set():
                try:
                    self.poll(self._poll_timeout_s)
                except Exception as exc:
                    # What an application does with a retriable client error (the coordinator restarting, say):
                    # keep polling. Kept in `retried`; anything else ends the thread and fails stop().
                    if not (self._retry_retriable and getattr(exc, "retriable", False)):
                        raise
                    self.retried.append(exc)
        except BaseException as exc:  # surfaced by stop()
            self.errors.append(exc)

    def start(self) -> ClientMember:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the poll thread and close the client (it commits what auto-commit stored, then leaves the group);
        idempotent, asserts nothing."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(30)
        if self._closed:
            return
        self._closed = True
        self.consumer.close()
        self.log.closed()
        if self._on_change is not None:
            self._on_change(self.name, frozenset())

    def stop(self) -> None:
        """`close()`, then fail if the poll thread is stuck or anything went wrong in it."""
        self.close()
        assert self._thread is None or not self._thread.is_alive(), f"{self.name}'s poll thread did not stop"
        assert not self.errors, self.errors


class KafkaPythonMember(ClientMember):
    """A kafka-python `KafkaConsumer` in a group. Set `commit_now` to have the poll thread commit synchronously
    (kafka-python is not thread-safe); it sets `committed` when done. The topic is in the client's metadata
    before it subscribes, and it asks for metadata again right after: kafka-python 3.0.12 otherwise rejoins at its
    first metadata update and can lose that join for good (docs/cluster.md)."""

    prefix = "kp"
    metadata_timeout_s = 15.0

    def _connect(self, settings: GroupSettings) -> Any:
        from kafka import KafkaConsumer

        self.commit_now = threading.Event()
        self.committed = threading.Event()
        options: dict[str, Any] = {
            "bootstrap_servers": settings.bootstrap,
            "group_id": settings.group,
            "client_id": settings.client_id,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": settings.session_timeout_ms,
            "heartbeat_interval_ms": settings.heartbeat_interval_ms,
            "fetch_max_wait_ms": 100,
            "enable_auto_commit": settings.auto_commit_interval_ms is not None,
        }
        if settings.auto_commit_interval_ms is not None:
            options["auto_commit_interval_ms"] = settings.auto_commit_interval_ms
        if settings.assignor is not None:
            options["partition_assignment_strategy"] = [_kafka_python_assignor(settings.assignor)]
        consumer = KafkaConsumer(**{**options, **settings.config})
        topic = self.topic
        wait_for(
            lambda: bool(consumer.partitions_for_topic(topic)),
            self.metadata_timeout_s,
            f"{topic} in metadata",
        )
        return consumer

    def _subscribe(self) -> None:
        self.consumer.subscribe([self.topic], listener=_listener(self))
        # A blocking metadata round trip after subscribing: its listener fills the coordinator's metadata
        # snapshot with the topic's partitions before the first join, so no snapshot-driven rejoin follows that
        # kafka-python 3.0.12 can lose for good with short polls (docs/cluster.md, "first-join hang").
        self.consumer.topics()

    def _poll(self, timeout_s: float) -> None:
        for records in self.consumer.poll(timeout_ms=int(1000 * timeout_s)).values():
            for r in records:
                self._record(r.partition, r.offset)
        if self.commit_now.is_set() and self.consumer.assignment():
            self.consumer.commit()
            self.commit_now.clear()
            self.committed.set()

    def positions(self) -> dict[int, int]:
        """The next offset to read of each assigned partition (call from the polling thread)."""
        return {tp.partition: self.consumer.position(tp) for tp in self.consumer.assignment()}


def _kafka_python_assignor(name: str) -> Any:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    known = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    if name not in known:
        raise ValueError(f"assignor must be one of {sorted(known)}, not {name!r}")
    return known[name]


def _listener(member: ClientMember) -> Any:
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            member._callback(Change.REVOKED, {tp.partition for tp in revoked})

        def on_partitions_assigned(self, assigned: Any) -> None:
            member._callback(Change.ASSIGNED, {tp.partition for tp in assigned})

        def on_partitions_lost(self, lost: Any) -> None:
            member._callback(Change.LOST, {tp.partition for tp in lost})

    return Listener()


class ConfluentMember(ClientMember):
    """A confluent-kafka (librdkafka) `Consumer` in a group (`assignor` is its `partition.assignment.strategy`).
    `commit_on_revoke` commits the stored positions synchronously in the revocation callback, before the next
    owner starts there ("nothing stored yet" is not an error; other failures are, unless
    `commit_errors_fatal=False`, e.g. while the coordinator is being killed). A non-retriable error message from
    the client is recorded in `errors` (`stop()` fails on it)."""

    prefix = "ck"

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        name: str | None = None,
        *,
        commit_on_revoke: bool = False,
        commit_errors_fatal: bool = True,
        **common: Any,
    ) -> None:
        self._commit_on_revoke = commit_on_revoke
        self._commit_errors_fatal = commit_errors_fatal
        super().__init__(bootstrap, group, topic, name, **common)

    def _connect(self, settings: GroupSettings) -> Any:
        from confluent_kafka import Consumer

        options: dict[str, Any] = {
            "bootstrap.servers": settings.bootstrap,
            "group.id": settings.group,
            "client.id": settings.client_id,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": settings.heartbeat_interval_ms,
            "partition.assignment.strategy": settings.assignor or "range",
            "fetch.wait.max.ms": 100,
            "enable.auto.commit": settings.auto_commit_interval_ms is not None,
        }
        if settings.auto_commit_interval_ms is not None:
            options["auto.commit.interval.ms"] = settings.auto_commit_interval_ms
        return Consumer({**options, **settings.config})

    def _subscribe(self) -> None:
        def on_revoke(client: Any, parts: list[Any]) -> None:
            if self._commit_on_revoke:
                self._commit_before_revoke(client)
            self._callback(Change.REVOKED, {p.partition for p in parts})

        self.consumer.subscribe(
            [self.topic],
            on_assign=lambda _c, ps: self._callback(Change.ASSIGNED, {p.partition for p in ps}),
            on_revoke=on_revoke,
            on_lost=lambda _c, ps: self._callback(Change.LOST, {p.partition for p in ps}),
        )

    def _commit_before_revoke(self, consumer: Any) -> None:
        try:
            consumer.commit(asynchronous=False)
        except Exception as exc:
            if "NO_OFFSET" not in str(exc) and self._commit_errors_fatal:
                self.errors.append(exc)

    def _poll(self, timeout_s: float) -> None:
        for msg in self.consumer.consume(200, timeout_s):
            err = msg.error()
            if err is not None:
                if not err.retriable() and err.code() != LIBRDKAFKA_PARTITION_EOF:
                    self.errors.append(str(err))
                continue
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None  # a record (not an error) has both
            self._record(partition, offset)


class LegacyMember:
    """A zkcoord legacy ZooKeeper member (`LegacyConsumer`) consuming on its own thread after `start()`, or
    polled by the test with `poll()`. `held()` is what it may hand out records from (empty while fenced);
    `crash()` ends its ZooKeeper session with nothing released or committed, as a dying process does."""

    revoking = 0  # no revocation callback: a legacy member stops handing out records before it releases

    def __init__(
        self,
        config: LegacyConsumerConfig,
        topics: Mapping[str, int],
        *,
        offsets: OffsetsFactory | None = None,
        sink: Sink | None = None,
        poll_timeout_s: float = 0.1,
    ) -> None:
        self.name = config.consumer_id or config.group_id
        self.consumer = LegacyConsumer(config, topics, offsets=offsets)
        self.consumed: list[tuple[int, int]] = []
        self._sink = sink
        self._poll_timeout_s = poll_timeout_s
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, *, thread: bool = True) -> LegacyMember:
        """Join the group; with `thread=False` the test polls."""
        self.consumer.start()
        if thread:
            self._thread = threading.Thread(target=self._run, name=f"legacy-{self.name}", daemon=True)
            self._thread.start()
        return self

    def poll(self, timeout_s: float | None = None) -> int:
        """Hand out every record ready within `timeout_s` each; returns how many."""
        n = 0
        timeout = self._poll_timeout_s if timeout_s is None else timeout_s
        while (msg := self.consumer.next_message(timeout=timeout)) is not None:
            if self._sink is not None:
                self._sink(msg.partition, msg.offset)
            else:
                self.consumed.append((msg.partition, msg.offset))
            n += 1
            if self._halt.is_set():
                break
        return n

    def _run(self) -> None:
        while not self._halt.is_set():
            self.poll()

    def held(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.owned())

    def stable(self) -> bool:
        return self.consumer.is_stable()

    def crash(self) -> None:
        """The process dies: its ZooKeeper session ends with nothing released or committed first."""
        self._halt.set()
        assert self.consumer.client is not None
        self.consumer.client.stop()

    def stop(self, *, commit: bool | None = None) -> None:
        """Stop the thread, then close the member (commits unless `commit=False`, releases, leaves)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(10)
        self.consumer.close(commit=commit)


def legacy_config(zk_connect: str, group: str, name: str, **overrides: Any) -> LegacyConsumerConfig:
    """A legacy member's configuration with the kit's test defaults: from the smallest offset, 200 ms
    auto-commit, 6 s ZooKeeper sessions, fast mode; `overrides` are `LegacyConsumerConfig` fields."""
    settings: dict[str, Any] = {
        "group_id": group,
        "zookeeper_connect": zk_connect,
        "consumer_id": name,
        "auto_offset_reset": "smallest",
        "auto_commit_interval_ms": 200,
        "zookeeper_session_timeout_ms": 6000,
        "mode": "fast",
        **overrides,
    }
    return LegacyConsumerConfig(**settings)


__all__ = [
    "Change",
    "ClientMember",
    "ConfluentMember",
    "GroupSettings",
    "KafkaPythonMember",
    "LegacyMember",
    "RebalanceLog",
    "legacy_config",
]
