"""The legacy TopicPartition is one type for the planner, the assignor and the registry, and still the plain
(topic, partition) pair that callers unpack, index with and sort."""

from hypothesis import given
from hypothesis import strategies as st

from zkcoord.legacy import TopicPartition, assign
from zkcoord.legacy import rebalance as rebalance_module

pairs = st.tuples(st.text("abc._-", min_size=1, max_size=4), st.integers(0, 20))


@given(a=pairs, b=pairs)
def test_behaves_as_the_plain_pair(a, b):
    ta, tb = TopicPartition(*a), TopicPartition(*b)
    assert ta == a and hash(ta) == hash(a)
    assert (ta < tb) == (a < b)
    topic, partition = ta
    assert (topic, partition) == (ta.topic, ta.partition) == a
    assert {a: 1}[ta] == 1 and {ta: 1}[a] == 1


def test_kafka_string_form_and_single_definition():
    assert str(TopicPartition("t", 3)) == "[t,3]"
    assert rebalance_module.TopicPartition is TopicPartition


def test_the_assignor_returns_it():
    decision = assign("range", {"c": {"t": 1}}, {"t": [1, 0]})
    assert list(decision) == [("t", 0), ("t", 1)]
    assert all(type(tp) is TopicPartition for tp in decision)
