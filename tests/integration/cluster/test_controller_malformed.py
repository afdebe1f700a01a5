"""A malformed znode is that znode's problem: the controller keeps electing and assigning everything else."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration, ControllerInfo, PartitionState, TopicAssignment
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.testing import wait_for
from zkcoord.zk.controller import Controller

pytestmark = pytest.mark.integration

NUM_OFFSETS = 4


def _register(client: Any, node_id: int) -> None:
    reg = BrokerRegistration.create("127.0.0.1", 9000 + node_id, timestamp_ms=int(time.time() * 1000))
    client.create(paths.broker_path(node_id), reg.encode(), ephemeral=True, makepath=True)


def _leaders(zk: Any, topic: str) -> dict[int, int]:
    out: dict[int, int] = {}
    if not zk.exists(paths.topic_partitions_path(topic)):
        return out
    for name in zk.get_children(paths.topic_partitions_path(topic)):
        got = zk.exists(paths.partition_state_path(topic, int(name)))
        if got is not None:
            data, _ = zk.get(paths.partition_state_path(topic, int(name)))
            out[int(name)] = PartitionState.decode("state", data).leader
    return out


@pytest.fixture
def controllers(
    zk_client_factory: Callable[..., Any],
) -> Iterator[Callable[[tuple[int, ...]], list[Controller]]]:
    started: list[Controller] = []

    def start(ids: tuple[int, ...]) -> list[Controller]:
        for n in ids:
            client = zk_client_factory(session_timeout_s=4.0)
            _register(client, n)
            ctl = Controller(client, n, offsets_topic_num_partitions=NUM_OFFSETS, resync_interval_s=0.5)
            ctl.start()
            started.append(ctl)
        return started

    yield start
    for ctl in started:
        ctl.close()


def test_unparsable_broker_registration_is_not_live(zk: Any, controllers: Any) -> None:
    # Before: /brokers/ids/99 with garbage counted as a live broker and led offsets partitions.
    zk.create(paths.broker_path(99), b"not json", makepath=True)
    controllers((1, 2))
    wait_for(lambda: len(_leaders(zk, OFFSETS_TOPIC)) == NUM_OFFSETS, 15, "offsets partitions led")
    assert set(_leaders(zk, OFFSETS_TOPIC).values()) == {1, 2}


def test_malformed_topic_or_state_affects_that_topic_only(zk: Any, controllers: Any) -> None:
    # Before: one malformed /brokers/topics/X or partition state aborted every controller pass.
    zk.create(paths.topic_path("bad-assignment"), b"{garbage", makepath=True)
    zk.create(paths.topic_path("bad-state"), TopicAssignment.of({0: [1], 1: [1]}).encode(), makepath=True)
    zk.create(paths.partition_state_path("bad-state", 0), b"not a state", makepath=True)
    controllers((1,))
    wait_for(lambda: len(_leaders(zk, OFFSETS_TOPIC)) == NUM_OFFSETS, 15, "offsets partitions led")
    zk.create(paths.topic_path("good"), TopicAssignment.of({0: [1], 1: [1]}).encode(), makepath=True)
    wait_for(lambda: _leaders(zk, "good") == {0: 1, 1: 1}, 15, "the new topic's leaders")
    assert zk.get(paths.partition_state_path("bad-state", 0))[0] == b"not a state"  # left intact
    assert zk.get(paths.topic_path("bad-assignment"))[0] == b"{garbage"
    # A malformed topic marked for deletion is still deleted.
    zk.create(paths.delete_topic_path("bad-state"), b"", makepath=True)
    wait_for(lambda: zk.exists(paths.topic_path("bad-state")) is None, 15, "bad-state deleted")


def test_malformed_controller_znode_is_removed_and_a_controller_elected(zk: Any, controllers: Any) -> None:
    # Before: a persistent malformed /controller (e.g. left by an operator or a broken tool) prevented any
    # election. Kafka's ZookeeperLeaderElector fails to parse it and resigns, deleting /controller.
    zk.create(paths.CONTROLLER, b"garbage", makepath=True)
    started = controllers((1, 2))
    wait_for(lambda: sum(c.active for c in started) == 1, 15, "one active controller")
    data, stat = zk.get(paths.CONTROLLER)
    assert ControllerInfo.decode(paths.CONTROLLER, data).brokerid in (1, 2)
    assert stat.ephemeralOwner != 0


@pytest.mark.parametrize(
    "rewrite", [b"garbage", ControllerInfo(7, 1).encode()], ids=["unparsable", "names-7"]
)
def test_the_controllers_own_znode_rewritten_is_noticed_and_reelected(
    zk: Any, controllers: Any, rewrite: bytes
) -> None:
    # Before: a `set` on the active controller's own ephemeral /controller (garbage, or another broker's id) was
    # never noticed: the node kept acting as controller while /controller said otherwise, for good.
    (ctl,) = controllers((1,))
    wait_for(lambda: ctl.active, 15, "node 1 to be controller")
    _, before = zk.get(paths.CONTROLLER)
    epoch = ctl.fence.epoch if ctl.fence is not None else -1
    zk.set(paths.CONTROLLER, rewrite, version=before.version)

    def reelected() -> bool:
        got = zk.exists(paths.CONTROLLER)
        if got is None or got.czxid == before.czxid or not ctl.active:
            return False
        return ControllerInfo.decode(paths.CONTROLLER, zk.get(paths.CONTROLLER)[0]).brokerid == 1

    wait_for(reelected, 15, "node 1 to resign, delete the rewritten /controller and win a new election")
    assert ctl.fence is not None and ctl.fence.epoch > epoch


def test_topic_ids_are_given_once_and_a_malformed_id_is_left_intact(zk: Any, controllers: Any) -> None:
    # Kafka 2.8's controller gives a topic znode without an id one; a znode whose topic_id does not parse is that
    # topic's problem: never replaced by a new id (which would change the topic's identity), nor planned.
    bad_id = b'{"version":3,"partitions":{"0":[1]},"topic_id":"not-a-uuid"}'
    zk.create(paths.topic_path("bad-id"), bad_id, makepath=True)
    moving = b'{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{"0":[2]},"removing_replicas":{}}'
    zk.create(paths.topic_path("moving"), moving, makepath=True)
    controllers((1,))
    wait_for(lambda: len(_leaders(zk, OFFSETS_TOPIC)) == NUM_OFFSETS, 15, "offsets partitions led")

    def topic(name: str) -> tuple[TopicAssignment, int]:
        data, stat = zk.get(paths.topic_path(name))
        return TopicAssignment.decode(name, data), stat.version

    wait_for(lambda: topic("moving")[0].topic_id is not None, 15, "an id for the version-2 topic")
    given, version = topic("moving")
    assert given == TopicAssignment.decode("m", moving).with_topic_id(given.topic_id)  # type: ignore[arg-type]
    assert given.adding_replicas == ((0, (2,)),) and version == 1
    offsets, _ = topic(OFFSETS_TOPIC)
    assert offsets.topic_id is not None and offsets.version == 3  # created with its id
    zk.create(paths.topic_path("good"), TopicAssignment.of({0: [1]}).encode(), makepath=True)
    wait_for(lambda: _leaders(zk, "good") == {0: 1}, 15, "the new topic's leaders")
    wait_for(lambda: topic("good")[0].topic_id is not None, 15, "an id for the new topic")
    assert topic("moving") == (given, 1)  # given once: later passes leave it
    assert zk.get(paths.topic_path("bad-id"))[0] == bad_id and _leaders(zk, "bad-id") == {}


def test_a_topic_marked_after_the_view_read_the_topics_keeps_its_mark(zk: Any) -> None:
    """A view is read over time (topics first, marks last): a topic created while the topics were read, then
    marked and acknowledged before the marks were, is in the marks but not in the view's topics. Its mark must
    stay for the next pass (which sees the topic); dropping it answered the deletion done and left the topic,
    which came back on every node (test_topic_ids timed out so, under load)."""
    from zkcoord.zk.controller import ClusterView, deletion_acks_path

    topic = "late"
    zk.create(paths.topic_path(topic), TopicAssignment.of({0: [1]}).encode(), makepath=True)
    zk.create(paths.delete_topic_path(topic), b"", makepath=True)
    zk.create(f"{deletion_acks_path(topic)}/1", b"", makepath=True)
    ctl = Controller(zk, 1, offsets_topic_num_partitions=NUM_OFFSETS)  # not started: no pass of its own
    view = ClusterView(
        (1,), {}, {}, frozenset(), frozenset(), (topic,), deletion_acks={topic: frozenset({1})}
    )
    ctl._delete_topics(view)
    assert zk.exists(paths.topic_path(topic)) is not None
    assert zk.exists(paths.delete_topic_path(topic)) is not None  # still marked: the next pass deletes it
