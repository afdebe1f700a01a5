"""Partition increase planning (AdminUtils.addPartitions): existing replicas kept, new ones placed round-robin."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.compare.partitions import grown_assignment
from zkcoord.errors import ConfigError


def test_single_replica_topic_grows_round_robin_from_partition_zero_leader():
    # Partition p leads on the (i0 + p)-th broker in id order, i0 = position of partition 0's first replica.
    existing = {0: [2], 1: [3], 2: [1]}
    assert grown_assignment(existing, 6, [3, 1, 2]) == {
        0: (2,), 1: (3,), 2: (1,), 3: (2,), 4: (3,), 5: (1,),
    }  # fmt: skip


def test_replication_factor_is_taken_from_partition_zero():
    assert grown_assignment({0: [1, 2]}, 3, [1, 2, 3]) == {0: (1, 2), 1: (2, 3), 2: (3, 1)}


@pytest.mark.parametrize(
    ("existing", "partitions", "brokers", "message"),
    [
        ({0: [1], 1: [1]}, 2, [1], "needs more than 2 partitions, got 2"),
        ({0: [1]}, 0, [1], "needs more than 1 partitions, got 0"),
        ({0: [1]}, 3, [], "no live broker"),
        ({0: [1, 2]}, 3, [1], "replication factor 2 exceeds the 1 live brokers"),
        ({1: [1]}, 3, [1], "existing partitions must be 0..n-1, got [1]"),
        ({}, 3, [1], "existing partitions must be 0..n-1, got []"),
    ],
)
def test_refused_with_a_precise_reason(existing, partitions, brokers, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        grown_assignment(existing, partitions, brokers)


@given(
    n=st.integers(1, 20),
    extra=st.integers(1, 30),
    brokers=st.sets(st.integers(0, 50), min_size=1, max_size=6),
    rf=st.integers(1, 3),
    data=st.data(),
)
def test_growth_keeps_old_replicas_and_spreads_new_ones(n, extra, brokers, rf, data):
    ordered = sorted(brokers)
    rf = min(rf, len(ordered))
    existing = {p: data.draw(st.permutations(ordered))[:rf] for p in range(n)}
    out = grown_assignment(existing, n + extra, list(reversed(ordered)))
    assert sorted(out) == list(range(n + extra))
    assert all(out[p] == tuple(existing[p]) for p in range(n))
    new = [out[p] for p in range(n, n + extra)]
    assert all(len(rs) == rf == len(set(rs)) and set(rs) <= brokers for rs in new)
    firsts = [rs[0] for rs in new]
    # Round-robin: consecutive new partitions lead on consecutive brokers, so leaders differ by at most one.
    counts = [firsts.count(b) for b in ordered]
    assert max(counts) - min(counts) <= 1
