"""A fast-mode member leaving make-before-break (`LegacyConsumer.leave`) against real ZooKeeper: it deregisters
first, releases at once what a legacy member gets next, and goes on handing out the partition a broker-protocol
member (a coordinator's `<group>_classic-<hex>` registration) gets next until the coordinator's hand-over hint
for it appears; then it commits and releases it and closes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from zkcoord.bridge.mixed_policy import ClassicMember, encode_classic_registration
from zkcoord.legacy import paths
from zkcoord.legacy.rebalance import TopicPartition
from zkcoord.testing import wait_for

pytestmark = pytest.mark.integration

TOPIC = "t"
GROUP = "leave-g"
CLASSIC = f"{GROUP}_classic-0000000012345678"  # sorts before GROUP_x and GROUP_y: range gives it 0-1


def _with_a_classic_member(zk: Any, kit: Any, partitions: int) -> None:
    """A registered broker, the topic with `partitions` partitions, and a classic member registered in the group
    (what a fast legacy member leaves to: the coordinator's hint decides when it hands over)."""
    kit.register_broker(zk)
    kit.make_topic(zk, TOPIC, partitions)
    zk.create(
        paths.id_path(GROUP, CLASSIC),
        encode_classic_registration(ClassicMember("m", "c", (TOPIC,)), 0),
        ephemeral=True,
        makepath=True,
    )


def test_a_leaving_member_consumes_what_a_broker_protocol_member_gets_until_its_hand_over_waits(
    zk, kit, member_factory
):
    _with_a_classic_member(zk, kit, 6)
    x = member_factory(GROUP, {TOPIC: 1}, consumer_id="x", mode="fast", fetcher_factory=kit.FakeFetcher)
    y = member_factory(GROUP, {TOPIC: 1}, consumer_id="y", mode="fast", fetcher_factory=kit.FakeFetcher)
    tp = [TopicPartition(TOPIC, p) for p in range(6)]
    wait_for(
        lambda: set(x.owned()) == {tp[2], tp[3]} and set(y.owned()) == {tp[4], tp[5]}, 30, "x 2-3, y 4-5"
    )
    wait_for(lambda: x.is_stable() and y.is_stable(), 30, "both stable")

    got: list[tuple[int, int]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set() and not x._closed:
            msg = x.next_message(0.05)
            if msg is not None:
                got.append((msg.partition, msg.offset))
            stop.wait(0.002)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    leaving = threading.Thread(target=x.leave, kwargs={"timeout": 30.0}, daemon=True)
    try:
        leaving.start()
        # Deregistered first; 3 goes to the legacy member y at once; 2 (the classic member's next) stays x's.
        wait_for(lambda: zk.exists(paths.id_path(GROUP, f"{GROUP}_x")) is None, 10, "x deregistered")
        wait_for(lambda: set(y.owned()) == {tp[3], tp[4], tp[5]}, 30, "y to claim 3")
        assert set(x.owned()) == {tp[2]}
        assert kit.owners(zk, GROUP, TOPIC)[2][0] == f"{GROUP}_x-0"
        before = sum(1 for p, _ in got if p == 2)
        wait_for(lambda: sum(1 for p, _ in got if p == 2) > before + 10, 10, "x to go on handing out 2")
        assert leaving.is_alive()
        # The coordinator's hand-over waits for 2: x releases it at once and closes.
        zk.create(paths.wanted_path(GROUP, TOPIC, 2), b"", ephemeral=True, makepath=True)
        wait_for(lambda: 2 not in kit.owners(zk, GROUP, TOPIC), 10, "x to release 2 on the hint")
        leaving.join(10)
        assert not leaving.is_alive() and x.owned() == {}
        assert set(y.owned()) == {tp[3], tp[4], tp[5]}  # y never lost what it kept
    finally:
        stop.set()
        reader.join(5)
    x.close()
    assert x._closed


def test_without_a_hint_a_leaving_member_releases_at_its_deadline(zk, kit, member_factory):
    _with_a_classic_member(zk, kit, 2)
    x = member_factory(GROUP, {TOPIC: 1}, consumer_id="x", mode="fast", fetcher_factory=kit.FakeFetcher)
    wait_for(lambda: set(x.owned()) == {TopicPartition(TOPIC, 1)} and x.is_stable(), 30, "x owns 1")
    assert x.leave(timeout=0.3)
    assert kit.owners(zk, GROUP, TOPIC) == {} and x.owned() == {}
    assert zk.exists(paths.id_path(GROUP, f"{GROUP}_x")) is None
    x.close()
    # Faithful mode (or a rebalance under way): leave() does nothing and says so; close() is the way out.
    y = member_factory(GROUP, {TOPIC: 1}, consumer_id="y", mode="faithful", fetcher_factory=kit.FakeFetcher)
    wait_for(lambda: y.is_stable(), 30, "y stable")
    assert not y.leave(timeout=0.3)
    assert zk.exists(paths.id_path(GROUP, f"{GROUP}_y")) is not None
