"""Legacy assignors: the documented examples, exhaustive small cases and hypothesis, all checked by one
invariant checker; plus the generation rules and determinism."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.errors import ConfigError
from zkcoord.legacy import RoundRobinSubscriptionError, assign, owned_by, strategy_for
from zkcoord.legacy.assignment import hash_ordered
from zkcoord.legacy.ids import java_hash

from .invariants import check_decision


def run(strategy: str, consumers, partitions, gen: str = "0.10.2", identical: bool = False):  # type: ignore[no-untyped-def]
    decision = assign(strategy, consumers, partitions, roundrobin_generation=gen)
    check_decision(strategy, consumers, partitions, decision, identical=identical)
    return decision


def test_range_documentation_example() -> None:
    d = run("range", {"C1": {"t": 2}, "C2": {"t": 2}}, {"t": [0, 1, 2, 3, 4]})
    assert d == {("t", 0): "C1-0", ("t", 1): "C1-0", ("t", 2): "C1-1", ("t", 3): "C2-0", ("t", 4): "C2-1"}


def test_range_uses_java_thread_order() -> None:
    # 11 streams: c-10 sorts before c-2, so it gets the third partition
    d = run("range", {"c": {"t": 11}}, {"t": list(range(11))})
    assert d[("t", 2)] == "c-10" and d[("t", 3)] == "c-2"


def test_range_more_threads_than_partitions() -> None:
    d = run("range", {"a": {"t": 2}, "b": {"t": 2}}, {"t": [0, 1]})
    assert d == {("t", 0): "a-0", ("t", 1): "a-1"}


def test_missing_topic_and_empty_subscription() -> None:
    d = run("range", {"a": {"t": 1, "gone": 1}, "idle": {}}, {"t": [1, 0]})
    assert d == {("t", 0): "a-0", ("t", 1): "a-0"}
    assert owned_by("idle", d) == {}
    assert run("roundrobin", {"idle": {}}, {"t": [0]}, "0.8.2") == {}


def test_roundrobin_docstring_example_and_skip() -> None:
    d = run("roundrobin", {"a": {"t": 1, "u": 1}, "b": {"t": 1}}, {"t": [0, 1, 2], "u": [0, 1]})
    assert d == {("t", 0): "a-0", ("t", 1): "b-0", ("t", 2): "a-0", ("u", 0): "a-0", ("u", 1): "a-0"}


def test_roundrobin_hash_order() -> None:
    tps = hash_ordered([("topic1", 0), ("t", 5), ("t", 0)])
    hashes = [java_hash(f"[{t},{p}]") for t, p in tps]
    assert hashes == sorted(hashes)
    assert java_hash("[topic1,0]") == -315570884


def test_roundrobin_tie_break_is_topic_then_partition() -> None:
    # "Aa" and "BB" have equal Java hashes, so "[Aa,0]" and "[BB,0]" collide.
    assert java_hash("[Aa,0]") == java_hash("[BB,0]")
    assert hash_ordered([("BB", 0), ("Aa", 0)]) == [("Aa", 0), ("BB", 0)]
    d1 = run("roundrobin", {"x": {"Aa": 1, "BB": 1}, "y": {"Aa": 1, "BB": 1}}, {"BB": [0], "Aa": [0]})
    assert d1 == {("Aa", 0): "x-0", ("BB", 0): "y-0"}


def test_roundrobin_0_8_2_requires_identical_subscriptions() -> None:
    with pytest.raises(RoundRobinSubscriptionError) as info:
        assign(
            "roundrobin", {"a": {"t": 1, "u": 1}, "b": {"t": 1}}, {"t": [0]}, roundrobin_generation="0.8.2"
        )
    assert info.value.differing == ("b",)
    assert "Round-robin assignment is allowed only if" in str(info.value)
    assert isinstance(info.value, ConfigError)
    # different stream counts per topic for one consumer also break it
    with pytest.raises(RoundRobinSubscriptionError) as info:
        assign(
            "roundrobin", {"a": {"t": 1, "u": 2}, "b": {"t": 1, "u": 1}}, {}, roundrobin_generation="0.8.2"
        )
    assert info.value.differing == ("a",)
    # members may differ from each other in stream count
    run(
        "roundrobin",
        {"a": {"t": 2, "u": 2}, "b": {"t": 1, "u": 1}},
        {"t": [0, 1, 2], "u": [0]},
        "0.8.2",
        True,
    )


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError, match="strategy"):
        assign("sticky", {}, {})
    with pytest.raises(ConfigError, match="roundrobin_generation"):
        assign("roundrobin", {}, {}, roundrobin_generation="0.9")
    with pytest.raises(ConfigError, match="stream count"):
        assign("range", {"a": {"t": 0}}, {})
    with pytest.raises(ConfigError, match="duplicate"):
        assign("range", {"a": {"t": 1}}, {"t": [0, 0]})
    assert strategy_for("roundrobin") == "roundrobin"
    assert strategy_for("RoundRobin") == "range"  # the old consumer: anything else is range


def test_owned_by_splits_the_decision() -> None:
    d = run("range", {"g_a-1": {"t": 2}, "g_a": {"t": 1}}, {"t": list(range(6))})
    parts = [owned_by(c, d) for c in ("g_a-1", "g_a")]
    assert sum(len(p) for p in parts) == 6
    assert all(th.startswith("g_a-1-") for th in parts[0].values())
    assert set(parts[1].values()) == {"g_a-0"}


# --- exhaustive small cases ---------------------------------------------------------------------------------

TOPICS = ["t0", "t1", "t2"]


def _small_groups() -> Iterator[dict[str, dict[str, int]]]:
    for n_consumers in range(1, 5):
        for streams in itertools.product(range(1, 4), repeat=n_consumers):
            for n_topics in range(1, 4):
                yield {f"c{i}": dict.fromkeys(TOPICS[:n_topics], s) for i, s in enumerate(streams)}


def test_exhaustive_identical_subscriptions() -> None:
    cases = 0
    for consumers in _small_groups():
        for n_parts in range(9):
            partitions = {t: list(range(n_parts - i)) if n_parts >= i else [] for i, t in enumerate(TOPICS)}
            for strategy, gen in [("range", "0.10.2"), ("roundrobin", "0.8.2"), ("roundrobin", "0.10.2")]:
                d = run(strategy, consumers, partitions, gen, identical=True)
                cases += 1
            # with identical subscriptions the two round-robin generations agree
            assert assign("roundrobin", consumers, partitions, roundrobin_generation="0.8.2") == d
    assert cases > 3000


def test_exhaustive_differing_subscriptions() -> None:
    subsets = [dict.fromkeys(c, 1) for r in range(4) for c in itertools.combinations(TOPICS, r)]
    for n_consumers in range(1, 4):
        for subs in itertools.product(subsets, repeat=n_consumers):
            consumers = {f"c{i}": s for i, s in enumerate(subs)}
            for n_parts in range(0, 9, 2):
                partitions = {t: list(range(n_parts)) for t in TOPICS}
                run("range", consumers, partitions)
                run("roundrobin", consumers, partitions, "0.10.2")


# --- hypothesis ---------------------------------------------------------------------------------------------

names = st.text(alphabet="ab-_1\u00e9\U0001f600", min_size=1, max_size=4)
topic_names = st.sampled_from(["x", "y", "z", "Aa", "BB", "topic1"])
groups = st.dictionaries(
    names, st.dictionaries(topic_names, st.integers(1, 3), max_size=3), min_size=1, max_size=5
)
partition_maps = st.dictionaries(
    topic_names, st.lists(st.integers(0, 40), unique=True, max_size=10), max_size=6
)


@given(groups, partition_maps, st.sampled_from(["range", "roundrobin"]), st.randoms(use_true_random=False))
def test_properties(consumers, partitions, strategy, rnd: random.Random) -> None:  # type: ignore[no-untyped-def]
    d = run(strategy, consumers, partitions)

    # determinism: the dict order of every input level does not matter
    def shuffled(m: dict[Any, Any]) -> dict[Any, Any]:
        items = list(m.items())
        rnd.shuffle(items)
        return dict(items)

    consumers2 = shuffled({c: shuffled(s) for c, s in consumers.items()})
    partitions2 = shuffled({t: rnd.sample(ps, len(ps)) for t, ps in partitions.items()})
    assert assign(strategy, consumers2, partitions2) == d
    assert list(assign(strategy, consumers2, partitions2)) == list(d)
    # the members' own parts add up to the decision
    merged: dict[tuple[str, int], str] = {}
    for c in consumers:
        merged.update(owned_by(c, d))
    assert merged == d


@given(
    st.dictionaries(names, st.integers(1, 3), min_size=1, max_size=5),
    st.lists(topic_names, min_size=1, max_size=3, unique=True),
    partition_maps,
)
def test_identical_roundrobin_properties(counts, topics, partitions) -> None:  # type: ignore[no-untyped-def]
    consumers = {c: dict.fromkeys(topics, n) for c, n in counts.items()}
    d = run("roundrobin", consumers, partitions, "0.8.2", identical=True)
    assert d == assign("roundrobin", consumers, partitions, roundrobin_generation="0.10.2")


def test_docstring_examples() -> None:
    import doctest

    from zkcoord.legacy import assignment

    result = doctest.testmod(assignment)
    assert result.attempted >= 2 and result.failed == 0
