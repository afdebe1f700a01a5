"""Fixtures for the legacy member against real ZooKeeper: topics and a broker written with the codecs, members
that are always closed, and an ownership observer that checks every member's belief against the owner znodes."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kazoo.exceptions import KazooException

from zkcoord.legacy import assign, paths
from zkcoord.legacy.codecs import BrokerRegistration, TopicAssignment, decode_owner
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.legacy.ids import consumer_of_thread
from zkcoord.legacy.rebalance import TopicPartition
from zkcoord.testing import wait_for
from zkcoord.zk.member import LegacyConsumer


def make_topic(client: Any, topic: str, partitions: int) -> None:
    data = TopicAssignment.of({p: [0] for p in range(partitions)}).encode()
    if client.exists(paths.topic_path(topic)):
        client.set(paths.topic_path(topic), data)
    else:
        client.create(paths.topic_path(topic), data, makepath=True)


def register_broker(client: Any, broker_id: int = 0, port: int = 9092) -> None:
    reg = BrokerRegistration.create("127.0.0.1", port, timestamp_ms=int(time.time() * 1000))
    client.create(paths.broker_path(broker_id), reg.encode(), ephemeral=True, makepath=True)


def owners(client: Any, group: str, topic: str) -> dict[int, tuple[str, int]]:
    """partition -> (owner payload, ephemeralOwner session)."""
    out = {}
    try:
        children = client.get_children(paths.owners_topic_path(group, topic))
    except Exception:
        return {}
    for child in children:
        path = f"{paths.owners_topic_path(group, topic)}/{child}"
        try:
            data, stat = client.get(path)
        except Exception:
            continue
        out[int(child)] = (decode_owner(path, data), stat.ephemeralOwner)
    return out


@dataclass
class Observer:
    """Checks, at every observation, that each member's believed ownership is backed by the owner znode (same
    payload, same session) and that no two members believe they own the same partition."""

    client: Any
    group: str
    topics: dict[str, int]
    members: list[LegacyConsumer] = field(default_factory=list)
    observations: int = 0
    checked: int = 0

    def observe(self) -> None:
        views = [(m, *m.ownership_view()) for m in self.members if not m._closed]
        try:
            # ZooKeeper reads are not linearizable across servers: sync first, so the observer's server has
            # applied every claim the members made through other servers before we compare.
            self.client.sync("/")
            znodes = {t: owners(self.client, self.group, t) for t in self.topics}
        except KazooException:
            return  # the observer's own connection is moving (leader kill); the next observation checks
        believers: dict[TopicPartition, str] = {}
        for m, version, believed in views:
            if m.ownership_view()[0] != version:
                continue  # it fenced or claimed meanwhile; the next observation checks it
            for tp, thread in believed.items():
                assert tp not in believers, f"{tp} believed owned by {believers[tp]} and {m.consumer_id}"
                believers[tp] = m.consumer_id
                node = znodes[tp.topic].get(tp.partition)
                assert node is not None, f"{m.consumer_id} believes it owns {tp} but no owner znode exists"
                # The holder (consumer and session) must match. The thread in the payload is checked at
                # convergence: an incremental rebalance rewrites a kept partition's payload in place when it
                # moves between a member's own threads, a write the member's belief cannot follow atomically.
                assert (consumer_of_thread(node[0]), node[1]) == (consumer_of_thread(thread), m.session), (
                    f"{m.consumer_id} believes {tp}={thread}, znode says {node}"
                )
                self.checked += 1
        self.observations += 1

    def converged(self) -> bool:
        """Every partition owned exactly as the assignor decides for the live members, and every member
        stable and believing exactly its share."""
        self.observe()
        live = [m for m in self.members if not m._closed]
        if not all(m.is_stable() for m in live):
            return False
        subs = {m.consumer_id: dict(m.registration.subscription) for m in live}
        expected = assign(
            live[0].config.partition_assignment_strategy if live else "range",
            subs,
            {t: list(range(n)) for t, n in self.topics.items()},
        )
        actual = {
            (t, p): owner
            for t in self.topics
            for p, (owner, _s) in owners(self.client, self.group, t).items()
        }
        if actual != expected:
            return False
        believed: dict[tuple[str, int], str] = {}
        for m in live:
            for tp, th in m.owned().items():
                believed[(tp.topic, tp.partition)] = th
        return believed == expected

    def wait_converged(self, timeout: float, what: str = "a converged assignment") -> None:
        wait_for(self.converged, timeout, what, interval=0.05)


@dataclass
class OwnerHistory:
    """Records every owner znode event (DataWatch) so tests can look at each partition's sequence of owners."""

    client: Any
    group: str
    events: dict[TopicPartition, list[tuple[str, int] | None]] = field(default_factory=dict)  # payload, czxid
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, topic: str, partitions: int) -> None:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            self.events[tp] = []

            self._arm(tp, paths.owner_path(self.group, topic, p))

    def _arm(self, tp: TopicPartition, path: str) -> None:
        # Raw one-shot watches keep the event type. A DELETED event is recorded as None; a deletion can still
        # go unseen when the znode is re-created between a CHANGED event (a payload rewritten in place) and
        # the re-arm, so each state carries its czxid: a new czxid means the znode was deleted in between.
        def on_event(event: Any) -> None:
            if event.type == "DELETED":
                self._record(tp, None)
            self._arm(tp, path)

        stat = self.client.exists(path, watch=on_event)
        if stat is not None:
            try:
                data, got = self.client.get(path)
            except Exception:
                return
            self._record(tp, (data.decode(), got.czxid))

    def _record(self, tp: TopicPartition, value: tuple[str, int] | None) -> None:
        with self.lock:
            seq = self.events[tp]
            if not seq or seq[-1] != value:
                seq.append(value)

    def direct_handovers(self) -> list[tuple[TopicPartition, str, str]]:
        """Owner changes between consumers without a deletion in between, i.e. one owner znode (one czxid)
        whose payload names another consumer (must be none). A payload rewritten from one thread of a consumer
        to another (fast mode's incremental hand-over) is no hand-over."""
        out = []
        with self.lock:
            for tp, seq in self.events.items():
                for a, b in itertools.pairwise(seq):
                    if a is None or b is None or a[1] != b[1]:
                        continue
                    if consumer_of_thread(a[0]) != consumer_of_thread(b[0]):
                        out.append((tp, a[0], b[0]))
        return out


@pytest.fixture
def member_factory(zk_connect: str) -> Iterator[Callable[..., LegacyConsumer]]:
    made: list[LegacyConsumer] = []

    def make(group: str, topics: dict[str, int], *, start: bool = True, **cfg: Any) -> LegacyConsumer:
        settings: dict[str, Any] = {
            "zookeeper_session_timeout_ms": 6000,
            "auto_commit_enable": False,
            "rebalance_backoff_ms": 50,
            "rebalance_max_retries": 20,
        }
        fetcher_factory = cfg.pop("fetcher_factory", None)
        listener = cfg.pop("listener", None)
        settings.update(cfg)
        connect = settings.pop("zookeeper_connect", zk_connect)
        config = LegacyConsumerConfig(group_id=group, zookeeper_connect=connect, **settings)
        member = LegacyConsumer(config, topics, fetcher_factory=fetcher_factory, listener=listener)
        made.append(member)
        if start:
            member.start()
        return member

    yield make
    for m in made:
        with contextlib.suppress(Exception):
            m.close(commit=False)


class FakeFetcher:
    """A data path without a broker: every assigned partition has an endless log whose record at offset o has
    value b"<topic>/<partition>/<o>"; positions -1 start at 0 (as `smallest`)."""

    def __init__(self, _member: Any = None, per_poll: int = 3) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.per_poll = per_poll
        self.assigned_log: list[dict[TopicPartition, int]] = []
        self.continuing_log: list[frozenset[TopicPartition]] = []
        self.resets: dict[TopicPartition, int] = {}

    def assign(self, positions: Any, continuing: frozenset[TopicPartition] = frozenset()) -> None:
        # As KafkaFetcher: a continuing partition's fetch goes on from where it is.
        self.positions = {
            tp: self.positions[tp] if tp in continuing and tp in self.positions else max(o, 0)
            for tp, o in positions.items()
        }
        self.resets = {tp: 0 for tp, o in positions.items() if o < 0}
        self.assigned_log.append(dict(positions))
        self.continuing_log.append(continuing)

    def reset_positions(self) -> dict[TopicPartition, int]:
        taken, self.resets = self.resets, {}
        return taken

    def poll(self, timeout_ms: int) -> list[Any]:
        from zkcoord.zk.member import Message

        out = []
        for tp in sorted(self.positions):
            start = self.positions[tp]
            for o in range(start, start + self.per_poll):
                out.append(
                    Message(tp.topic, tp.partition, o, None, f"{tp.topic}/{tp.partition}/{o}".encode())
                )
            self.positions[tp] = start + self.per_poll
        return out

    def close(self) -> None:
        self.positions = {}


@dataclass(frozen=True)
class Kit:
    make_topic: Callable[[Any, str, int], None] = make_topic
    register_broker: Callable[..., None] = register_broker
    owners: Callable[[Any, str, str], dict[int, tuple[str, int]]] = owners
    Observer: type[Observer] = Observer
    OwnerHistory: type[OwnerHistory] = OwnerHistory
    FakeFetcher: type[FakeFetcher] = FakeFetcher


@pytest.fixture
def kit() -> Kit:
    """The helpers of this directory (test modules here are not a package, so they get them as a fixture)."""
    return Kit()
