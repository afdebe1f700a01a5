"""The `consumer-confluent` protocol (KIP-848) in comparison scenarios: its server-side assignors are its strategies,
a shared (bridged) group refuses it, and the pure simulation plays it through zkcoord's own consumer assignors."""

from __future__ import annotations

import random

import pytest

from migration.compare import simulate as sim
from migration.compare.scenario import PROTOCOLS, Family, builtin_scenario, parse_scenario
from zkcoord.errors import ConfigError

BASE = """
name: kip848
duration_s: 10
topics: [{name: orders, partitions: 6}]
producer: {rate_per_s: 10, duration_s: 5}
protocols:
  consumer-confluent: {members: 3, strategy: STRATEGY}
churn:
  - {at_s: 2, event: join}
  - {at_s: 4, event: crash, member: 0}
"""


def test_the_server_assignors_are_its_strategies() -> None:
    assert PROTOCOLS["consumer-confluent"] is Family.CONSUMER
    for strategy in ("uniform", "range"):
        sc = parse_scenario(BASE.replace("STRATEGY", strategy), "t")
        assert [(p.protocol, p.family, p.strategy) for p in sc.protocols] == [
            ("consumer-confluent", Family.CONSUMER, strategy)
        ]
    with pytest.raises(ConfigError, match=r"protocols.consumer-confluent.strategy.*uniform, range"):
        parse_scenario(BASE.replace("STRATEGY", "cooperative-sticky"), "t")


def test_a_shared_group_refuses_consumer_protocol_members() -> None:
    text = BASE.replace("STRATEGY", "range").replace("name: kip848", "name: kip848\ngroup: shared")
    with pytest.raises(ConfigError, match="consumer-protocol"):
        parse_scenario(text, "t")


@pytest.mark.parametrize("strategy", ["uniform", "range"])
def test_the_simulation_plays_it_incrementally(strategy: str) -> None:
    sc = parse_scenario(BASE.replace("STRATEGY", strategy), "t")
    steps = sim.scenario_steps(sc, sim.make_assignor, random.Random(1))
    assert [s.event for s in steps] == ["join", "crash"]
    assert all(s.assignor == f"consumer/{strategy}" and s.imbalance <= 1 for s in steps)
    # Incremental: a member joining stops only the partitions that move, never the whole group's.
    join = steps[0]
    assert join.stopped == join.moved < 6


def test_the_mixed_builtin_compares_it_with_the_others() -> None:
    assert "consumer-confluent" in {p.protocol for p in builtin_scenario("mixed").protocols}


def test_the_sweep_offers_the_consumer_family() -> None:
    assignors, missing = sim.available_assignors(("consumer",))
    assert ([a.label for a in assignors], missing) == (["consumer/uniform", "consumer/range"], [])
    assert all(a.cooperative for a in assignors)
