"""Controller election, epoch fencing and leadership reconciliation against a real ZooKeeper, with three
in-process controllers (one kazoo session each) and real server-side session expiry."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration, ControllerInfo, PartitionState, TopicAssignment
from zkcoord.placement.coordinator import OFFSETS_TOPIC
from zkcoord.testing import expire_session, wait_for
from zkcoord.zk.controller import (
    Controller,
    ControllerMoved,
    ack_topic_deletion,
    deletion_acks_path,
    fenced_commit,
    read_controller_epoch,
)

pytestmark = pytest.mark.integration

SESSION_S = 4.0
NUM_OFFSETS = 6


def register(client: Any, node_id: int) -> None:
    reg = BrokerRegistration.create("127.0.0.1", 9000 + node_id, timestamp_ms=int(time.time() * 1000))
    client.create(paths.broker_path(node_id), reg.encode(), ephemeral=True, makepath=True)


def states(zk: Any, topic: str) -> dict[int, PartitionState]:
    out = {}
    try:
        children = zk.get_children(paths.topic_partitions_path(topic))
    except Exception:
        return {}
    for name in children:
        try:
            data, _ = zk.get(paths.partition_state_path(topic, int(name)))
        except Exception:
            continue
        out[int(name)] = PartitionState.decode("state", data)
    return out


class Cluster:
    def __init__(self, factory: Callable[..., Any], ids: tuple[int, ...]) -> None:
        self.clients = {n: factory(session_timeout_s=SESSION_S) for n in ids}
        for n, c in self.clients.items():
            register(c, n)
        self.controllers = {
            n: Controller(c, n, offsets_topic_num_partitions=NUM_OFFSETS, resync_interval_s=1.0)
            for n, c in self.clients.items()
        }
        self.overlaps: list[tuple[int, ...]] = []
        self._stop = threading.Event()
        for ctl in self.controllers.values():
            ctl.start()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            active = tuple(n for n, c in self.controllers.items() if c.active)
            if len(active) > 1:
                self.overlaps.append(active)
            time.sleep(0.002)

    def active(self) -> list[int]:
        return [n for n, c in self.controllers.items() if c.active]

    def close(self) -> None:
        self._stop.set()
        self._sampler.join()
        for ctl in self.controllers.values():
            ctl.close()


@pytest.fixture
def cluster(zk_client_factory: Callable[..., Any]) -> Any:
    clusters: list[Cluster] = []

    def make(ids: tuple[int, ...] = (1, 2, 3)) -> Cluster:
        c = Cluster(zk_client_factory, ids)
        clusters.append(c)
        return c

    yield make
    for c in clusters:
        c.close()


def test_one_controller_and_balanced_offsets_leaders(zk: Any, cluster: Any) -> None:
    history: list[int | None] = []
    zk.ensure_path("/")

    @zk.DataWatch(paths.CONTROLLER)
    def _watch(data: bytes | None, stat: Any) -> None:
        history.append(None if data is None else ControllerInfo.decode(paths.CONTROLLER, data).brokerid)

    c = cluster()
    wait_for(lambda: len(c.active()) == 1, 10, "one active controller")
    (winner,) = c.active()
    data, _ = zk.get(paths.CONTROLLER)
    assert ControllerInfo.decode(paths.CONTROLLER, data).brokerid == winner
    assert read_controller_epoch(zk)[0] == 1
    wait_for(lambda: len(states(zk, OFFSETS_TOPIC)) == NUM_OFFSETS, 10, "offsets partition states")
    st = states(zk, OFFSETS_TOPIC)
    leaders = sorted(s.leader for s in st.values())
    assert leaders == [1, 1, 2, 2, 3, 3]
    assert all(s.controller_epoch == 1 and s.leader_epoch == 0 and s.isr == (s.leader,) for s in st.values())
    assigned = TopicAssignment.decode("t", zk.get(paths.topic_path(OFFSETS_TOPIC))[0])
    assert assigned.partition_ids == list(range(NUM_OFFSETS))
    assert c.overlaps == []
    assert [h for h in history if h is not None] == [winner]


def test_expired_controller_is_replaced_and_fenced(zk: Any, cluster: Any) -> None:
    history: list[tuple[int, int]] = []  # (brokerid, czxid) of each /controller znode seen

    @zk.DataWatch(paths.CONTROLLER)
    def _watch(data: bytes | None, stat: Any) -> None:
        if data is not None:
            history.append((ControllerInfo.decode(paths.CONTROLLER, data).brokerid, stat.czxid))

    c = cluster()
    wait_for(
        lambda: len(c.active()) == 1 and len(states(zk, OFFSETS_TOPIC)) == NUM_OFFSETS, 10, "steady state"
    )
    (old,) = c.active()
    old_ctl = c.controllers[old]
    old_fence = old_ctl.fence
    assert old_fence is not None and old_fence.epoch == 1
    before = states(zk, OFFSETS_TOPIC)

    t0 = time.monotonic()
    expire_session(c.clients[old])  # server-side: /controller and /brokers/ids/<old> vanish
    assert not old_ctl.active  # it stepped down before anything else
    wait_for(lambda: len(c.active()) == 1 and c.active()[0] != old, SESSION_S, "a new controller")
    elapsed = time.monotonic() - t0
    assert elapsed < SESSION_S
    (new,) = c.active()
    assert read_controller_epoch(zk)[0] == 2

    # every partition the expired node led moves to a survivor, epoch bumped, written under epoch 2
    def moved() -> bool:
        now = states(zk, OFFSETS_TOPIC)
        return all(s.leader != old for s in now.values())

    wait_for(moved, 10, "partitions of the expired node to move")
    after = states(zk, OFFSETS_TOPIC)
    for p, s in after.items():
        if before[p].leader == old:
            assert s.leader_epoch == before[p].leader_epoch + 1 and s.controller_epoch == 2
        else:
            assert s == before[p]
    assert sorted(s.leader for s in after.values()) == sorted([n for n in (1, 2, 3) if n != old] * 3)

    # a write under the old epoch is refused as a whole, and the state is untouched
    forged = PartitionState(old, 99, (old,), old_fence.epoch).encode()
    path = paths.partition_state_path(OFFSETS_TOPIC, 0)
    with pytest.raises(ControllerMoved):
        fenced_commit(c.clients[old], old_fence, [lambda tx: tx.set_data(path, forged)])
    assert states(zk, OFFSETS_TOPIC)[0] == after[0]

    # the old node stays a follower; each owner held its own /controller znode, created in order
    assert not old_ctl.active and c.active() == [new]
    wait_for(lambda: history and history[-1][0] == new, 5, "the watcher to see the new controller")
    distinct = list(dict.fromkeys(history))
    assert [b for b, _ in distinct] == [old, new]
    assert distinct[0][1] < distinct[1][1]
    assert c.overlaps == [], f"two nodes believed they were controller at once: {c.overlaps[:3]}"


def test_topic_creation_increase_and_deletion(zk: Any, cluster: Any) -> None:
    c = cluster((1, 2))
    wait_for(lambda: len(c.active()) == 1, 10, "a controller")
    zk.create(paths.topic_path("t"), TopicAssignment.of({0: [2], 1: [1], 2: [7]}).encode(), makepath=True)
    wait_for(lambda: len(states(zk, "t")) == 3, 10, "states of t")
    st = states(zk, "t")
    # partition 2's only replica (7) is not registered: offline (RF=1 is never moved to a non-replica)
    assert st[0].leader == 2 and st[1].leader == 1 and st[2].leader == -1
    zk.set(paths.topic_path("t"), TopicAssignment.of({0: [2], 1: [1], 2: [7], 3: [1]}).encode())
    wait_for(lambda: len(states(zk, "t")) == 4, 10, "the added partition")
    assert states(zk, "t")[3].leader == 1 and states(zk, "t")[3].leader_epoch == 0
    zk.create(paths.delete_topic_path("t"), b"", makepath=True)
    # deleted only once every live node has dropped its logs and offsets of t (acknowledged)
    (ctl,) = (c.controllers[n] for n in c.active())
    ack_topic_deletion(zk, "t", 1)
    passes = ctl.reconciles
    wait_for(lambda: ctl.reconciles > passes, 10, "a controller pass after node 1's ack")
    assert zk.exists(paths.topic_path("t")) is not None
    ack_topic_deletion(zk, "t", 2)
    wait_for(lambda: zk.exists(paths.topic_path("t")) is None, 10, "topic t to be deleted")
    wait_for(lambda: zk.get_children(paths.ADMIN_DELETE_TOPICS) == [], 10, "the delete marker to go")
    assert zk.exists(deletion_acks_path("t")) is None
    # the internal topic cannot be deleted; its marker is consumed
    zk.create(paths.delete_topic_path(OFFSETS_TOPIC), b"")
    wait_for(lambda: zk.get_children(paths.ADMIN_DELETE_TOPICS) == [], 10, "the offsets marker to go")
    assert zk.exists(paths.topic_path(OFFSETS_TOPIC)) is not None


def test_controller_resigns_on_close_and_a_follower_takes_over(zk: Any, cluster: Any) -> None:
    c = cluster((1, 2))
    wait_for(lambda: len(c.active()) == 1, 10, "a controller")
    (first,) = c.active()
    c.controllers[first].close()
    other = 2 if first == 1 else 1
    wait_for(lambda: c.controllers[other].active, 5, "the follower to take over")
    assert read_controller_epoch(zk)[0] == 2


def test_rf1_data_partition_goes_offline_with_its_node_while_offsets_partitions_move(
    zk: Any, cluster: Any
) -> None:
    c = cluster((1, 2))
    wait_for(lambda: len(c.active()) == 1, 10, "a controller")
    zk.create(paths.topic_path("d"), TopicAssignment.of({0: [1], 1: [2]}).encode(), makepath=True)
    wait_for(lambda: len(states(zk, "d")) == 2, 10, "states of d")
    before = states(zk, "d")
    assert (before[0].leader, before[1].leader) == (1, 2)
    wait_for(lambda: {s.leader for s in states(zk, OFFSETS_TOPIC).values()} == {1, 2}, 10, "balanced offsets")

    zk.delete(paths.broker_path(2))  # node 2's registration goes, as when its session expires
    wait_for(lambda: states(zk, "d")[1].leader == -1, 10, "partition 1 offline")
    down = states(zk, "d")
    assert down[1].leader_epoch == before[1].leader_epoch + 1 and down[1].isr == (2,)  # ISR kept, as Kafka
    assert down[0] == before[0]
    wait_for(lambda: {s.leader for s in states(zk, OFFSETS_TOPIC).values()} == {1}, 10, "offsets moved to 1")

    register(zk, 2)  # the only replica is back: it leads its partition again
    wait_for(lambda: states(zk, "d")[1].leader == 2, 10, "partition 1 back on node 2")
    back = states(zk, "d")[1]
    assert back.leader_epoch == before[1].leader_epoch + 2 and back.isr == (2,)


def cut_connection(client: Any) -> None:
    """Close the client's TCP connection without waiting for anything (the session survives)."""
    sock = client._connection._socket
    assert sock is not None
    sock.shutdown(socket.SHUT_RDWR)


@pytest.mark.parametrize("fault", ["suspend", "expire"])
@pytest.mark.parametrize("site", ["won", "verified"])
def test_a_pass_that_read_before_a_connection_change_cannot_activate(
    zk: Any, zk_client_factory: Callable[..., Any], site: str, fault: str
) -> None:
    """Forces the interleaving behind the overlap flake: the worker has made every read that justifies
    activation, then the connection is suspended (or the session expires) and the state listener steps the
    controller down, and only then does the worker try to set `active`. It must stay off until a pass of
    the new connection generation has verified (or re-won) the epoch; it never acts with the old one."""
    client = zk_client_factory(session_timeout_s=SESSION_S)
    register(client, 1)
    seen: list[str] = []
    changed = threading.Event()

    def listener(state: Any) -> None:
        seen.append(str(state))
        if str(state) in ("SUSPENDED", "LOST"):
            changed.set()

    attempts: list[tuple[str, bool]] = []
    release = threading.Event()

    armed = threading.Event()  # the hook is given at construction and acts only once the test arms it

    def before_activate(at: str) -> None:
        if not armed.is_set():
            return
        attempts.append((at, ctl.active))
        if len(attempts) == 1:
            changed.clear()  # the suspension that triggered this verify pass must not count
            if fault == "expire":
                expire_session(client)  # returns once the new session is connected
            else:
                cut_connection(client)
            assert changed.wait(10), "the listener never saw the connection change"
        elif len(attempts) == 2:
            release.wait(10)  # hold the next attempt while the test looks at the stale pass's outcome

    ctl = Controller(
        client,
        1,
        offsets_topic_num_partitions=NUM_OFFSETS,
        resync_interval_s=1.0,
        before_activate=before_activate,
    )
    try:
        if site == "won":
            client.add_listener(listener)
            armed.set()
            ctl.start()
        else:
            ctl.start()
            wait_for(lambda: ctl.active and ctl.reconciles > 0, 10, "the first controller pass")
            client.add_listener(listener)
            armed.set()
            # kazoo reconnects on the same session and the verify pass of the new generation activates;
            # the hook then changes the connection again under it
            cut_connection(client)
        wait_for(lambda: len(attempts) >= 2, 15, "the worker to retry after the stale pass")
        assert attempts[0][0] == site
        # the stale pass is over: it must not have switched the controller back on
        assert not ctl.active and ctl.fence is None
        assert ctl.stale_activations >= 1
        release.set()
        wait_for(lambda: ctl.active, 15, "the controller to resume in the new generation")
        epoch = read_controller_epoch(zk)
        assert epoch is not None and ctl.fence is not None and ctl.fence.epoch == epoch[0]
        if fault == "suspend":
            # same session: the epoch it won stays its own (verified, not bumped again)
            assert epoch[0] == 1 and ctl.elections_won == 1
        else:
            # the session was lost: the old epoch was dropped and a new one won on the new session
            assert epoch[0] == 2 and ctl.elections_won == 2
        assert "SUSPENDED" in seen or "LOST" in seen
    finally:
        release.set()
        ctl.close()
