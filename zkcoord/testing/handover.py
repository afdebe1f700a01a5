"""The test kit's hand-over sampler: it samples a group's owner znodes (payload and czxid) and its members'
holdings on a background thread every few milliseconds, and answers what an incremental hand-over must never
do: delete and re-create the owner znode of a partition whose holder stays the same, take a partition away from
its holder and give it back, or let two members hold one partition at once.

    with HandoverSampler(zk, "g", {"t": 12}, holdings=legacy_holdings(members)) as sampler:
        ...join, leave, crash...
    assert sampler.recreated_by_same_holder() == []
    assert sampler.holding_gaps() == [] and sampler.held_twice() == []
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kazoo.exceptions import KazooException, NoNodeError

from zkcoord.legacy import paths
from zkcoord.legacy.ids import consumer_of_thread
from zkcoord.topic_partition import TopicPartition

Holdings = Mapping[str, frozenset[TopicPartition]]


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # monotonic seconds
    owners: Mapping[TopicPartition, tuple[str, int]]  # owner znode payload (thread id) and czxid
    holdings: Holdings  # member -> partitions it holds (hands out records from) at this sample


class _LegacyView(Protocol):
    consumer_id: str

    def ownership_view(self) -> tuple[int, dict[TopicPartition, str]]: ...


def legacy_holdings(members: Sequence[_LegacyView], tries: int = 5) -> Callable[[], Holdings]:
    """Holdings of zkcoord legacy members, read as one consistent cut: the views are read, then every
    member's assignment version again; when none moved, all views held at once at that moment."""

    def read() -> Holdings:
        views: list[tuple[_LegacyView, int, dict[TopicPartition, str]]] = []
        for _ in range(tries):
            views = [(m, *m.ownership_view()) for m in list(members)]
            if all(m.ownership_view()[0] == version for m, version, _owned in views):
                break
        return {m.consumer_id: frozenset(owned) for m, _version, owned in views}

    return read


class HandoverSampler:
    """Samples owner znodes under `/consumers/<group>/owners` of `topics` (none when `client` is None) and
    `holdings()` every `interval_s` (at most `max_samples` kept: memory stays bounded) until `stop()`."""

    def __init__(
        self,
        client: Any,
        group: str,
        topics: Mapping[str, int] | Callable[[], Iterable[str]],
        *,
        holdings: Callable[[], Holdings] = dict,
        interval_s: float = 0.01,
        max_samples: int = 60_000,
    ) -> None:
        self._client = client
        self._group = group
        if callable(topics):
            self._topics: Callable[[], Iterable[str]] = topics
        else:
            names = tuple(topics)
            self._topics = lambda: names
        self._holdings = holdings
        self._interval = interval_s
        self._max = max_samples
        self.samples: list[Sample] = []
        self._sampled = threading.Condition()  # notified after each sample
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> HandoverSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> HandoverSampler:
        self._thread = threading.Thread(target=self._run, name=f"handover-sampler-{self._group}", daemon=True)
        self._thread.start()
        self.wait_samples(1, 10.0)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def wait_samples(self, n: int, timeout: float) -> None:
        """Block until `n` more samples were taken (so a change that just converged has been seen)."""
        with self._sampled:
            target = len(self.samples) + n
            if not self._sampled.wait_for(lambda: len(self.samples) >= target, timeout):
                raise TimeoutError(f"the sampler took no {n} samples within {timeout} s")

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.samples) < self._max:
            started = time.monotonic()
            try:
                holdings_before = self._holdings()
                owners = self._read_owners()
                holdings = self._holdings()
            except KazooException:
                self.errors += 1
                continue
            # A holding seen both before and after the znode read was held during it.
            both = {
                m: tps & holdings_before.get(m, frozenset())
                for m, tps in holdings.items()
                if m in holdings_before
            }
            with self._sampled:
                self.samples.append(Sample(started, owners, both))
                self._sampled.notify_all()
            self._stop.wait(max(0.0, self._interval - (time.monotonic() - started)))

    def _read_owners(self) -> dict[TopicPartition, tuple[str, int]]:
        client = self._client
        if client is None:  # a plain broker-protocol group: holdings only
            return {}
        topics = sorted(self._topics())
        listed = [(t, client.get_children_async(paths.owners_topic_path(self._group, t))) for t in topics]
        pending = []
        for topic, result in listed:
            try:
                children = result.get(timeout=5)
            except NoNodeError:
                continue
            for child in children:
                path = paths.owner_path(self._group, topic, int(child))
                pending.append((TopicPartition(topic, int(child)), client.get_async(path)))
        out = {}
        for tp, result in pending:
            try:
                data, stat = result.get(timeout=5)
            except NoNodeError:
                continue
            out[tp] = (data.decode("utf-8", "replace"), stat.czxid)
        return out

    # --- answers ---------------------------------------------------------------------------------------------

    def intervals(self) -> list[float]:
        return [b.at - a.at for a, b in itertools.pairwise(self.samples)]

    def median_interval_s(self) -> float:
        gaps = self.intervals()
        return statistics.median(gaps) if gaps else 0.0

    def znode_timeline(self, tp: TopicPartition) -> list[tuple[str, int] | None]:
        """The distinct successive states of one owner znode: (payload, czxid), or None while it is absent."""
        out: list[tuple[str, int] | None] = []
        for s in self.samples:
            state = s.owners.get(tp)
            if not out or out[-1] != state:
                out.append(state)
        return out

    def recreated_by_same_holder(self) -> list[tuple[TopicPartition, str, int, int]]:
        """(partition, holder, czxid before, czxid after) for each owner znode that was deleted (or replaced)
        and created again by the same consumer with no other holder seen in between."""
        out = []
        tps = sorted({tp for s in self.samples for tp in s.owners})
        for tp in tps:
            present = [state for state in self.znode_timeline(tp) if state is not None]
            for (a_payload, a_czxid), (b_payload, b_czxid) in itertools.pairwise(present):
                a, b = consumer_of_thread(a_payload), consumer_of_thread(b_payload)
                if a == b and a_czxid != b_czxid:
                    out.append((tp, a, a_czxid, b_czxid))
        return out

    def holding_gaps(self, members: Iterable[str] | None = None) -> list[tuple[str, TopicPartition, float]]:
        """(member, partition, seconds) for each time a member stopped holding a partition and held it again
        with nobody else holding it in between: the pause an incremental hand-over must not have."""
        wanted = None if members is None else set(members)
        out = []
        last_held: dict[tuple[str, TopicPartition], float] = {}
        lost_at: dict[tuple[str, TopicPartition], float] = {}
        taken_by_other: set[tuple[str, TopicPartition]] = set()
        for s in self.samples:
            holders: dict[TopicPartition, set[str]] = {}
            for m, tps in s.holdings.items():
                for tp in tps:
                    holders.setdefault(tp, set()).add(m)
            for key in list(last_held):
                m, tp = key
                if tp in s.holdings.get(m, frozenset()):
                    gap = key in lost_at and key not in taken_by_other
                    if gap and (wanted is None or m in wanted):
                        out.append((m, tp, s.at - lost_at[key]))
                    lost_at.pop(key, None)
                    taken_by_other.discard(key)
                else:
                    lost_at.setdefault(key, s.at)
                    if holders.get(tp, set()) - {m}:
                        taken_by_other.add(key)
            for m, tps in s.holdings.items():
                for tp in tps:
                    last_held[(m, tp)] = s.at
        return out

    def settled(self, held: list[frozenset[int]], partitions: int) -> bool:
        """Whether a one-topic group has settled: `held` (each member's partitions, from its own view) covers every
        one of `partitions` exactly once with no member empty, and the last sample's owner znodes cover them all,
        written by as many consumers (thread names up to their last `-`) as there are members."""
        owners = self.samples[-1].owners if self.samples else {}
        return (
            sum(len(h) for h in held) == partitions
            and set().union(*held) == set(range(partitions))
            and all(held)
            and len(owners) == partitions
            and len({th.rsplit("-", 1)[0] for th, _czxid in owners.values()}) == len(held)
        )

    def held_twice(self) -> list[tuple[float, TopicPartition, tuple[str, ...]]]:
        out: list[tuple[float, TopicPartition, tuple[str, ...]]] = []
        for s in self.samples:
            holders: dict[TopicPartition, list[str]] = {}
            for m, tps in s.holdings.items():
                for tp in tps:
                    holders.setdefault(tp, []).append(m)
            out.extend((s.at, tp, tuple(sorted(ms))) for tp, ms in sorted(holders.items()) if len(ms) > 1)
        return out

    def kept_through(self, start: int, end: int) -> dict[TopicPartition, str]:
        """Partitions whose owner znode has the same payload and czxid at sample `start` and at sample `end`
        (indexes into `samples`): the ones whose holder stayed across that change."""
        a, b = self.samples[start].owners, self.samples[end].owners
        return {tp: consumer_of_thread(state[0]) for tp, state in a.items() if b.get(tp) == state}


__all__ = ["HandoverSampler", "Sample", "legacy_holdings"]
