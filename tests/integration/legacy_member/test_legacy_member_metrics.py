"""A legacy member's /metrics endpoint, scraped over HTTP and parsed: after two members converge on a real
ZooKeeper, each reports its rebalances and their duration, its owned partitions, its ZooKeeper requests by
operation and a connected session; a second member joining adds a rebalance to the first."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from zkcoord.metrics import MemberMetrics
from zkcoord.testing import wait_for

pytestmark = pytest.mark.integration


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode("utf-8")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def one(samples: dict, name: str, **labels: str) -> float:
    found = [
        v for (n, ls), v in samples.items() if n == name and all((k, v2) in ls for k, v2 in labels.items())
    ]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def requests(samples: dict) -> float:
    return sum(v for (n, _), v in samples.items() if n == "zkcoord_legacy_zookeeper_requests_total")


def scrape_when(url: str, ready: Callable[[dict], bool], what: str) -> dict:
    """The first scrape `ready` accepts. A rebalance's counters move in two steps (the install counts
    `rebalances` with the ownership, the duration summary is counted after the rebalance settles): a scrape
    taken as soon as the ownership shows can fall between them, so wait for the scrape itself."""
    last: dict = {}

    def check() -> bool:
        nonlocal last
        last = scrape(url)
        return ready(last)

    wait_for(check, 20, what)
    return last


def completed(samples: dict) -> float:
    return one(samples, "zkcoord_legacy_rebalance_duration_seconds_count")


def test_member_metrics_follow_rebalances_and_ownership(zk, kit, member_factory) -> None:
    kit.register_broker(zk)
    kit.make_topic(zk, "t", 4)
    first = member_factory("g", {"t": 1}, consumer_id="c0")
    endpoint = MemberMetrics(first).serve("127.0.0.1", 0)
    url = f"http://{endpoint.host}:{endpoint.port}/metrics"
    try:
        before = scrape_when(
            url,
            lambda s: one(s, "zkcoord_legacy_owned_partitions") == 4 and completed(s) >= 1,
            "c0 to own all 4 partitions and its rebalance to complete",
        )
        rebalances = one(before, "zkcoord_legacy_rebalances_total")
        assert rebalances >= 1
        assert one(before, "zkcoord_legacy_rebalance_duration_seconds_sum") > 0
        assert one(before, "zkcoord_legacy_zookeeper_requests_total", op="create") >= 1  # the ids znode
        assert (
            one(before, "zkcoord_legacy_zookeeper_requests_total", op="multi") >= 1
        )  # fast mode's batched claim
        assert one(before, "zkcoord_legacy_zookeeper_session", state="CONNECTED") == 1
        assert one(before, "zkcoord_legacy_commit_failures_total") == 0

        second = member_factory("g", {"t": 1}, consumer_id="c1")
        wait_for(lambda: len(first.owned()) == 2 and len(second.owned()) == 2, 20, "a 2/2 split")
        after = scrape_when(
            url, lambda s: completed(s) > completed(before), "c0's second rebalance to complete"
        )
        assert one(after, "zkcoord_legacy_owned_partitions") == 2
        assert one(after, "zkcoord_legacy_rebalances_total") > rebalances
        assert requests(after) > requests(before)
    finally:
        endpoint.stop()
