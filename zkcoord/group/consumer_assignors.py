"""The consumer protocol's server-side assignors (KIP-848): `uniform` and `range`, pure functions of the group.

An assignor sees every member's subscribed topic ids, the partition counts of those topics and the current target
assignment, and returns the new target: member id -> topic id -> partitions. Inputs are iterated in sorted order
only, so the same group always gets the same target.

- `uniform` (Kafka's UniformAssignor): every partition of a subscribed topic goes to one of its subscribers, and
  among the members that can take a partition the counts differ by at most one where the subscriptions allow it.
  Sticky: a partition stays with its current target owner while that owner is subscribed and under its quota.
- `range` (Kafka's server-side RangeAssignor): per topic, the subscribers sorted by member id receive contiguous
  ranges, the first `partitions % subscribers` one partition more (as the classic `range` assignor).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping

Assignment = dict[str, dict[str, frozenset[int]]]  # member id -> topic id -> partitions
UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


def assign(
    name: str,
    subscriptions: Mapping[str, frozenset[str]],  # member id -> subscribed topic ids (only existing topics)
    partitions: Mapping[str, int],  # topic id -> partition count
    current: Mapping[str, Mapping[str, frozenset[int]]],  # the previous target
) -> Assignment:
    """The target assignment by assignor `name` (one of ASSIGNORS)."""
    if name == RANGE:
        return _range(subscriptions, partitions)
    if name == UNIFORM:
        return _uniform(subscriptions, partitions, current)
    raise ValueError(f"unknown assignor {name!r}")


def _freeze(out: dict[str, dict[str, set[int]]]) -> Assignment:
    return {
        m: {t: frozenset(ps) for t, ps in sorted(topics.items()) if ps} for m, topics in sorted(out.items())
    }


def _range(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int]) -> Assignment:
    out: dict[str, dict[str, set[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, subs in subscriptions.items() if topic in subs)
        if not members:
            continue
        count = partitions[topic]
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][topic] = set(range(start, start + n))
            start += n
    return _freeze(out)


def _uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, frozenset[int]]],
) -> Assignment:
    members = sorted(subscriptions)
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    subscribed_topics = {t for s in subscriptions.values() for t in s if t in partitions}
    wanted = sorted((t, p) for t in subscribed_topics for p in range(partitions[t]))
    if not members or not wanted:
        return _freeze(out)
    # Each member's fair share of what it can take: partitions of its topics over the members competing for them.
    # Computed per distinct subscription (usually one), not per member pair: a join into 1,000 members stays cheap.
    classes = Counter(frozenset(t for t in s if t in partitions) for s in subscriptions.values())
    share: dict[frozenset[str], int] = {}
    for mine in classes:
        total = sum(partitions[t] for t in mine)
        rivals = sum(n for other, n in classes.items() if other & mine)
        share[mine] = -(-total // max(1, rivals))  # ceil
    quota = {m: share[frozenset(t for t in subscriptions[m] if t in partitions)] for m in members}
    previous = {(t, p): m for m in members for t, ps in current.get(m, {}).items() for p in ps}
    free: list[tuple[str, int]] = []
    for t, p in wanted:
        owner = previous.get((t, p))
        if owner is not None and t in subscriptions[owner] and load[owner] < quota[owner]:
            out[owner].setdefault(t, set()).add(p)
            load[owner] += 1
        else:
            free.append((t, p))
    # The rest to the least loaded subscriber (ties: member id), from one lazy heap per topic.
    heaps: dict[str, list[tuple[int, str]]] = {
        t: [(load[m], m) for m in members if t in subscriptions[m]] for t in sorted(subscribed_topics)
    }
    for heap in heaps.values():
        heapq.heapify(heap)
    for t, p in free:
        heap = heaps[t]
        while heap[0][0] != load[heap[0][1]]:  # stale: that member took partitions since
            stale = heapq.heappop(heap)
            heapq.heappush(heap, (load[stale[1]], stale[1]))
        _, target = heapq.heappop(heap)
        out[target].setdefault(t, set()).add(p)
        load[target] += 1
        heapq.heappush(heap, (load[target], target))
    _rebalance(out, load, subscriptions)
    return _freeze(out)


def _rebalance(
    out: dict[str, dict[str, set[int]]], load: dict[str, int], subscriptions: Mapping[str, frozenset[str]]
) -> None:
    """Move single partitions from the most to the least loaded member that can take them until no move narrows
    the spread (bounded: each move lowers the sum of squared loads, at most total**2 moves). Returns at once when
    the loads are within one of each other, as the greedy placement leaves homogeneous subscriptions."""
    total = sum(load.values())
    for _ in range(total * total + 1):
        order = sorted(load, key=lambda m: (load[m], m))
        lowest = load[order[0]]
        moved = False
        for giver in reversed(order):
            if load[giver] - lowest < 2:
                break
            for taker in order:
                if load[giver] - load[taker] < 2:
                    break
                movable = sorted(
                    (t, p) for t, ps in out[giver].items() if t in subscriptions[taker] for p in ps
                )
                if movable:
                    t, p = movable[-1]
                    out[giver][t].discard(p)
                    out[taker].setdefault(t, set()).add(p)
                    load[giver] -= 1
                    load[taker] += 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return
