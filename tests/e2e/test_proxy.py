"""zkcoord in front of someone else's cluster, with Tansu as that cluster (registered in real ZooKeeper as a
ZooKeeper-era broker registers itself): plain cluster mode refuses to join it; the proxy carries real clients to it.

One Tansu for the module (node id 111; each test its own topics and its own ZooKeeper chroot).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkcoord.cli import main
from zkcoord.cluster.node import ClusterConfig, ClusterNode, ForeignBrokersRegistered
from zkcoord.local.zookeeper import free_port
from zkcoord.testing.tansu import Tansu, register_in_zookeeper, snapshot

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    with Tansu.start(tmp_path_factory.mktemp("tansu") / "tansu.log") as broker:
        yield broker


@pytest.fixture(scope="module")
def topic(tansu: Tansu) -> str:
    tansu.create_topic("orders", 4)
    return "orders"


def test_plain_cluster_mode_refuses_a_foreign_cluster_and_writes_nothing(
    zk: Any, zk_connect: str, tansu: Tansu, topic: str, tmp_path: Path, capsys: Any
) -> None:
    with register_in_zookeeper(zk, tansu, {topic: 4}):
        before = snapshot(zk)
        code = main(["serve", "--zk", zk_connect, "--listen", f"127.0.0.1:{free_port()}", "--node-id", "1",
                     "--data-dir", str(tmp_path / "node"), "--bridge-zk-offsets", "--bridge-zk-groups", ".*"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2
        assert f"broker 111 (PLAINTEXT://127.0.0.1:{tansu.port}, controller)" in err
        assert "zkcoord did not start" in err and "zkcoord proxy --zk" in err and "nothing was written" in err
        # the library path refuses the same way, before its first write
        node = ClusterNode(ClusterConfig(zk_connect, 2, "127.0.0.1", free_port()))
        with pytest.raises(ForeignBrokersRegistered, match="broker 111"):
            node.start()
        assert snapshot(zk) == before
        assert not (tmp_path / "node").exists()


def test_a_controller_left_by_a_foreign_broker_is_refused_too(zk: Any, zk_connect: str, tansu: Tansu) -> None:
    """The controller's broker gone from /brokers/ids but its /controller still held (a broker stopping)."""
    with register_in_zookeeper(zk, tansu, {}):
        zk.delete("/brokers/ids/111")
        before = snapshot(zk)
        node = ClusterNode(ClusterConfig(zk_connect, 2, "127.0.0.1", free_port()))
        with pytest.raises(
            ForeignBrokersRegistered, match=r"/controller held by broker 111 \(not registered\)"
        ):
            node.start()
        assert snapshot(zk) == before


def test_zkcoord_nodes_start_beside_each_other(zk: Any, zk_connect: str) -> None:
    """Marked registrations are not foreign: a second node joins the first (and the first's controller)."""
    nodes = [ClusterNode(ClusterConfig(zk_connect, n, "127.0.0.1", free_port())) for n in (1, 2)]
    try:
        for node in nodes:
            node.start()
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        assert sorted(zk.get_children("/zkcoord/brokers")) == ["1", "2"]
        for n in ("1", "2"):
            assert (
                zk.get(f"/zkcoord/brokers/{n}")[1].ephemeralOwner
                == zk.get(f"/brokers/ids/{n}")[1].ephemeralOwner
            )
    finally:
        for node in nodes:
            node.close()


# -- the data plane ------------------------------------------------------------------------------------------------


class ProxyProcess:
    """`zkcoord proxy` as its own process (what an operator runs), stopped with SIGTERM, killed if it hangs."""

    def __init__(self, zk_connect: str, data_dir: Path, *extra: str, node_id: int = 9000) -> None:
        self.node_id = node_id
        self.port = free_port()
        self.broker_port = free_port()
        self.other_port = free_port()  # pinned for broker 112, registered by a test while the proxy runs
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zkcoord", "proxy", "--zk", zk_connect, "--listen", f"127.0.0.1:{self.port}",
             "--node-id", str(node_id), "--data-dir", str(data_dir), "--broker-port", f"111={self.broker_port}",
             "--broker-port", f"112={self.other_port}", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        # Its output is read all along (a pipe left full would stop the proxy at its next log line).
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(30):
            self.kill9()
            raise AssertionError(f"proxy did not start: {''.join(self.lines)}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "broker 111 behind" in line:
                self.ready.set()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.reader.join(10)

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(10)


@pytest.fixture
def proxy(zk: Any, zk_connect: str, tansu: Tansu, topic: str, tmp_path: Path) -> Iterator[ProxyProcess]:
    with register_in_zookeeper(zk, tansu, {topic: 4}):
        before = snapshot(zk)
        proc = ProxyProcess(zk_connect, tmp_path / "proxy")
        try:
            yield proc
        finally:
            proc.stop()
        assert outside_zkcoord(snapshot(zk)) == outside_zkcoord(before)


def outside_zkcoord(tree: dict[str, tuple[bytes, int, int]]) -> dict[str, tuple[bytes, int, int]]:
    """The tree outside /zkcoord (the root's child count moves when /zkcoord is first created)."""
    kept = {p: v for p, v in tree.items() if p != "/zkcoord" and not p.startswith("/zkcoord/")}
    kept["/"] = (*kept["/"][:2], 0)
    return kept


def test_kafka_python_and_librdkafka_produce_and_consume_through_the_proxy(
    proxy: ProxyProcess, tansu: Tansu, topic: str
) -> None:
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    sent = [f"kp-{i}".encode() for i in range(200)]
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, linger_ms=5)
    for i, value in enumerate(sent):
        producer.send(topic, value, partition=i % 4)
    producer.flush(30)
    brokers = {(b.host, b.port) for b in producer._metadata.brokers()}
    producer.close()
    assert brokers == {("127.0.0.1", proxy.broker_port)}  # never Tansu's own address

    rk_sent = [f"rk-{i}".encode() for i in range(200)]
    rk = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 5})
    for i, value in enumerate(rk_sent):
        rk.produce(topic, value, partition=i % 4)
    assert rk.flush(30) == 0
    md = rk.list_topics(timeout=10)
    assert {(b.host, b.port) for b in md.brokers.values()} == {("127.0.0.1", proxy.broker_port)}

    # read back through the proxy: kafka-python by assignment, librdkafka in a group the cluster coordinates
    reader = KafkaConsumer(bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest",
                           consumer_timeout_ms=10_000, enable_auto_commit=False)  # fmt: skip
    reader.assign([TopicPartition(topic, p) for p in range(4)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 400 and time.monotonic() < deadline:
        for records in reader.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    reader.close()
    assert sorted(got) == sorted(sent + rk_sent)

    group = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "plain-" + topic,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      # Tansu holds a join for half the session timeout (45 s by default)
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})  # fmt: skip
    group.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < 400 and time.monotonic() < deadline:
        msg = group.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    group.close()
    assert sorted(seen) == sorted(sent + rk_sent)
    assert not any(proxy.data_dir.rglob("*")) if proxy.data_dir.exists() else True


def test_a_broker_registered_while_the_proxy_runs_gets_its_port(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """/brokers/ids is watched: a broker that registers later is reachable through its port at once, and the
    frames sent there reach it (an ApiVersions answered through the new port, capped by the proxy)."""
    from zkcoord.legacy.codecs import BrokerRegistration
    from zkcoord.server import kafka_protocol as kp
    from zkcoord.testing import wait_for

    def port_open(port: int) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    with register_in_zookeeper(zk, tansu, {}):
        proxy = ProxyProcess(zk_connect, tmp_path / "proxy")
        try:
            assert not port_open(proxy.other_port)
            reg = BrokerRegistration.create("127.0.0.1", tansu.port, timestamp_ms=int(time.time() * 1000))
            zk.create("/brokers/ids/112", reg.encode(), ephemeral=True)
            wait_for(lambda: port_open(proxy.other_port), 10, "the proxy's port for broker 112")
            with socket.create_connection(("127.0.0.1", proxy.other_port), timeout=10) as sock:
                sock.sendall(kp.encode_request(kp.API_VERSIONS, 0, 42, "test"))
                frame = _read_exactly(sock, int.from_bytes(_read_exactly(sock, 4), "big"))
            corr, resp = kp.decode_response(kp.API_VERSIONS, 0, frame)
            assert (corr, resp.error_code) == (42, 0)
            versions = {a.api_key: a.max_version for a in resp.api_keys}
            assert versions[kp.JOIN_GROUP] == kp.ADVERTISED[kp.JOIN_GROUP][1] < 9  # Tansu offers 9: capped
        finally:
            proxy.stop()


def test_the_proxy_refuses_a_node_id_of_the_cluster(zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path,
                                                    capsys: Any) -> None:  # fmt: skip
    with register_in_zookeeper(zk, tansu, {}):
        code = main(["proxy", "--zk", zk_connect, "--listen", f"127.0.0.1:{free_port()}", "--node-id", "111",
                     "--data-dir", str(tmp_path / "p")])  # fmt: skip
    assert code == 2
    assert "--node-id 111 is a broker of the cluster behind the proxy" in capsys.readouterr().err


# -- a mixed group coordinated by the proxy ------------------------------------------------------------------------


def test_a_group_is_migrated_member_by_member_through_the_proxy(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """Two legacy members (fast and faithful) read from Tansu; one at a time each is replaced by a broker-protocol
    member joining through the proxy (confluent-kafka, then kafka-python), whose coordinator (not Tansu's: Tansu's
    group of that id never has a member) holds the group as a mixed group. At every poll no partition is held by
    two members; every record produced before, during and after is read; only /consumers and /zkcoord change."""
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer, KafkaProducer

    from zkcoord.legacy.config import LegacyConsumerConfig
    from zkcoord.zk.member import LegacyConsumer

    topic, group = "mixed-orders", "mixed-g1"
    tansu.create_topic(topic, 4)
    with register_in_zookeeper(zk, tansu, {topic: 4}):
        before = snapshot(zk)
        producer = KafkaProducer(bootstrap_servers=tansu.bootstrap)
        produced = 0

        def produce(count: int = 100) -> None:
            nonlocal produced
            for i in range(produced, produced + count):
                producer.send(topic, f"r{i}".encode(), partition=i % 4)
            producer.flush(30)
            produced += count

        proxy = ProxyProcess(
            zk_connect, tmp_path / "proxy", "--bridge-zk-groups", "mixed-.*", "--bridge-zk-offsets"
        )

        def legacy_member(name: str, mode: str) -> LegacyConsumer:
            return LegacyConsumer(
                LegacyConsumerConfig(group_id=group, zookeeper_connect=zk_connect, consumer_id=name,
                                     auto_offset_reset="smallest", rebalance_backoff_ms=200,
                                     rebalance_max_retries=50, zookeeper_session_timeout_ms=6000,
                                     auto_commit_interval_ms=200, mode=mode),  # type: ignore[arg-type]
                {topic: 1},
            )  # fmt: skip

        legacy = {
            "fast": legacy_member("legacy-fast", "fast"),
            "faithful": legacy_member("legacy-faithful", "faithful"),
        }
        rk: Any = None
        kp_member: KafkaConsumer | None = None
        got: set[tuple[int, int]] = set()
        overlaps: list[dict[str, set[int]]] = []

        def held() -> dict[str, set[int]]:
            out = {name: {tp.partition for tp in m.owned()} for name, m in legacy.items()}
            if rk is not None:
                out["confluent-kafka"] = {tp.partition for tp in rk.assignment()}
            if kp_member is not None:
                out["kafka-python"] = {tp.partition for tp in kp_member.assignment()}
            return out

        def step() -> None:
            for m in legacy.values():  # a legacy member fetches in the calls it is given: 50 ms each
                while (msg := m.next_message(timeout=0.05)) is not None:
                    got.add((msg.partition, msg.offset))
            if rk is not None:
                for msg in rk.consume(100, 0.05):
                    if msg.error() is None:
                        got.add((msg.partition(), msg.offset()))
            if kp_member is not None:
                for records in kp_member.poll(timeout_ms=50).values():
                    got.update((r.partition, r.offset) for r in records)
            now = held()
            if sum(len(v) for v in now.values()) != len(set().union(*now.values())):
                overlaps.append(now)

        def run_until(done: Any, what: str, timeout: float = 60) -> None:
            deadline = time.monotonic() + timeout
            while not done():
                assert time.monotonic() < deadline, (
                    f"{what}: held {held()}, read {len(got)}/{produced}; proxy: {''.join(proxy.lines[-30:])}"
                )
                step()

        def everyone_holds() -> bool:
            return all(held().values()) and len(got) == produced

        try:
            produce()
            for m in legacy.values():
                m.start()
            run_until(everyone_holds, "two legacy members")
            # replace the faithful legacy member by a confluent-kafka member through the proxy
            legacy.pop("faithful").close()
            rk = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                           "partition.assignment.strategy": "range", "auto.commit.interval.ms": 200})  # fmt: skip
            rk.subscribe([topic])
            produce()
            run_until(everyone_holds, "legacy-fast and confluent-kafka")
            # then the fast one by a kafka-python member
            legacy.pop("fast").close()
            kp_member = KafkaConsumer(bootstrap_servers=proxy.bootstrap, group_id=group, auto_offset_reset="earliest",
                                      session_timeout_ms=6000, heartbeat_interval_ms=500, fetch_max_wait_ms=100,
                                      auto_commit_interval_ms=200)  # fmt: skip
            kp_member.subscribe([topic])
            produce()
            run_until(everyone_holds, "confluent-kafka and kafka-python")
            produce()
            run_until(lambda: len(got) == produced, "every record once migrated")
            assert tansu_group_members(tansu, group) == 0  # no client reached the cluster's own coordinator
        finally:
            if kp_member is not None:
                kp_member.close()
            if rk is not None:
                rk.close()
            for m in legacy.values():
                m.close()
            producer.close()
            proxy.stop()
        assert overlaps == []
        assert len(got) == produced == 400  # every record, by (partition, offset)
        after = snapshot(zk)
    keep = lambda t: {p: v for p, v in outside_zkcoord(t).items() if not p.startswith("/consumers")}  # noqa: E731
    assert keep(after) == keep(before)
    assert [p for p in proxy.data_dir.rglob("*") if p.is_file()] == []  # no partition data, no records there


def tansu_group_members(tansu: Tansu, group: str) -> int:
    """Members of `group` in Tansu's own coordinator, by a raw DescribeGroups v0 (kafka-python's admin client
    cannot parse Tansu's answer: reference page)."""
    from zkcoord.server import kafka_protocol as kp

    with socket.create_connection(("127.0.0.1", tansu.port), timeout=10) as sock:
        sock.sendall(kp.encode_request(kp.DESCRIBE_GROUPS, 0, 1, "test", groups=[group]))
        head = _read_exactly(sock, 4)
        frame = _read_exactly(sock, int.from_bytes(head, "big"))
    _, resp = kp.decode_response(kp.DESCRIBE_GROUPS, 0, frame)
    (described,) = resp.groups
    return len(described.members)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


# -- two proxy nodes, one killed -----------------------------------------------------------------------------------


def coordinator_proxy(zk_connect: str, group: str, timeout: float = 30.0, expect: int | None = None) -> int:
    """The proxy node leading `group`'s offsets partition in the proxies' own cluster (/zkcoord/proxy-cluster),
    once there is one (and it is `expect`, if given)."""
    from zkcoord.placement.coordinator import OFFSETS_TOPIC, partition_for_group
    from zkcoord.testing import wait_for
    from zkcoord.zk import registry
    from zkcoord.zk.session import connect

    client = connect(zk_connect + "/zkcoord/proxy-cluster")
    try:
        leader: list[int] = []

        def led() -> bool:
            state = registry.read_partition_state(client, OFFSETS_TOPIC, partition_for_group(group, 50))
            leader[:] = [state.leader] if state is not None and state.leader >= 0 else []
            return bool(leader) and expect in (None, leader[0])

        wait_for(led, timeout, f"a proxy leading the offsets partition of {group}")
        return leader[0]
    finally:
        client.stop()
        client.close()


def test_two_proxies_share_a_mixed_group_and_survive_a_kill_9_of_its_coordinator(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """Two proxy nodes; the kafka-python member bootstraps on one, the group is coordinated by whichever leads its
    offsets partition, and that one is killed with -9 mid-group: the survivor loads the group from ZooKeeper and the
    member rejoins it. Never a partition held by both members; every record read; Tansu's group stays empty."""
    from kafka import KafkaConsumer, KafkaProducer

    from zkcoord.legacy.config import LegacyConsumerConfig
    from zkcoord.zk.member import LegacyConsumer

    topic, group = "failover-orders", "mixed-failover"
    tansu.create_topic(topic, 4)
    per_phase = 100
    with register_in_zookeeper(zk, tansu, {topic: 4}):
        before = snapshot(zk)
        producer = KafkaProducer(bootstrap_servers=tansu.bootstrap)
        produced = 0

        def produce() -> None:
            nonlocal produced
            for i in range(produced, produced + per_phase):
                producer.send(topic, f"r{i}".encode(), partition=i % 4)
            producer.flush(30)
            produced += per_phase

        flags = (
            "--bridge-zk-groups",
            "mixed-.*",
            "--bridge-zk-offsets",
            "--zookeeper.session.timeout.ms",
            "3000",
        )
        proxies = {
            n: ProxyProcess(zk_connect, tmp_path / f"proxy-{n}", *flags, node_id=n) for n in (9000, 9001)
        }
        legacy = LegacyConsumer(
            LegacyConsumerConfig(group_id=group, zookeeper_connect=zk_connect, consumer_id="legacy-1",
                                 auto_offset_reset="smallest", rebalance_backoff_ms=200, rebalance_max_retries=50,
                                 zookeeper_session_timeout_ms=6000, auto_commit_interval_ms=200, mode="fast"),
            {topic: 1},
        )  # fmt: skip
        member: KafkaConsumer | None = None
        got: set[tuple[int, int]] = set()
        overlaps: list[tuple[set[int], set[int]]] = []

        def step() -> None:
            for records in member.poll(timeout_ms=50).values():  # type: ignore[union-attr]
                got.update((r.partition, r.offset) for r in records)
            while (msg := legacy.next_message(timeout=0.05)) is not None:
                got.add((msg.partition, msg.offset))
            mine = {tp.partition for tp in member.assignment()}  # type: ignore[union-attr]
            theirs = {tp.partition for tp in legacy.owned()}
            if mine & theirs:
                overlaps.append((mine, theirs))

        def run_until(done: Any, timeout: float, what: str) -> None:
            deadline = time.monotonic() + timeout
            while not done():
                assert time.monotonic() < deadline, what
                step()

        try:
            produce()
            legacy.start()
            victim = coordinator_proxy(zk_connect, group)
            survivor = next(n for n in proxies if n != victim)
            member = KafkaConsumer(bootstrap_servers=proxies[survivor].bootstrap, group_id=group,
                                   auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                                   auto_commit_interval_ms=200, fetch_max_wait_ms=100, reconnect_backoff_max_ms=500)  # fmt: skip
            member.subscribe([topic])
            run_until(
                lambda: member.assignment() and legacy.owned(), 60, "the group split between both members"
            )
            produce()
            run_until(lambda: len(got) == produced, 60, "every record before the kill")
            proxies[victim].kill9()
            produce()
            run_until(lambda: len(got) == produced, 90, "every record after the coordinator's kill")
            # the survivor takes the partition once the victim's session expires, and the group forms there again
            coordinator_proxy(zk_connect, group, timeout=30, expect=survivor)
            run_until(
                lambda: member.assignment() and legacy.owned() and len(got) == produced, 60, "shared again"
            )
            produce()
            run_until(lambda: len(got) == produced, 60, "every record once the survivor coordinates")
            # kafka-python names its coordinator connection after the node id FindCoordinator gave it
            assert str(survivor) in str(member._coordinator.coordinator_id)
            assert tansu_group_members(tansu, group) == 0
        finally:
            if member is not None:
                member.close()
            legacy.close()
            producer.close()
            for proxy in proxies.values():
                proxy.stop()
        assert overlaps == []
        assert len(got) == produced == 4 * per_phase
        after = snapshot(zk)
    keep = lambda t: {p: v for p, v in outside_zkcoord(t).items() if not p.startswith("/consumers")}  # noqa: E731
    assert keep(after) == keep(before)
