"""Security on both sides of `zkcoord proxy`, with real clients and real servers: the proxy serves SASL_SSL (TLS
from PEM files made here with openssl, PLAIN users from a JAAS KafkaServer section, SCRAM credentials in the
cluster's ZooKeeper /config/users, Kafka's ACLs on the groups it coordinates), and reaches the broker behind it
over SASL_SSL with SCRAM-SHA-512 (or PLAIN, for a second proxy) as `--command-config` says.

The broker behind it is a `zkcoord serve` with one SASL_SSL listener, registered in ZooKeeper as a ZooKeeper-era
broker registers a SASL_SSL endpoint: Tansu 0.6.0 (the issue's cluster) cannot stand there, since its `--cert/--key`
are parsed but never used (no TLS) and its SASL offers SCRAM only, with credentials that can only be added through
an authenticated AlterUserScramCredentials (so a memory-storage Tansu has no user who can log in). docs/proxy.md.

One proxy, one broker, one ZooKeeper chroot for the module; each test its own topics and groups.
"""

from __future__ import annotations

import contextlib
import io
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration, PartitionState, TopicAssignment
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.local.zookeeper import free_port
from zkcoord.testing.tls import make_certificates
from zkcoord.zk.session import connect, ensure_chroot

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

BROKER_ID = 0
PROXY_ID = 9000
ALICE, ALICE_PASSWORD = "alice", "alice-secret"  # SCRAM-SHA-256 and PLAIN, at the proxy
BOB, BOB_PASSWORD = "bob", "bob-secret"  # PLAIN at the proxy, no ACL on the locked group
UPSTREAM_USER, UPSTREAM_PASSWORD = "proxyup", "upstream-secret"  # the proxy's own login at the broker
COORDINATED = "proxied-.*"


@dataclass
class Stack:
    zk_connect: str
    ca: Path
    broker: NodeProcess
    proxy: subprocess.Popen[str]
    proxy_port: int
    proxy_broker_port: int
    lines: list[str]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy_port}"

    def kafka_python(
        self, mechanism: str = "SCRAM-SHA-256", user: str = ALICE, password: str = ALICE_PASSWORD
    ) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": password, "ssl_cafile": str(self.ca)}  # fmt: skip

    def librdkafka(
        self, mechanism: str = "SCRAM-SHA-256", user: str = ALICE, password: str = ALICE_PASSWORD
    ) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(self.ca)}  # fmt: skip

    def upstream_kafka_python(self) -> dict[str, Any]:
        """Straight to the broker, as the proxy logs in there."""
        return {"bootstrap_servers": self.broker.bootstrap, "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": UPSTREAM_USER,
                "sasl_plain_password": UPSTREAM_PASSWORD, "ssl_cafile": str(self.ca)}  # fmt: skip


def _zkcoord(*argv: str) -> None:
    """One `zkcoord` command run in this process (its own parsing and code), exit status 0."""
    from zkcoord.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(list(argv))
    assert status == 0, (argv, out.getvalue())


def _scram_user(zk_connect: str, user: str, password: str, mechanism: str, d: Path) -> None:
    secret = d / f"{user}-{mechanism}.password"
    secret.write_text(password + "\n")
    _zkcoord("security", "add-scram-user", "--zk", zk_connect, "--user", user, "--password-file", str(secret),
             "--mechanism", mechanism)  # fmt: skip


class Lines(list[str]):
    """A process's output lines as read so far; `wait_for` blocks until one satisfies a check."""

    def __init__(self) -> None:
        super().__init__()
        self._added = threading.Condition()

    def append(self, line: str) -> None:
        with self._added:
            super().append(line)
            self._added.notify_all()

    def wait_for(self, check: Callable[[str], bool], timeout: float) -> bool:
        with self._added:
            return self._added.wait_for(lambda: any(check(line) for line in self), timeout)


def start_proxy(
    zk_connect: str, d: Path, port: int, broker_port: int, *extra: str
) -> tuple[subprocess.Popen[str], Lines]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "zkcoord", "-v", "proxy", "--zk", zk_connect, "--node-id", str(PROXY_ID),
         "--data-dir", str(d / f"proxy-{port}"), "--broker-port", f"{BROKER_ID}={broker_port}", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines = Lines()
    ready = threading.Event()

    def pump() -> None:  # read all along: a full pipe would stop the proxy at its next log line
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if f"zkcoord proxy: broker {BROKER_ID} behind" in line:  # printed once every port listens
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(30):
        proc.kill()
        proc.wait(10)
        raise AssertionError("proxy did not start:\n" + "".join(lines[-40:]))
    return proc, lines


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, zk_server: Any) -> Iterator[Stack]:
    d = tmp_path_factory.mktemp("proxy-security")
    ca, keystore = make_certificates(d)
    zk_connect = ensure_chroot(zk_server.hosts, f"/proxy-security-{uuid.uuid4().hex[:8]}")
    _scram_user(zk_connect, ALICE, ALICE_PASSWORD, "SCRAM-SHA-256", d)
    _scram_user(zk_connect, UPSTREAM_USER, UPSTREAM_PASSWORD, "SCRAM-SHA-512", d)
    jaas = d / "kafka_server_jaas.conf"
    jaas.write_text(
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        f'  user_{ALICE}="{ALICE_PASSWORD}" user_{BOB}="{BOB_PASSWORD}" user_{UPSTREAM_USER}="{UPSTREAM_PASSWORD}";\n}};\n'
    )
    # The cluster's broker: SASL_SSL only, SCRAM from the same ZooKeeper (as a Kafka cluster keeps its users).
    broker = NodeProcess(d / "broker", (*FAST_GROUP_FLAGS, "--num.partitions=2", "--security-zk", zk_connect,
                                        "--sasl.enabled.mechanisms", "SCRAM-SHA-512,PLAIN", "--jaas-config", str(jaas),
                                        "--ssl.keystore.location", str(keystore)), protocol="SASL_SSL")  # fmt: skip
    broker.start()
    zk = connect(zk_connect)
    try:
        registration = BrokerRegistration.create(
            "127.0.0.1",
            broker.port,
            timestamp_ms=int(time.time() * 1000),
            endpoints=[f"SASL_SSL://127.0.0.1:{broker.port}"],
        )  # what a Kafka 2.x broker with one SASL_SSL listener writes
        zk.create(paths.broker_path(BROKER_ID), registration.encode(), ephemeral=True, makepath=True)
        up = d / "upstream.properties"
        up.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{UPSTREAM_USER}" password="{UPSTREAM_PASSWORD}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        )
        port, broker_port = free_port(), free_port()
        proxy, lines = start_proxy(
            zk_connect, d, port, broker_port, "--listeners", f"SASL_SSL://127.0.0.1:{port}",
            "--ssl.keystore.location", str(keystore), "--jaas-config", str(jaas), "--command-config", str(up),
            "--bridge-zk-groups", COORDINATED,
            "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
            "--allow.everyone.if.no.acl.found", "true",
        )  # fmt: skip
        try:
            yield Stack(zk_connect, ca, broker, proxy, port, broker_port, lines)
        finally:
            stop(proxy)
    finally:
        zk.stop()
        zk.close()
        broker.stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def register_topic(stack: Stack, topic: str, partitions: int = 2) -> None:
    """What the cluster's controller writes for a topic (the proxy's mixed groups assign the partitions listed in
    /brokers/topics, as a ZooKeeper-era consumer does): every partition on the one broker."""
    zk = connect(stack.zk_connect)
    try:
        zk.create(paths.topic_path(topic), TopicAssignment.of({p: [BROKER_ID] for p in range(partitions)}).encode(),
                  makepath=True)  # fmt: skip
        for p in range(partitions):
            state = PartitionState(BROKER_ID, 0, (BROKER_ID,), 1)
            zk.create(paths.partition_state_path(topic, p), state.encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


def upstream_groups(stack: Stack) -> set[str]:
    """The groups the broker's own coordinator knows, asked straight (not through the proxy)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(**stack.upstream_kafka_python())
    try:
        return {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


def coordinator_of(consumer: Any) -> str:
    """The coordinator a kafka-python consumer found (`coordinator-<node id>`)."""
    return str(consumer._coordinator.coordinator_id)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_kafka_python_produces_and_consumes_in_a_proxy_coordinated_group(
    stack: Stack, mechanism: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = _name("kp-sec"), _name("proxied-kp")
    producer = KafkaProducer(**stack.kafka_python(mechanism))
    try:
        metas = [producer.send(topic, b"v%d" % i).get(30) for i in range(20)]
    finally:
        producer.close()
    assert len({(m.partition, m.offset) for m in metas}) == 20
    register_topic(stack, topic)
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             **stack.kafka_python(mechanism))  # fmt: skip
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        assert sorted(values) == sorted(b"v%d" % i for i in range(20)), "".join(stack.lines[-60:])
        consumer.commit()
        # The proxy coordinates the group: the coordinator the client found is the proxy node, and the broker's own
        # coordinator never saw it.
        assert coordinator_of(consumer) == f"coordinator-{PROXY_ID}"
        assert sum(consumer.committed(tp) or 0 for tp in consumer.assignment()) == 20
    finally:
        consumer.close()
    assert group not in upstream_groups(stack)


def test_confluent_kafka_produces_and_consumes_in_a_proxy_coordinated_group(stack: Stack) -> None:
    from confluent_kafka import Consumer, Producer

    topic, group = _name("ck-sec"), _name("proxied-ck")
    producer = Producer(stack.librdkafka())
    delivered: list[Any] = []
    for i in range(20):
        producer.produce(
            topic, b"c%d" % i, on_delivery=lambda err, msg: delivered.append(err or msg.offset())
        )
    assert producer.flush(30) == 0
    assert len(delivered) == 20 and all(isinstance(x, int) for x in delivered), delivered
    register_topic(stack, topic)
    consumer = Consumer({**stack.librdkafka(), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert sorted(values) == sorted(b"c%d" % i for i in range(20))
        offsets = consumer.commit(asynchronous=False)
        assert sum(tp.offset for tp in offsets if tp.offset >= 0) == 20
    finally:
        consumer.close()
    assert group not in upstream_groups(stack)


def test_a_group_the_proxy_does_not_coordinate_goes_to_the_brokers_coordinator(stack: Stack) -> None:
    """Forwarded on the client's own upstream connection, logged in as the proxy: the broker's group."""
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = _name("fw-sec"), _name("theirs")
    producer = KafkaProducer(**stack.kafka_python())
    try:
        producer.send(topic, b"x").get(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **stack.kafka_python())
    try:
        deadline = time.monotonic() + 60
        got: list[bytes] = []
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        assert got == [b"x"]
        assert coordinator_of(consumer) == f"coordinator-{BROKER_ID}"
        assert group in upstream_groups(stack)
    finally:
        consumer.close()


def test_group_acls_are_checked_for_the_groups_the_proxy_coordinates(stack: Stack) -> None:
    """Read on the group for alice only: bob (logged in with PLAIN) is refused GROUP_AUTHORIZATION_FAILED at
    FindCoordinator and JoinGroup never reaches the coordinator; alice joins."""
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    group, topic = _name("proxied-locked"), _name("acl-sec")
    register_topic(stack, topic)
    _zkcoord("security", "add-acl", "--zk", stack.zk_connect, "--allow-principal", f"User:{ALICE}",
             "--operation", "Read", "--group", group)  # fmt: skip
    bob = KafkaConsumer(group_id=group, **stack.kafka_python("PLAIN", BOB, BOB_PASSWORD))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            bob.subscribe([topic])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                bob.poll(timeout_ms=500)
    finally:
        bob.close()
    alice = KafkaConsumer(group_id=group, **stack.kafka_python("PLAIN"))
    try:
        alice.subscribe([topic])
        deadline = time.monotonic() + 60
        while coordinator_of(alice) != f"coordinator-{PROXY_ID}" and time.monotonic() < deadline:
            alice.poll(timeout_ms=200)
        assert coordinator_of(alice) == f"coordinator-{PROXY_ID}"
    finally:
        alice.close()


def test_a_wrong_password_is_refused_by_the_proxy(stack: Stack) -> None:
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPKafkaError

    with pytest.raises(KPKafkaError):  # it retries its bootstrap until the timeout: kept short
        KafkaProducer(
            **stack.kafka_python("SCRAM-SHA-256", ALICE, "wrong"), bootstrap_timeout_ms=2000
        ).close()
    errors: list[Any] = []
    producer = Producer({**stack.librdkafka("SCRAM-SHA-256", ALICE, "wrong"), "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    del producer  # no retrying after the test
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert any("Authentication failed" in str(e) for e in errors), errors
    failed = "authentication failed: Authentication failed during authentication due to invalid credentials"
    assert sum(failed in line for line in stack.lines) >= 2, "".join(
        stack.lines[-20:]
    )  # both clients, logged


def _api_versions_v0() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def test_a_client_without_tls_is_refused(stack: Stack) -> None:
    """Plain bytes on the SASL_SSL ports (bootstrap and broker port): no Kafka answer, the connection ends; and a
    TLS client that does not log in gets nothing past ApiVersions."""
    for port in (stack.proxy_port, stack.proxy_broker_port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(_api_versions_v0())
            data = b""
            while chunk := s.recv(4096):  # until the proxy closes (the socket's timeout bounds it)
                data += chunk
            assert struct.pack(">i", 7) not in data  # at most a TLS alert: no Kafka answer (correlation id 7)
    ctx = ssl.create_default_context(cafile=str(stack.ca))
    with (
        socket.create_connection(("127.0.0.1", stack.proxy_port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        s.sendall(_api_versions_v0())
        (size,) = struct.unpack(">i", _read(s, 4))
        answer = _read(s, size)
        assert struct.unpack_from(">ih", answer) == (7, 0)  # ApiVersions is answered before the login
        metadata = struct.pack(">hhih", 3, 0, 8, 4) + b"test" + struct.pack(">i", 0)
        s.sendall(struct.pack(">i", len(metadata)) + metadata)
        assert s.recv(4096) == b""  # Metadata before the login: closed, unanswered


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, f"closed after {len(out)} of {n} bytes"
        out += chunk
    return out


def test_the_proxy_with_a_wrong_upstream_password_forwards_nothing(stack: Stack, tmp_path: Path) -> None:
    """A second proxy whose --command-config password the broker refuses: each client connection is closed
    (the broker's SASL_AUTHENTICATION_FAILED is in the proxy's log), no client frame reaches the broker."""
    up = tmp_path / "wrong.properties"
    up.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={UPSTREAM_USER}\nsasl.password=wrong\nssl.truststore.location={stack.ca}\n"
    )
    port, broker_port = free_port(), free_port()
    proc, lines = start_proxy(stack.zk_connect, tmp_path, port, broker_port,
                              "--listen", f"127.0.0.1:{port}", "--command-config", str(up))  # fmt: skip
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(_api_versions_v0())
            assert s.recv(4096) == b""  # closed, unanswered: the broker refused the proxy's login
        lines.wait_for(lambda line: "error 58" in line, 10)
        assert any(
            f"broker 127.0.0.1:{stack.broker.port}" in line and "error 58" in line for line in lines
        ), lines
    finally:
        stop(proc)


def test_a_proxy_logging_in_upstream_with_plain_carries_a_plaintext_client(
    stack: Stack, tmp_path: Path
) -> None:
    """The other mechanism of --command-config: PLAIN over TLS to the broker, a PLAINTEXT listener to clients."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    up = tmp_path / "plain.properties"
    up.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{UPSTREAM_USER}" password="{UPSTREAM_PASSWORD}";\nssl.truststore.location={stack.ca}\n'
    )
    port, broker_port = free_port(), free_port()
    proc, lines = start_proxy(stack.zk_connect, tmp_path, port, broker_port,
                              "--listen", f"127.0.0.1:{port}", "--command-config", str(up))  # fmt: skip
    try:
        topic = _name("plain-up")
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            meta = producer.send(topic, b"through", partition=0).get(30)
        finally:
            producer.close()
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition(topic, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while not got and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    got.extend(r.value for r in records)
            assert got == [b"through"] and meta.offset == 0
        finally:
            consumer.close()
        assert not any("login failed" in line for line in lines), lines
    finally:
        stop(proc)


def _group_store(config: dict[str, Any], group: str) -> Any:
    """zkcoord's admin view of `group` at the coordinator `config`'s bootstrap names (the proxy or the broker)."""
    from zkcoord.bridge.broker_store import BrokerOffsetStore

    security = {k: v for k, v in config.items() if k != "bootstrap_servers"}
    return BrokerOffsetStore(config["bootstrap_servers"], group, security=security)


def _committed(config: dict[str, Any], group: str) -> dict[int, int]:
    """The group's committed offsets, by partition."""
    with _group_store(config, group) as store:
        read = store.read_offsets()
    assert read.request_error is None and not read.errors, read
    return {tp.partition: offset for tp, offset in read.offsets.items()}


def _broker_members(stack: Stack, group: str) -> list[str]:
    """The client ids of the members of the broker's own group `group` (asked straight, not through the proxy)."""
    with _group_store(stack.upstream_kafka_python(), group) as store:
        return sorted(m["client_id"] for m in store.describe()["members"])


def test_migrate_handoff_against_the_secured_proxy_takes_command_config(stack: Stack, tmp_path: Path) -> None:
    """`migrate handoff` for a one-member group the SASL_SSL proxy coordinates. Without --command-config it stops
    within its request timeout with a message naming the proxy and --command-config, and writes nothing; with one
    (PLAIN over TLS as alice, whom both the proxy and the broker accept) the member, a kafka-python consumer through
    the proxy, ends up in the broker's own group, which has its committed offsets, and goes on consuming there."""
    from kafka import KafkaProducer

    from zkcoord.cli import main
    from zkcoord.testing.members import KafkaPythonMember
    from zkcoord.zk.handoff import handoff_path
    from zkcoord.zk.session import wait_for

    topic, group = _name("handoff-sec"), _name("proxied-handoff")

    def produce(count: int, prefix: bytes) -> None:
        producer = KafkaProducer(**stack.kafka_python())
        try:
            for i in range(count):
                meta = producer.send(topic, prefix + b"%d" % i, partition=i % 2).get(30)
                ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
        finally:
            producer.close()

    ends: dict[int, int] = {}
    produce(20, b"before-")
    register_topic(stack, topic)
    client = stack.kafka_python("PLAIN")
    member = KafkaPythonMember(client.pop("bootstrap_servers"), group, topic, config=client).start()
    try:
        wait_for(
            lambda: len(member.consumed) >= 20, 60, "the member reading the 20 records through the proxy"
        )
        wait_for(
            lambda: _committed(stack.kafka_python(), group) == ends, 30, "its offsets committed at the proxy"
        )
        assert coordinator_of(member.consumer) == f"coordinator-{PROXY_ID}"
        assert group not in upstream_groups(stack)  # the broker's coordinator has never seen the group

        argv = ["migrate", "handoff", "--zk", stack.zk_connect, "--group", group, "--state-dir", str(tmp_path / "s"),
                "--request-timeout-ms", "3000", "--timeout-ms", "60000"]  # fmt: skip
        out = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = main(argv)
        assert status == 2, out.getvalue()
        assert time.monotonic() - started < 30
        message = out.getvalue()
        stopped = f"group {group}: hand-off stopped: DescribeGroups {group} through the proxies"
        assert f"{stopped} (127.0.0.1:{stack.proxy_port}) failed: " in message, message
        assert "connected in PLAINTEXT: a TLS or SASL listener needs --command-config FILE" in message, (
            message
        )
        assert "Traceback" not in message
        zk = connect(stack.zk_connect)
        try:
            assert (
                zk.exists(handoff_path(group)) is None
            )  # nothing written: the members keep the proxy's group
        finally:
            zk.stop()
            zk.close()
        assert not (tmp_path / "s").exists() or not list((tmp_path / "s").iterdir())

        properties = tmp_path / "client.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ALICE}" password="{ALICE_PASSWORD}";\nssl.truststore.location={stack.ca}\n'
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = main([*argv, "--command-config", str(properties)])
        assert status == 0, out.getvalue()
        assert (
            f"{len(ends)} committed offset(s) written to the cluster's coordinator and read back equal"
            in out.getvalue()
        )
        assert "handed off: the cluster's coordinator has it (Stable, 1 member(s))" in out.getvalue()
        assert _broker_members(stack, group) == [member.client_id]
        assert _committed(stack.upstream_kafka_python(), group) == ends
        # on at the broker's coordinator (through the proxy): what is produced now is read and committed there
        produce(10, b"after-")
        wait_for(lambda: len(member.consumed) >= 30, 60, "the member reading the 10 new records")
        wait_for(
            lambda: _committed(stack.upstream_kafka_python(), group) == ends, 30, "their offsets committed"
        )
        assert coordinator_of(member.consumer) == f"coordinator-{BROKER_ID}"
        assert sorted(member.consumed) == sorted(
            set(member.consumed)
        )  # nothing read twice: no offset was lost
    finally:
        member.stop()
