"""Real clients over SASL_SSL against one shared `zkcoord serve` (TLS from PEM files made here with openssl,
PLAIN users from a JAAS KafkaServer section, SCRAM credentials in ZooKeeper /config/users): kafka-python,
confluent-kafka and kcat produce, consume and form a group with each mechanism; a wrong password is refused with
Kafka's error; a credential written to /config/users by the test itself, not by zkcoord, logs in. The server
authorizes with Kafka's ACLs (allow.everyone.if.no.acl.found, so resources without ACLs stay open): a principal
without Read on a group is refused with GROUP_AUTHORIZATION_FAILED and changes nothing; one with the ACLs works;
an ACL written to /kafka-acl in Kafka's JSON by the test is honoured. A second node's SSL listener requires client
certificates (ssl.client.auth=required): the principal is the certificate's subject DN, as Kafka names it."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import io
import json
import logging
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as KPErrors
from kafka.errors import KafkaError as KPKafkaError
from kafka.structs import OffsetAndMetadata

from zkcoord.local.node import FAST_GROUP_FLAGS
from zkcoord.local.node import NodeProcess as ServerProcess
from zkcoord.local.zookeeper import free_port
from zkcoord.server import kafka_protocol as kp
from zkcoord.testing.tls import make_certificates
from zkcoord.testing.tls import openssl as _openssl
from zkcoord.zk.session import connect, ensure_chroot

pytestmark = pytest.mark.e2e

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_USERS = {"alice": "alice-secret", "mallory": "mallory-secret"}
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-secret"
KAFKA_USER, KAFKA_PASSWORD = "made-by-kafka", "kafka-tool-secret"


def kafka_format_credential(mechanism: str, password: str) -> str:
    """What Kafka's ScramFormatter + ScramCredentialUtils store, computed here independently of zkcoord."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    salt, iterations = os.urandom(24), 4096
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return (
        f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"
    )


@dataclass
class Secured:
    server: ServerProcess
    bootstrap: str  # the SASL_SSL listener
    ca: Path
    zk_connect: str

    def credentials(self, mechanism: str) -> tuple[str, str]:
        return ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)

    def kafka_python(self, mechanism: str, user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
            "ssl_cafile": str(self.ca),
        }

    def librdkafka(self, mechanism: str, user: str, password: str) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca),
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, zk_server: Any) -> Iterator[Secured]:
    d = tmp_path_factory.mktemp("kafka-security")
    ca, keystore = make_certificates(d)
    jaas = d / "kafka_server_jaas.conf"
    users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    jaas.write_text(
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        f'  username="alice" password="alice-secret" {users};\n}};\n'
    )
    zk_connect = ensure_chroot(zk_server.hosts, f"/kafka-security-{uuid.uuid4().hex[:8]}")
    # One SCRAM user through zkcoord's own tool ...
    _add_scram_user_with_zkcoord(zk_connect, SCRAM_USER, SCRAM_PASSWORD, d)
    sasl_port = free_port()
    flags = (*FAST_GROUP_FLAGS, "--num.partitions=2", "--listeners", f"SASL_SSL://127.0.0.1:{sasl_port}",
             "--security-zk", zk_connect, "--jaas-config", str(jaas), "--ssl.keystore.location", str(keystore),
             "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
             "--allow.everyone.if.no.acl.found", "true")  # fmt: skip
    server = ServerProcess(d / "data", flags)
    server.start()
    try:
        yield Secured(server, f"127.0.0.1:{sasl_port}", ca, zk_connect)
    finally:
        server.stop()
        server.kill9()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_consumes_and_commits_in_a_group(secured: Secured, mechanism: str) -> None:
    cfg = secured.kafka_python(mechanism, *secured.credentials(mechanism))
    topic, group = _topic("kp-sec"), _topic("kp-group")
    producer = KafkaProducer(**cfg)
    try:
        metas = [producer.send(topic, value=b"m%d" % i).get(30) for i in range(6)]
    finally:
        producer.close()
    assert sorted(m.offset for m in metas if m.partition == metas[0].partition)[0] == 0
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **cfg)
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        assert sorted(values) == sorted(b"m%d" % i for i in range(6))
        assert consumer.assignment()  # the group formed and gave this member the partitions
        consumer.commit()
        committed = {tp.partition: consumer.committed(tp) for tp in consumer.assignment()}
        assert sum(committed.values()) == 6
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_consumes_and_commits_in_a_group(secured: Secured, mechanism: str) -> None:
    cfg = secured.librdkafka(mechanism, *secured.credentials(mechanism))
    topic, group = _topic("ck-sec"), _topic("ck-group")
    producer = Producer(cfg)
    delivered: list[Any] = []
    for i in range(6):
        producer.produce(
            topic, b"c%d" % i, on_delivery=lambda err, msg: delivered.append(err or msg.offset())
        )
    assert producer.flush(30) == 0
    assert len(delivered) == 6 and all(isinstance(x, int) for x in delivered), delivered
    consumer = Consumer(
        {**cfg, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert sorted(values) == sorted(b"c%d" % i for i in range(6))
        offsets = consumer.commit(asynchronous=False)
        # Two partitions: the producer may put all six records in one; the other commits nothing (-1001).
        assert sum(tp.offset for tp in offsets if tp.offset >= 0) == 6
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_produces_and_consumes_in_a_group(secured: Secured, mechanism: str) -> None:
    user, password = secured.credentials(mechanism)
    security = ["-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanisms={mechanism}",
                "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
                "-X", f"ssl.ca.location={secured.ca}"]  # fmt: skip
    topic, group = _topic("kcat-sec"), _topic("kcat-group")
    put = subprocess.run(["kcat", "-b", secured.bootstrap, *security, "-P", "-t", topic],
                         input=b"a\nb\nc\n", capture_output=True, timeout=60)  # fmt: skip
    assert put.returncode == 0, put.stderr.decode()
    out = subprocess.run(["kcat", "-b", secured.bootstrap, *security, "-G", group, "-c", "3", "-f", "%s\n",
                          "-X", "auto.offset.reset=earliest", topic],
                         check=True, capture_output=True, timeout=90)  # fmt: skip
    assert sorted(out.stdout.decode().split()) == ["a", "b", "c"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_refused_with_kafkas_error(secured: Secured, mechanism: str) -> None:
    user, _ = secured.credentials(mechanism)
    errors: list[KafkaError] = []
    cfg = {**secured.librdkafka(mechanism, user, "wrong-password"), "error_cb": errors.append}
    admin = AdminClient(cfg)
    deadline = time.monotonic() + 30
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        admin.poll(0.2)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "Authentication failed" in auth[0].str()


def test_kafka_python_reads_error_58_for_a_wrong_password(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python 3.0.12 logs the error, then retries its bootstrap until it gives up (it never raises 58);
    one mechanism here (all three are refused above, through librdkafka), and its bootstrap bounded to 3 s."""
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KPKafkaError):
        KafkaProducer(
            **secured.kafka_python("SCRAM-SHA-256", SCRAM_USER, "wrong-password"),
            max_block_ms=3000,
            bootstrap_timeout_ms=3000,
        )
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text


def test_a_credential_written_in_kafkas_format_by_another_tool_logs_in(secured: Secured) -> None:
    client = connect(secured.zk_connect)
    try:
        config = {m: kafka_format_credential(m, KAFKA_PASSWORD) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
        client.create(f"/config/users/{KAFKA_USER}", json.dumps({"version": 1, "config": config}).encode(),
                      makepath=True)  # fmt: skip
    finally:
        client.stop()
        client.close()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        producer = KafkaProducer(**secured.kafka_python(mechanism, KAFKA_USER, KAFKA_PASSWORD))
        try:
            assert producer.send(_topic("kafka-made"), b"x").get(30).offset == 0
        finally:
            producer.close()


def test_requests_before_login_close_the_connection(secured: Secured) -> None:
    """Metadata on the SASL_SSL listener without SaslHandshake: closed unanswered, as Kafka does."""
    ctx = ssl.create_default_context(cafile=str(secured.ca))
    host, port = secured.bootstrap.split(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as s,
    ):
        s.sendall(kp.encode_request(kp.METADATA, 1, 7, "probe", topics=None))
        assert s.recv(4) == b""  # EOF: closed without an answer
    # ... while ApiVersions is served before login (clients ask it first)
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as s,
    ):
        s.sendall(kp.encode_request(kp.API_VERSIONS, 0, 8, "probe"))
        (size,) = struct.unpack(">i", s.recv(4))
        assert size > 4


def _zkcoord(*argv: str) -> None:
    """One `zkcoord` command run in this process (its own argument parsing and code, exit status 0), without
    a new interpreter's start-up: about 1 CPU s each, and this module runs a dozen."""
    from zkcoord.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(list(argv))
    assert status == 0, (argv, out.getvalue())


def _add_acl_with_zkcoord(zk_connect: str, *args: str) -> None:
    _zkcoord("security", "add-acl", "--zk", zk_connect, *args)


def _add_scram_user_with_zkcoord(zk_connect: str, user: str, password: str, d: Path) -> None:
    secret = d / f"{user}.password"
    secret.write_text(password + "\n")
    _zkcoord("security", "add-scram-user", "--zk", zk_connect, "--user", user, "--password-file", str(secret))


def test_group_and_topic_acls_refuse_without_changing_anything_and_allow_with_them(secured: Secured) -> None:
    topic, group, probe = _topic("acl-topic"), _topic("acl-group"), _topic("acl-probe")
    alice = secured.kafka_python("PLAIN", "alice", PLAIN_USERS["alice"])
    mallory = secured.kafka_python("PLAIN", "mallory", PLAIN_USERS["mallory"])
    # The group's ACLs written by the test in Kafka's JSON, as kafka-acls.sh leaves them (not through zkcoord):
    # alice may read the group, mallory only describe it (so she finds its coordinator, and is refused there).
    client = connect(secured.zk_connect)
    try:
        acls = [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": "User:mallory", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        ]
        client.create(f"/kafka-acl/Group/{group}", json.dumps({"version": 1, "acls": acls}).encode(),
                      makepath=True)  # fmt: skip
    finally:
        client.stop()
        client.close()
    # The topics' through zkcoord's tool: alice reads and writes; mallory may read the topic, not the group.
    _add_acl_with_zkcoord(secured.zk_connect, "--topic", topic, "--allow-principal", "User:alice",
                          "--operation", "Read", "--operation", "Write")  # fmt: skip
    _add_acl_with_zkcoord(secured.zk_connect, "--topic", topic, "--allow-principal", "User:mallory",
                          "--operation", "Read")  # fmt: skip
    _add_acl_with_zkcoord(secured.zk_connect, "--topic", probe, "--allow-principal", "User:alice",
                          "--operation", "Write")  # fmt: skip
    # Written last, so once the server refuses mallory on the probe topic it holds every ACL above.
    probe_producer = KafkaProducer(**mallory, max_block_ms=5000)
    try:
        deadline = time.monotonic() + 30
        refused = False
        while not refused and time.monotonic() < deadline:
            try:
                probe_producer.send(probe, b"probe").get(10)
            except KPErrors.TopicAuthorizationFailedError:
                refused = True
        assert refused, "the probe topic's ACL never took effect"
    finally:
        probe_producer.close()

    producer = KafkaProducer(**alice)
    try:
        assert [producer.send(topic, b"a%d" % i, partition=0).get(30).offset for i in range(3)] == [0, 1, 2]
    finally:
        producer.close()

    # mallory: an offset commit and a join are both refused with 30, and neither reaches the coordinator.
    _commit_and_join_are_refused(mallory, topic, group)
    admin = KafkaAdminClient(**alice)
    try:
        assert admin.list_group_offsets(group) == {group: {}}  # no commit stored
        assert admin.describe_groups([group])[group]["members"] == []  # no member joined
    finally:
        admin.close()

    # alice, with Read on the group and the topic: consumes in the group and commits (confluent-kafka).
    consumer = Consumer({**secured.librdkafka("PLAIN", "alice", PLAIN_USERS["alice"]), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [b"a0", b"a1", b"a2"]
        committed = consumer.commit(asynchronous=False)
        assert [tp.offset for tp in committed if tp.partition == 0] == [3]  # partition 1 holds nothing
    finally:
        consumer.close()
    admin = KafkaAdminClient(**alice)
    try:
        assert admin.list_group_offsets(group)[group][TopicPartition(topic, 0)].offset == 3
    finally:
        admin.close()


def test_migrate_plan_and_verify_reach_the_sasl_ssl_listener_with_command_config(
    secured: Secured, tmp_path: Path
) -> None:
    topic, group = _topic("mig-topic"), _topic("mig-group")
    cfg = secured.kafka_python("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)
    consumer = KafkaConsumer(group_id=group, enable_auto_commit=False, **cfg)
    try:
        producer = KafkaProducer(**cfg)
        try:
            producer.send(topic, b"x", partition=0).get(30)
        finally:
            producer.close()
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca}\nsasl.jaas.config=org.apache.kafka.common.security.scram."
        f'ScramLoginModule required username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";\n'
    )
    base = [sys.executable, "-m", "zkcoord", "migrate"]
    where = ["--zk", secured.zk_connect, "--bootstrap", secured.bootstrap, "--group", group,
             "--state-dir", str(tmp_path / "journals")]  # fmt: skip
    for step in ("plan", "verify"):
        run = subprocess.run([*base, step, *where, "--command-config", str(props)], capture_output=True,
                             text=True, timeout=120)  # fmt: skip
        assert group in run.stdout + run.stderr, (step, run.stdout, run.stderr)
        assert "SASL" not in run.stderr and "Traceback" not in run.stderr, (step, run.stderr)
    # the broker's side was read: plan names the committed offset it found there
    plan = subprocess.run([*base, "plan", *where, "--command-config", str(props)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert "offsets: 0 in ZooKeeper, 1 on the broker" in plan.stdout, plan.stdout
    bad = tmp_path / "typo.properties"
    bad.write_text("security.protocoll=SASL_SSL\n")
    refused = subprocess.run([*base, "plan", *where, "--command-config", str(bad)], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert refused.returncode != 0 and "security.protocoll" in refused.stderr


def test_a_legacy_member_fetches_over_sasl_ssl_with_command_config(
    secured: Secured, zk_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`zkcoord legacy consume --command-config`: the member finds the leader in /brokers/ids of its ZooKeeper,
    so the module's single node (which registers nowhere) cannot serve it. As the other legacy-member tests do,
    a `serve --zk` cluster node is used: one SASL_SSL listener, the module's certificate and PLAIN users."""
    from zkcoord.cli import main

    d = secured.ca.parent  # the module's certificates and KafkaServer JAAS file
    zk_connect = ensure_chroot(zk_server.hosts, f"/kafka-security-legacy-{uuid.uuid4().hex[:8]}")
    port = free_port()
    node = ServerProcess(
        tmp_path / "node",
        (*FAST_GROUP_FLAGS, "--zk", zk_connect, "--node-id", "1", "--num.partitions=2",
         "--jaas-config", str(d / "kafka_server_jaas.conf"),
         "--ssl.keystore.location", str(d / "keystore.pem")),
        port, protocol="SASL_SSL",
    )  # fmt: skip
    node.start()
    try:
        cfg = {
            **secured.kafka_python("PLAIN", "alice", PLAIN_USERS["alice"]),
            "bootstrap_servers": f"127.0.0.1:{port}",
        }
        topic = _topic("legacy-sec")
        producer = KafkaProducer(**cfg)
        try:
            for i in range(6):
                producer.send(topic, b"l%d" % i, partition=i % 2).get(30)
        finally:
            producer.close()
        props = tmp_path / "client.properties"
        props.write_text(
            f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.truststore.type=PEM\nssl.truststore.location={secured.ca}\n"
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
            f'password="{PLAIN_USERS["alice"]}";\n'
        )
        member = [sys.executable, "-m", "zkcoord", "legacy", "consume", "--zk", zk_connect, "--group", "legacy-sec",
                  "--topic", topic, "--from-beginning", "--max-messages", "6", "--timeout-ms", "60000"]  # fmt: skip
        run = subprocess.run([*member, "--command-config", str(props)], capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL)  # fmt: skip
        assert run.returncode == 0, run.stderr.decode()[-3000:]
        assert sorted(run.stdout.split()) == sorted(b"l%d" % i for i in range(6))
        assert b"Processed a total of 6 messages (max-messages)" in run.stderr
    finally:
        node.stop()
    bad = tmp_path / "typo.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nssl.trustore.location=/ca.pem\n")
    assert main(["legacy", "consume", "--zk", zk_connect, "--group", "g", "--topic", "t",
                 "--command-config", str(bad)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "typo.properties" in err and "'ssl.trustore.location'" in err, err


@dataclass
class ClusterNode:
    node: ServerProcess
    zk_connect: str
    ca: Path
    users: dict[str, str]  # SCRAM-SHA-256 user -> password
    topic: str  # alice: Read, Write, Create; mallory: Read
    group: str  # alice: Read; mallory: Describe
    compare_topic: str  # comparer: Create, Write, Read (the comparison run's scenario topic)

    def client(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.node.bootstrap, "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": user,
                "sasl_plain_password": self.users[user], "ssl_cafile": str(self.ca)}  # fmt: skip


@pytest.fixture(scope="module")
def cluster_node(
    secured: Secured, tmp_path_factory: pytest.TempPathFactory, zk_server: Any
) -> Iterator[ClusterNode]:
    """One `serve --zk` node whose only listener is SASL_SSL (SCRAM credentials and ACLs under its own --zk,
    allow.everyone.if.no.acl.found off). Its users and ACLs are written before it starts, so its ACL cache holds
    them from the first request."""
    d = tmp_path_factory.mktemp("cluster-security")
    ca, keystore = secured.ca, secured.ca.parent / "keystore.pem"  # the module's certificates
    zk_connect = ensure_chroot(zk_server.hosts, f"/cluster-security-{uuid.uuid4().hex[:8]}")
    users = {"alice": "alice-scram", "mallory": "mallory-scram", "comparer": "comparer-scram"}
    for user, password in users.items():
        _add_scram_user_with_zkcoord(zk_connect, user, password, d)
    topic, group, compare_topic = _topic("cl-topic"), _topic("cl-group"), _topic("cmp-orders")
    _add_acl_with_zkcoord(zk_connect, "--topic", topic, "--allow-principal", "User:alice",
                          "--operation", "Read", "--operation", "Write", "--operation", "Create")  # fmt: skip
    _add_acl_with_zkcoord(
        zk_connect, "--topic", topic, "--allow-principal", "User:mallory", "--operation", "Read"
    )
    _add_acl_with_zkcoord(
        zk_connect, "--group", group, "--allow-principal", "User:alice", "--operation", "Read"
    )
    _add_acl_with_zkcoord(zk_connect, "--group", group, "--allow-principal", "User:mallory",
                          "--operation", "Describe")  # fmt: skip
    # What a comparison run needs (docs/security.md): its admin client creates each play's topic, its producer
    # writes it, the members read it (Read implies Describe: Metadata, ListOffsets) and join the play's group;
    # topics and groups are named per play (`...-<scenario>-<protocol>-r<i>-<ms>`, unknown beforehand: every one).
    _add_acl_with_zkcoord(zk_connect, "--topic", "*", "--allow-principal", "User:comparer",
                          "--operation", "Create", "--operation", "Write", "--operation", "Read")  # fmt: skip
    _add_acl_with_zkcoord(
        zk_connect, "--group", "*", "--allow-principal", "User:comparer", "--operation", "Read"
    )
    flags = (*FAST_GROUP_FLAGS, "--zk", zk_connect, "--node-id", "1", "--offsets.topic.num.partitions=1",
             "--sasl.enabled.mechanisms", "SCRAM-SHA-256", "--ssl.keystore.location", str(keystore),
             "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer")  # fmt: skip
    node = ServerProcess(d / "data", flags, protocol="SASL_SSL")
    node.start()
    try:
        yield ClusterNode(node, zk_connect, ca, users, topic, group, compare_topic)
    finally:
        node.stop()
        node.kill9()


def test_a_cluster_node_on_sasl_ssl_authenticates_and_authorizes_the_group(cluster_node: ClusterNode) -> None:
    """The module's `serve --zk` node on SASL_SSL: it registers a SASL_SSL endpoint and sends clients back to
    it, mallory (Describe on the group, no Read) is refused with GROUP_AUTHORIZATION_FAILED and changes nothing,
    alice (Read on the group, added by `zkcoord security add-acl`) forms the group and commits."""
    node, topic, group, client = (
        cluster_node.node,
        cluster_node.topic,
        cluster_node.group,
        cluster_node.client,
    )
    registered = connect(cluster_node.zk_connect)
    try:
        registration = json.loads(registered.get("/brokers/ids/1")[0])
    finally:
        registered.stop()
        registered.close()
    assert registration["endpoints"] == [f"SASL_SSL://{node.bootstrap}"]

    producer = KafkaProducer(**client("alice"))  # the login works, and Write (and Create) on the topic
    try:
        assert [producer.send(topic, b"c%d" % i, partition=0).get(30).offset for i in range(3)] == [
            0,
            1,
            2,
        ]
    finally:
        producer.close()

    _commit_and_join_are_refused(client("mallory"), topic, group)
    admin = KafkaAdminClient(**client("alice"))
    try:
        assert admin.list_group_offsets(group) == {group: {}}  # no commit stored
        assert admin.describe_groups([group])[group]["members"] == []  # no member joined
    finally:
        admin.close()

    _read_in_a_group_and_commit(client("alice"), topic, group, [b"c0", b"c1", b"c2"])


def _commit_and_join_are_refused(cfg: dict[str, Any], topic: str, group: str) -> None:
    """A principal without Group Read: its offset commit and its join are both answered
    GROUP_AUTHORIZATION_FAILED (30)."""
    intruder = KafkaConsumer(group_id=group, enable_auto_commit=False, **cfg)
    try:
        with pytest.raises(KPErrors.GroupAuthorizationFailedError):
            intruder.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1)})
        intruder.subscribe([topic])
        with pytest.raises(KPErrors.GroupAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                intruder.poll(timeout_ms=500)
    finally:
        intruder.close()


def _read_in_a_group_and_commit(cfg: dict[str, Any], topic: str, group: str, expected: list[bytes]) -> None:
    """A member of `group` reads `expected` from partition 0 of `topic` and commits past it."""
    consumer = KafkaConsumer(
        topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **cfg
    )
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        assert values == expected
        assert TopicPartition(topic, 0) in consumer.assignment()  # the group formed
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == len(expected)
    finally:
        consumer.close()


COMPARE_PROTOCOLS = ("legacy-fast", "classic-kafka-python", "classic-confluent")


def _zk_children(zk_connect: str, path: str) -> list[str]:
    client = connect(zk_connect)
    try:
        return list(client.get_children(path))
    finally:
        client.stop()
        client.close()


def test_a_comparison_run_against_the_secured_cluster_node(cluster_node: ClusterNode, tmp_path: Path) -> None:
    """`zkcoord compare run --zk --bootstrap --command-config` against the SASL_SSL node, as the principal
    `comparer` with only the ACLs docs/security.md lists: one complete run per protocol (a legacy member, a
    kafka-python and a librdkafka group), nothing lost. Without --command-config it stops at once, saying why."""
    from migration.compare.trace import find_runs, read_events, read_meta

    scenario = tmp_path / "secure.yaml"
    scenario.write_text(
        f"""name: secure
duration_s: 3
session_timeout_ms: 4000
topics:
  - {{name: {cluster_node.compare_topic}, partitions: 2}}
producer: {{rate_per_s: 40, duration_s: 2.5}}
protocols:
"""
        + "".join(f"  {p}: {{members: 2, strategy: range}}\n" for p in COMPARE_PROTOCOLS)
        + "churn:\n  - {at_s: 1.5, event: leave, member: 0}\n"
    )
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={cluster_node.ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="comparer" password="{cluster_node.users["comparer"]}";\n'
    )
    out = tmp_path / "traces"
    cmd = [sys.executable, "-m", "zkcoord", "compare", "run", str(scenario), "--out", str(out), "--no-progress",
           "--zk", cluster_node.zk_connect, "--bootstrap", cluster_node.node.bootstrap]  # fmt: skip
    for protocol in COMPARE_PROTOCOLS:
        cmd += ["--protocol", protocol]
    run = subprocess.run([*cmd, "--command-config", str(props)], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    runs = find_runs([out])
    metas = [read_meta(r) for r in runs]
    assert sorted(m.protocol for m in metas) == sorted(COMPARE_PROTOCOLS)
    for meta in metas:
        assert meta.complete, meta
        summary = (meta.extra or {})["summary"]
        assert summary["produced"] > 0 and summary["lost"] == 0, (meta.protocol, summary)
        assert summary["consumed_unique"] == summary["produced"], (meta.protocol, summary)
    # Plays on a given node share no topic (a partition increase, or a new group reading the plays before it,
    # would leak across): each had its own, named after the play; the traces speak of the scenario's topic.
    on_node = [t for t in _zk_children(cluster_node.zk_connect, "/brokers/topics")
               if t.startswith(f"{cluster_node.compare_topic}-secure-")]  # fmt: skip
    assert len(on_node) == len(COMPARE_PROTOCOLS), on_node
    for r in runs:
        topics = set(read_events(r).column("topic").to_pylist()) - {None}
        assert topics == {cluster_node.compare_topic}, topics

    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=40, stdin=subprocess.DEVNULL)
    assert plain.returncode != 0
    assert "SASL_SSL" in plain.stderr and "--command-config" in plain.stderr, plain.stderr[-3000:]
    assert "Traceback" not in plain.stderr, plain.stderr[-3000:]


# --- TLS client authentication (ssl.client.auth=required on an SSL listener) ----------------------------------

ALICE_SUBJECT, ALICE_DN = "/O=Acme, Inc./OU=clients/CN=alice", "CN=alice,OU=clients,O=Acme\\, Inc."


@dataclass
class Mtls:
    server: ServerProcess
    ca: Path
    certs: dict[str, tuple[Path, Path]]  # name -> (certificate, key), signed by the module's CA
    groups: tuple[str, str]  # groups with a Read ACL for alice's certificate principal only

    def kafka_python(self, name: str | None) -> dict[str, Any]:
        cfg: dict[str, Any] = {"bootstrap_servers": self.server.bootstrap, "security_protocol": "SSL",
                               "ssl_cafile": str(self.ca)}  # fmt: skip
        if name is not None:
            cfg["ssl_certfile"], cfg["ssl_keyfile"] = (str(p) for p in self.certs[name])
        return cfg


@pytest.fixture(scope="module")
def mtls(secured: Secured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mtls]:
    """One extra single node, its only listener SSL with ssl.client.auth=required against the module's CA, ACLs
    from the module's ZooKeeper chroot (allow.everyone.if.no.acl.found: the topics stay open)."""
    d = tmp_path_factory.mktemp("mtls")
    ca_dir = secured.ca.parent
    certs: dict[str, tuple[Path, Path]] = {}
    for name, subject in (("alice", ALICE_SUBJECT), ("bob", "/CN=bob")):
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
                 "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"), cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(secured.ca), "-CAkey",
                 str(ca_dir / "ca.key"), "-CAcreateserial", "-days", "2", "-out", str(d / f"{name}.pem"),
                 cwd=d)  # fmt: skip
        certs[name] = (d / f"{name}.pem", d / f"{name}.key")
    groups = (_topic("mtls-group"), _topic("mtls-group"))
    for group in groups:  # written before the node starts, so its ACL cache holds them from the first request
        _add_acl_with_zkcoord(secured.zk_connect, "--group", group, "--allow-principal", f"User:{ALICE_DN}",
                              "--operation", "Read")  # fmt: skip
    flags = (*FAST_GROUP_FLAGS, "--num.partitions=1", "--security-zk", secured.zk_connect,
             "--ssl.keystore.location", str(ca_dir / "keystore.pem"), "--ssl.client.auth", "required",
             "--ssl.truststore.location", str(secured.ca),
             "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
             "--allow.everyone.if.no.acl.found", "true")  # fmt: skip
    server = ServerProcess(d / "data", flags, protocol="SSL")
    server.start()
    try:
        yield Mtls(server, secured.ca, certs, groups)
    finally:
        server.stop()
        server.kill9()


def test_a_client_certificate_with_an_acl_for_its_subject_commits_in_a_group(mtls: Mtls) -> None:
    topic, group = _topic("mtls-topic"), mtls.groups[0]
    producer = KafkaProducer(**mtls.kafka_python("alice"))
    try:
        assert [producer.send(topic, b"t%d" % i).get(30).offset for i in range(3)] == [0, 1, 2]
    finally:
        producer.close()
    _read_in_a_group_and_commit(mtls.kafka_python("alice"), topic, group, [b"t0", b"t1", b"t2"])


def _api_versions_over_tls(mtls: Mtls, cert: tuple[Path, Path] | None) -> bytes:
    """Send ApiVersions v0 over TLS; what the server answers (b"" when it closed the connection)."""
    ctx = ssl.create_default_context(cafile=str(mtls.ca))
    if cert is not None:
        ctx.load_cert_chain(*(str(p) for p in cert))
    host, port = mtls.server.bootstrap.split(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as s,
    ):
        body = struct.pack(">hhih", kp.API_VERSIONS, 0, 7, 4) + b"test"
        s.sendall(struct.pack(">i", len(body)) + body)
        return s.recv(4)


def test_without_a_client_certificate_the_handshake_is_refused(mtls: Mtls) -> None:
    assert len(_api_versions_over_tls(mtls, mtls.certs["alice"])) == 4  # the same way in with a certificate
    # TLS 1.3: the server refuses the missing certificate after the client's half of the handshake, so the
    # refusal arrives as an alert on the first read (TLS 1.2 would fail in do_handshake; both are SSLError).
    try:
        answer = _api_versions_over_tls(mtls, None)
    except (ssl.SSLError, ConnectionResetError):
        answer = b""  # the refusal (an alert, or a reset)
    assert answer == b"", answer  # never an answer
    # kafka-python without a certificate: every bootstrap attempt fails its handshake, so it cannot start.
    with pytest.raises(KPErrors.KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(**mtls.kafka_python(None), bootstrap_timeout_ms=3000).close()


def test_another_certificate_without_an_acl_gets_group_authorization_failed(mtls: Mtls) -> None:
    topic, group = _topic("mtls-topic"), mtls.groups[1]
    intruder = KafkaConsumer(group_id=group, enable_auto_commit=False, **mtls.kafka_python("bob"))
    try:
        with pytest.raises(KPErrors.GroupAuthorizationFailedError):
            intruder.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1)})
    finally:
        intruder.close()
    admin = KafkaAdminClient(**mtls.kafka_python("alice"))
    try:
        assert admin.list_group_offsets(group) == {group: {}}  # bob's commit stored nothing
    finally:
        admin.close()
