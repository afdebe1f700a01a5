"""The one invariant checker every legacy assignor test runs on its result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from zkcoord.legacy.ids import consumer_of_thread, thread_ids


def check_decision(
    strategy: str,
    consumers: Mapping[str, Mapping[str, int]],
    partitions: Mapping[str, Sequence[int]],
    decision: Mapping[tuple[str, int], str],
    *,
    identical: bool = False,
) -> None:
    """Every partition of a subscribed topic owned exactly once, only by a thread subscribed to its topic,
    and balanced as the strategy promises (per topic for range; group-wide for round-robin with identical
    subscriptions)."""
    subscribed = {t for subs in consumers.values() for t in subs}
    expected = {(t, p) for t in subscribed for p in partitions.get(t, ())}
    assert set(decision) == expected, (
        f"owned {sorted(decision)} != partitions of subscribed topics {sorted(expected)}"
    )
    for (topic, _p), thread in decision.items():
        consumer = consumer_of_thread(thread)
        assert consumer in consumers, f"{thread} is not a thread of a member"
        assert thread in thread_ids(consumer, consumers[consumer].get(topic, 0)), (
            f"{thread} not subscribed to {topic}"
        )
    if strategy == "range":
        for topic in subscribed:
            threads = [th for c in consumers for th in thread_ids(c, consumers[c].get(topic, 0))]
            counts = Counter(th for (t, _), th in decision.items() if t == topic)
            per = [counts.get(th, 0) for th in threads]
            assert max(per) - min(per) <= 1, f"range unbalanced on {topic}: {per}"
    elif identical:
        all_threads = {th for c in consumers for t in consumers[c] for th in thread_ids(c, consumers[c][t])}
        counts = Counter(decision.values())
        per = [counts.get(th, 0) for th in all_threads]
        if per:
            assert max(per) - min(per) <= 1, f"round-robin unbalanced: {per}"
