"""zkcoord in front of someone else's cluster, with Tansu as that cluster (registered in real ZooKeeper as a
ZooKeeper-era broker registers itself): plain cluster mode refuses to join it; the proxy carries real clients to it.

One Tansu for the module (node id 111; each test its own topics and its own ZooKeeper chroot).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.proxies import (
    ProxyProcess,
    coordinator_proxy,
    outside_zkcoord,
    read_exactly,
    tansu_group_members,
    two_bridging_proxies,
)
from zkcoord.cli import main
from zkcoord.cluster.node import ClusterConfig, ClusterNode, ForeignBrokersRegistered
from zkcoord.local.zookeeper import free_port
from zkcoord.testing.members import ConfluentMember, KafkaPythonMember, LegacyMember, legacy_config
from zkcoord.testing.tansu import Tansu, register_in_zookeeper, snapshot

pytestmark = pytest.mark.timeout(120)


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
                frame = read_exactly(sock, int.from_bytes(read_exactly(sock, 4), "big"))
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


def test_a_port_in_use_stops_the_proxy_naming_it(zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path,
                                                 capsys: Any) -> None:  # fmt: skip
    """The bootstrap port or a broker's port taken: exit 2 with the port and the flag that moves it, no traceback."""
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        with register_in_zookeeper(zk, tansu, {}):
            code = main(["proxy", "--zk", zk_connect, "--listen", f"127.0.0.1:{port}", "--node-id", "9000",
                         "--data-dir", str(tmp_path / "p")])  # fmt: skip
            err = capsys.readouterr().err
            assert code == 2, err
            assert f"zkcoord: error: cannot listen on 127.0.0.1:{port} (the bootstrap, --listen" in err
            code = main(["proxy", "--zk", zk_connect, "--listen", f"127.0.0.1:{free_port()}", "--node-id", "9000",
                         "--broker-port", f"111={port}", "--data-dir", str(tmp_path / "p")])  # fmt: skip
            err = capsys.readouterr().err
            assert code == 2, err
            assert (
                f"zkcoord: error: cannot listen on 127.0.0.1:{port}, broker 111's port: Address already in use; "
                "give it a free one with --broker-port 111=PORT" in err
            )
            assert "Traceback" not in err
    finally:
        taken.close()


def test_the_tansu_command_gives_a_cluster_to_try_the_proxy_on(zk: Any, zk_connect: str) -> None:
    """`python -m zkcoord.testing.tansu` (docs/proxy.md "Try it on your machine"): a broker registered in ZooKeeper as
    a ZooKeeper-era one, with its topic and a producer writing to it, until SIGTERM, which takes its registration
    away as a stopped broker's goes."""
    import json
    import signal
    import subprocess
    import sys

    from kafka import KafkaConsumer

    from zkcoord.testing import wait_for

    cmd = [
        sys.executable,
        "-m",
        "zkcoord.testing.tansu",
        "--zk",
        zk_connect,
        "--topic",
        "try:2",
        "--produce",
        "50",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]  # printed once registered and producing
        assert lines[2] == "tansu: running (Ctrl-C to stop)\n", lines
        broker = json.loads(zk.get("/brokers/ids/111")[0])
        assert zk.exists("/controller") is not None
        assert sorted(zk.get_children("/brokers/topics/try/partitions")) == ["0", "1"]
        assert f"tansu: broker 111 on 127.0.0.1:{broker['port']} " in lines[0]
        consumer = KafkaConsumer("try", bootstrap_servers=f"127.0.0.1:{broker['port']}", auto_offset_reset="earliest",
                                 consumer_timeout_ms=10_000)  # fmt: skip
        try:
            assert next(iter(consumer)).value.startswith(b"r")  # the producer's records are on it
        finally:
            consumer.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert "records acknowledged" in proc.stdout.read()
        wait_for(lambda: zk.exists("/brokers/ids/111") is None, 10, "the broker's registration gone with it")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- a mixed group coordinated by the proxy ------------------------------------------------------------------------


def test_a_group_is_migrated_member_by_member_through_the_proxy(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """Two legacy members (fast and faithful) read from Tansu; one at a time each is replaced by a broker-protocol
    member joining through the proxy (confluent-kafka, then kafka-python), whose coordinator (not Tansu's: Tansu's
    group of that id never has a member) holds the group as a mixed group. At every poll no partition is held by
    two members; every record produced before, during and after is read; only /consumers and /zkcoord change."""
    from kafka import KafkaProducer

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

        def read(partition: int, offset: int) -> None:
            got.add((partition, offset))

        def legacy_member(name: str, mode: str) -> LegacyMember:
            # a legacy member fetches in the calls it is given: 50 ms each
            config = legacy_config(zk_connect, group, name, rebalance_backoff_ms=200, rebalance_max_retries=50,
                                   mode=mode)  # fmt: skip
            return LegacyMember(config, {topic: 1}, sink=read, poll_timeout_s=0.05)

        legacy = {
            "fast": legacy_member("legacy-fast", "fast"),
            "faithful": legacy_member("legacy-faithful", "faithful"),
        }
        rk: ConfluentMember | None = None
        kp_member: KafkaPythonMember | None = None
        got: set[tuple[int, int]] = set()
        overlaps: list[dict[str, set[int]]] = []

        def held() -> dict[
            str, set[int]
        ]:  # legacy: what each owns; broker-protocol: their rebalance callbacks
            out = {name: set(m.held()) for name, m in legacy.items()}
            if rk is not None:
                out["confluent-kafka"] = set(rk.held())
            if kp_member is not None:
                out["kafka-python"] = set(kp_member.held())
            return out

        def step() -> None:  # every member is polled here, by the test's thread
            for m in legacy.values():
                m.poll()
            if rk is not None:
                rk.poll(0.05)
            if kp_member is not None:
                kp_member.poll(0.05)
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
                m.start(thread=False)
            run_until(everyone_holds, "two legacy members")
            # replace the faithful legacy member by a confluent-kafka member through the proxy
            legacy.pop("faithful").stop()
            rk = ConfluentMember(proxy.bootstrap, group, topic, heartbeat_interval_ms=500, sink=read)
            produce()
            run_until(everyone_holds, "legacy-fast and confluent-kafka")
            # then the fast one by a kafka-python member
            legacy.pop("fast").stop()
            kp_member = KafkaPythonMember(proxy.bootstrap, group, topic, heartbeat_interval_ms=500, sink=read)
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
                m.stop()
            producer.close()
            proxy.stop()
        assert overlaps == []
        assert len(got) == produced == 400  # every record, by (partition, offset)
        after = snapshot(zk)
    keep = lambda t: {p: v for p, v in outside_zkcoord(t).items() if not p.startswith("/consumers")}  # noqa: E731
    assert keep(after) == keep(before)
    assert [p for p in proxy.data_dir.rglob("*") if p.is_file()] == []  # no partition data, no records there


# -- two proxy nodes, one killed -----------------------------------------------------------------------------------


def test_two_proxies_share_a_mixed_group_and_survive_a_kill_9_of_its_coordinator(
    zk: Any, zk_connect: str, tansu: Tansu, tmp_path: Path
) -> None:
    """Two proxy nodes; the kafka-python member bootstraps on one, the group is coordinated by whichever leads its
    offsets partition, and that one is killed with -9 mid-group: the survivor loads the group from ZooKeeper and the
    member rejoins it. Never a partition held by both members; every record read; Tansu's group stays empty."""
    from kafka import KafkaProducer

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

        proxies = two_bridging_proxies(zk_connect, tmp_path)
        got: set[tuple[int, int]] = set()

        def read(partition: int, offset: int) -> None:
            got.add((partition, offset))

        config = legacy_config(
            zk_connect, group, "legacy-1", rebalance_backoff_ms=200, rebalance_max_retries=50
        )
        legacy = LegacyMember(config, {topic: 1}, sink=read, poll_timeout_s=0.05)
        member: KafkaPythonMember | None = None
        overlaps: list[tuple[set[int], set[int]]] = []

        def step() -> None:  # both members are polled here, by the test's thread
            member.poll(0.05)  # type: ignore[union-attr]
            legacy.poll()
            mine = set(member.held())  # type: ignore[union-attr]
            theirs = set(legacy.held())
            if mine & theirs:
                overlaps.append((mine, theirs))

        def run_until(done: Any, timeout: float, what: str) -> None:
            deadline = time.monotonic() + timeout
            while not done():
                assert time.monotonic() < deadline, what
                step()

        try:
            produce()
            legacy.start(thread=False)
            victim = coordinator_proxy(zk_connect, group)
            survivor = next(n for n in proxies if n != victim)
            member = KafkaPythonMember(proxies[survivor].bootstrap, group, topic, heartbeat_interval_ms=500,
                                       config={"reconnect_backoff_max_ms": 500}, sink=read)  # fmt: skip
            run_until(lambda: member.held() and legacy.held(), 60, "the group split between both members")
            produce()
            run_until(lambda: len(got) == produced, 60, "every record before the kill")
            proxies[victim].kill9()
            produce()
            run_until(lambda: len(got) == produced, 90, "every record after the coordinator's kill")
            # the survivor takes the partition once the victim's session expires, and the group forms there again
            coordinator_proxy(zk_connect, group, timeout=30, expect=survivor)
            run_until(lambda: member.held() and legacy.held() and len(got) == produced, 60, "shared again")
            produce()
            run_until(lambda: len(got) == produced, 60, "every record once the survivor coordinates")
            # kafka-python names its coordinator connection after the node id FindCoordinator gave it
            assert str(survivor) in str(member.consumer._coordinator.coordinator_id)
            assert tansu_group_members(tansu, group) == 0
        finally:
            if member is not None:
                member.close()
            legacy.stop()
            producer.close()
            for proxy in proxies.values():
                proxy.stop()
        assert overlaps == []
        assert len(got) == produced == 4 * per_phase
        after = snapshot(zk)
    keep = lambda t: {p: v for p, v in outside_zkcoord(t).items() if not p.startswith("/consumers")}  # noqa: E731
    assert keep(after) == keep(before)
