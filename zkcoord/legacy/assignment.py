"""The old consumer's assignors (range; round-robin in its 0.8.2 and 0.10.2 forms) as one pure, deterministic
function computing the whole group's decision, exactly as every legacy member computes it from ZooKeeper.

Inputs are what a member reads: each member's topic -> stream count (wildcards already resolved to topics) and
each topic's partition ids. Output maps every assigned (topic, partition) to the owning thread id
`<consumerId>-<n>`. The result never depends on the iteration order of the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

from zkcoord.errors import ConfigError
from zkcoord.legacy.ids import consumer_of_thread, java_hash, java_sorted, thread_ids, utf16_key
from zkcoord.topic_partition import TopicPartition

Decision = dict[TopicPartition, str]
Strategy = Literal["range", "roundrobin"]
RoundRobinGeneration = Literal["0.8.2", "0.10.2"]
STRATEGIES: Final = ("range", "roundrobin")
ROUNDROBIN_GENERATIONS: Final = ("0.8.2", "0.10.2")


class RoundRobinSubscriptionError(ConfigError):
    """0.8.2-0.10.1 round-robin needs identical subscriptions; names the consumers that differ."""

    def __init__(self, differing: Sequence[str], detail: str) -> None:
        super().__init__(
            "Round-robin assignment is allowed only if all consumers in the group subscribe to the same topics, "
            "AND if the stream counts across topics are identical for a given consumer instance. "
            f"Differing consumers: {', '.join(differing)}. {detail}"
        )
        self.differing = tuple(differing)


def strategy_for(config_value: str) -> Strategy:
    """`partition.assignment.strategy` as the old consumer reads it: "roundrobin", anything else is range."""
    return "roundrobin" if config_value == "roundrobin" else "range"


def assign(
    strategy: str,
    consumers: Mapping[str, Mapping[str, int]],
    partitions: Mapping[str, Sequence[int]],
    *,
    roundrobin_generation: str = "0.10.2",
) -> Decision:
    """The group-wide decision: TopicPartition (a `(topic, partition)` NamedTuple) -> owning thread id.

    `consumers`: consumer id -> {topic: stream count >= 1} (an empty map subscribes to nothing and owns
    nothing). `partitions`: topic -> partition ids; a subscribed topic missing here has no partitions.
    Threads are ordered by Java `String.compareTo` (`c-10` sorts before `c-2`), partitions numerically.

    **range** (per topic): the topic's threads T (every subscriber's threads, Java order) and sorted partitions
    P; thread at position i gets `len(P)//len(T)` partitions starting at `n*i + min(i, extra)`, plus one if
    `i < len(P) % len(T)`. Kafka's documented example — C1 and C2 with two streams each, partitions 0..4::

        >>> decision = assign("range", {"C1": {"t": 2}, "C2": {"t": 2}}, {"t": [0, 1, 2, 3, 4]})
        >>> {str(tp): thread for tp, thread in decision.items()}
        {'[t,0]': 'C1-0', '[t,1]': 'C1-0', '[t,2]': 'C1-1', '[t,3]': 'C2-0', '[t,4]': 'C2-1'}
        >>> decision[("t", 3)]  # keys are also plain pairs
        'C2-0'

    **roundrobin**: all (topic, partition) of subscribed topics, ordered by Java `String.hashCode` of
    `"[topic,partition]"` (signed), dealt to the threads in Java order through one circular cursor.
    Tie-break for equal hashes (Kafka keeps the order of a Scala HashMap, which nothing can reproduce): topic in
    Java String order, then partition number. Generation "0.8.2" (0.8.2-0.10.1) requires every topic to have
    the identical thread set, else `RoundRobinSubscriptionError` naming the differing consumers; generation
    "0.10.2" (KAFKA-2434) skips threads not subscribed to the partition's topic, the cursor moving past the
    chosen thread::

        >>> decision = assign("roundrobin", {"a": {"t": 1, "u": 1}, "b": {"t": 1}}, {"t": [0, 1, 2], "u": [0, 1]})
        >>> {str(tp): thread for tp, thread in decision.items()}
        {'[t,0]': 'a-0', '[t,1]': 'b-0', '[t,2]': 'a-0', '[u,0]': 'a-0', '[u,1]': 'a-0'}

    Here the hash order is [t,0] < [t,1] < [t,2] < [u,0] < [u,1] (87540032 ... 87569854); for [u,0] and
    [u,1] the cursor stands on b-0, which is not subscribed to u, so it is skipped. With generation "0.8.2"
    this input raises, because b's thread set differs between t and u.
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"assignment strategy must be one of {STRATEGIES}, got {strategy!r}")
    if roundrobin_generation not in ROUNDROBIN_GENERATIONS:
        raise ConfigError(
            f"roundrobin_generation must be one of {ROUNDROBIN_GENERATIONS}, got {roundrobin_generation!r}"
        )
    threads_for_topic = consumers_for_topic(consumers)
    parts = {t: _sorted_partitions(t, partitions.get(t, ())) for t in threads_for_topic}
    if strategy == "range":
        decision = _range(threads_for_topic, parts)
    elif roundrobin_generation == "0.8.2":
        decision = _roundrobin_identical(threads_for_topic, parts)
    else:
        decision = _roundrobin_any(threads_for_topic, parts)
    return {tp: decision[tp] for tp in sorted(decision, key=lambda tp: (utf16_key(tp.topic), tp.partition))}


def owned_by(consumer_id: str, decision: Mapping[TopicPartition, str]) -> Decision:
    """The part of a group decision owned by the threads of one consumer."""
    return {tp: th for tp, th in decision.items() if consumer_of_thread(th) == consumer_id}


def consumers_for_topic(consumers: Mapping[str, Mapping[str, int]]) -> dict[str, list[str]]:
    """`AssignmentContext.consumersForTopic`: topic -> every subscriber's thread ids in Java order; topics in
    Java order. Stream counts must be ints >= 1."""
    out: dict[str, list[str]] = {}
    for consumer in java_sorted(consumers):
        for topic, count in consumers[consumer].items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(
                    f"consumer {consumer!r} topic {topic!r}: stream count must be >= 1, got {count!r}"
                )
            out.setdefault(topic, []).extend(thread_ids(consumer, count))
    return {t: java_sorted(out[t]) for t in java_sorted(out)}


def hash_ordered(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Round-robin order: Java hash of "[topic,partition]", then topic (Java order), then partition."""
    # Indexed, not by attribute: plain (topic, partition) pairs are accepted too.
    return sorted(tps, key=lambda tp: (java_hash(f"[{tp[0]},{tp[1]}]"), utf16_key(tp[0]), tp[1]))


def _sorted_partitions(topic: str, ids: Sequence[int]) -> list[int]:
    for p in ids:
        if isinstance(p, bool) or not isinstance(p, int) or p < 0:
            raise ConfigError(f"topic {topic!r}: partition ids must be ints >= 0, got {p!r}")
    if len(set(ids)) != len(ids):
        raise ConfigError(f"topic {topic!r}: duplicate partition ids in {sorted(ids)}")
    return sorted(ids)


def _range(threads_for_topic: Mapping[str, list[str]], parts: Mapping[str, list[int]]) -> Decision:
    decision: Decision = {}
    for topic, threads in threads_for_topic.items():
        ps = parts[topic]
        n, extra = divmod(len(ps), len(threads))
        for pos, thread in enumerate(threads):
            start = n * pos + min(pos, extra)
            count = n + (1 if pos < extra else 0)
            for p in ps[start : start + count]:
                decision[TopicPartition(topic, p)] = thread
    return decision


def _all_tps(parts: Mapping[str, list[int]]) -> list[TopicPartition]:
    return hash_ordered(TopicPartition(t, p) for t, ps in parts.items() for p in ps)


def _roundrobin_identical(
    threads_for_topic: Mapping[str, list[str]], parts: Mapping[str, list[int]]
) -> Decision:
    if not threads_for_topic:
        # 0.8.2 itself threw here (`.head` of an empty map); KAFKA-1648 made it an empty decision.
        return {}
    first_topic, first = next(iter(threads_for_topic.items()))
    reference = set(first)
    differing: set[str] = set()
    details = []
    for topic, threads in threads_for_topic.items():
        if set(threads) != reference:
            differing.update(consumer_of_thread(th) for th in set(threads) ^ reference)
            details.append(f"Topic {topic} has the following available consumer streams: {threads}")
    if differing:
        details.insert(0, f"Topic {first_topic} has the following available consumer streams: {first}")
        raise RoundRobinSubscriptionError(java_sorted(differing), "; ".join(details))
    decision: Decision = {}
    tps = _all_tps(parts)
    for i, tp in enumerate(tps):
        decision[tp] = first[i % len(first)]
    return decision


def _roundrobin_any(threads_for_topic: Mapping[str, list[str]], parts: Mapping[str, list[int]]) -> Decision:
    all_threads = java_sorted({th for threads in threads_for_topic.values() for th in threads})
    subscribed = {t: set(threads) for t, threads in threads_for_topic.items()}
    decision: Decision = {}
    cursor = 0
    for tp in _all_tps(parts):
        # Iterator.dropWhile(not subscribed).next on a circular iterator: every topic here has a subscriber.
        while all_threads[cursor] not in subscribed[tp.topic]:
            cursor = (cursor + 1) % len(all_threads)
        decision[tp] = all_threads[cursor]
        cursor = (cursor + 1) % len(all_threads)
    return decision
