"""Malformed security data in real ZooKeeper against one `zkcoord serve` (SASL_PLAINTEXT with SCRAM, Kafka's
ACL authorizer with allow.everyone.if.no.acl.found=true and a super user), seen by real clients: an ACL znode of
deeply nested JSON present at start does not stop the node and denies its group to everyone but the super user;
one written at runtime fails closed (a new group, and a group whose Deny it replaces), is logged once however
often it is rewritten, and its repair counts without a restart; a malformed SCRAM credential fails that user's
login with SASL_AUTHENTICATION_FAILED (58), and its repair logs in. Six unauthenticated 50 MB SCRAM logins grow
the node's peak resident memory by less than 32 MiB and delay no other client."""

from __future__ import annotations

import asyncio
import json
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as KPErrors
from kafka.structs import OffsetAndMetadata

from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.security.scram import ScramCredential
from zkcoord.server import kafka_protocol as kp
from zkcoord.zk.kafka_credentials import write_scram
from zkcoord.zk.session import connect, ensure_chroot

MECHANISM = "SCRAM-SHA-256"
USERS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw", "mallory": "mallory-pw"}
DEEP = (
    b"[" * 5000
)  # before: RecursionError out of the ACL cache (serve did not start) and the credential read
TOPIC = "hostile-acl-topic"


@dataclass
class SecuredNode:
    node: NodeProcess
    zk_connect: str
    zk: Any  # a kazoo client on the node's chroot

    def client(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.node.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": MECHANISM, "sasl_plain_username": user,
                "sasl_plain_password": USERS[user]}  # fmt: skip

    def write(self, path: str, data: bytes) -> None:
        if self.zk.exists(path):
            self.zk.set(path, data)
        else:
            self.zk.create(path, data, makepath=True)

    def log(self) -> str:
        return "".join(self.node.output)


def _acl_json(*acls: tuple[str, str, str]) -> bytes:
    entries = [{"principal": p, "permissionType": t, "operation": o, "host": "*"} for p, t, o in acls]
    return json.dumps({"version": 1, "acls": entries}).encode()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, zk_server: Any) -> Iterator[SecuredNode]:
    d: Path = tmp_path_factory.mktemp("hostile-security")
    zk_connect = ensure_chroot(zk_server.hosts, f"/hostile-security-{uuid.uuid4().hex[:8]}")
    zk = connect(zk_connect)
    for user, password in USERS.items():
        write_scram(
            zk, user, MECHANISM, ScramCredential.from_password(MECHANISM, password, user.encode() * 4)
        )
    # Present before the node starts: a malformed ACL znode (the node must start and deny that group).
    zk.create("/kafka-acl/Group/bad-at-start", DEEP, makepath=True)
    flags = (*FAST_GROUP_FLAGS, "--security-zk", zk_connect, "--sasl.enabled.mechanisms", MECHANISM,
             "--authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
             "--allow.everyone.if.no.acl.found", "true", "--super.users", "User:admin")  # fmt: skip
    node = NodeProcess(d / "data", flags, protocol="SASL_PLAINTEXT")
    try:
        node.start()
        producer = KafkaProducer(**SecuredNode(node, zk_connect, zk).client("admin"))
        try:
            producer.send(TOPIC, b"x", partition=0).get(30)
        finally:
            producer.close()
        yield SecuredNode(node, zk_connect, zk)
    finally:
        node.stop()
        zk.stop()
        zk.close()


def _may_commit(cfg: dict[str, Any], group: str) -> bool:
    """Whether the principal of `cfg` may commit an offset in `group` (Group Read), as kafka-python sees it."""
    consumer = KafkaConsumer(group_id=group, enable_auto_commit=False, request_timeout_ms=10_000, **cfg)
    try:
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(1, "", -1)})
        return True
    except KPErrors.GroupAuthorizationFailedError:
        return False
    finally:
        consumer.close()


def _eventually(cond: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"


def test_a_malformed_acl_znode_at_start_denies_its_group_to_all_but_super_users(secured: SecuredNode) -> None:
    assert not _may_commit(secured.client("alice"), "bad-at-start")
    assert _may_commit(secured.client("admin"), "bad-at-start")  # super.users: always
    assert _may_commit(secured.client("alice"), "open-group")  # no ACL at all: allow.everyone.if.no.acl.found
    assert "/kafka-acl/Group/bad-at-start: malformed ACL znode" in secured.log()


def test_a_malformed_acl_written_at_runtime_fails_closed_and_its_repair_counts(secured: SecuredNode) -> None:
    alice, bob = secured.client("alice"), secured.client("bob")
    # A new group: before, a malformed znode left it open under allow.everyone.if.no.acl.found.
    secured.write("/kafka-acl/Group/new-bad", DEEP)
    _eventually(
        lambda: not _may_commit(alice, "new-bad"), "alice refused on a new group with a malformed ACL"
    )
    # An existing Deny (bob) and Allow (everyone): the malformed write replaces both with "super users only" ...
    secured.write(
        "/kafka-acl/Group/frozen", _acl_json(("User:bob", "Deny", "Read"), ("User:*", "Allow", "Read"))
    )
    _eventually(lambda: not _may_commit(bob, "frozen"), "bob denied by the valid ACLs")
    assert _may_commit(alice, "frozen")
    for _ in range(5):  # the same bad data rewritten: logged once
        secured.write("/kafka-acl/Group/frozen", DEEP)
    _eventually(lambda: not _may_commit(alice, "frozen"), "alice refused once the ACL znode is malformed")
    assert not _may_commit(bob, "frozen")
    assert _may_commit(secured.client("admin"), "frozen")
    # ... and a repair counts without a restart: the old Deny is not frozen in place.
    secured.write("/kafka-acl/Group/frozen", _acl_json(("User:*", "Allow", "Read")))
    _eventually(lambda: _may_commit(bob, "frozen"), "bob allowed after the repair")
    assert _may_commit(alice, "frozen")
    log = secured.log()
    assert log.count("/kafka-acl/Group/frozen: malformed ACL znode") == 1, log[-3000:]
    assert "/kafka-acl/Group/frozen: parses again" in log


def _login_errors(user: str, secured: SecuredNode, seconds: float = 30) -> list[KafkaError]:
    """librdkafka's view of a login as `user` (confluent-kafka AdminClient): the errors until an authentication
    error arrives or `seconds` pass."""
    errors: list[KafkaError] = []
    admin = AdminClient({"bootstrap.servers": secured.node.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": MECHANISM, "sasl.username": user, "sasl.password": USERS[user],
                         "error_cb": errors.append})  # fmt: skip
    deadline = time.monotonic() + seconds
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        admin.poll(0.2)
    return errors


def test_a_malformed_credential_fails_the_login_with_error_58_and_its_repair_logs_in(
    secured: SecuredNode,
) -> None:
    secured.write("/config/users/mallory", DEEP)
    errors = _login_errors("mallory", secured)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    # before: the connection was closed with no answer (librdkafka saw only a disconnect)
    assert auth and "Authentication failed" in auth[0].str(), errors
    assert "SCRAM SCRAM-SHA-256 credential of user 'mallory' unusable" in secured.log()
    # The operator repairs the znode by hand (zkcoord's add-scram-user refuses to merge into a malformed one).
    cred = ScramCredential.from_password(MECHANISM, USERS["mallory"], b"mallory-salt")
    secured.zk.set(
        "/config/users/mallory", json.dumps({"version": 1, "config": {MECHANISM: cred.to_kafka()}}).encode()
    )
    assert _may_commit(secured.client("mallory"), "open-group")


def _vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


async def _answer(reader: asyncio.StreamReader) -> bytes:
    try:
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    except (asyncio.IncompleteReadError, ConnectionError):
        return b""
    return await asyncio.wait_for(reader.readexactly(size), 10)


async def _huge_scram_login(host: str, port: int, token_size: int, chunk: bytes) -> int:
    """SaslHandshake SCRAM-SHA-256, then a SaslAuthenticate whose client-first is `token_size` bytes, streamed in
    `chunk`s; the bytes the node took before closing."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(kp.encode_request(kp.SASL_HANDSHAKE, 1, 1, "c", mechanism=MECHANISM))
        assert await _answer(reader)
        header = struct.pack(">hhih", kp.SASL_AUTHENTICATE, 1, 2, 1) + b"c" + struct.pack(">i", token_size)
        writer.write(struct.pack(">i", len(header) + token_size) + header + b"n,,n=u,r=")
        sent = 0
        while sent < token_size and not reader.at_eof():
            try:
                writer.write(chunk)
                await writer.drain()
            except ConnectionError:
                break
            sent += len(chunk)
        return sent
    finally:
        writer.close()


def test_six_50_mb_scram_logins_pin_no_memory_in_the_node_and_delay_no_one(secured: SecuredNode) -> None:
    """Before: the node read and kept each 50 MB client-first (six pinned 1.4 GB until the idle timeout) and
    checked its nonce character by character (~3 s each, others waiting). Now each is refused on its size prefix
    (sasl.server.max.receive.size, 512 KiB). Measured on the node process: its peak resident memory (VmHWM)."""
    assert secured.node.proc is not None
    pid = secured.node.proc.pid
    host, port = secured.node.bootstrap.split(":")
    peak_before = _vm_kib(pid, "VmHWM")
    token_size, chunk = 50 * 1024 * 1024, b"x" * (1 << 20)

    async def scenario() -> tuple[float, list[int]]:
        hostile = [
            asyncio.create_task(_huge_scram_login(host, int(port), token_size, chunk)) for _ in range(6)
        ]
        reader, writer = await asyncio.open_connection(host, int(port))
        loop = asyncio.get_running_loop()
        worst, corr, deadline = 0.0, 0, loop.time() + 60
        try:
            while corr < 5 or not all(t.done() for t in hostile):  # pings all along the hostile logins
                assert loop.time() < deadline, "the hostile logins did not end within 60 s"
                corr += 1
                started = loop.time()
                writer.write(kp.encode_request(kp.API_VERSIONS, 0, corr, "victim"))
                assert await _answer(reader)
                worst = max(worst, loop.time() - started)
            taken = [t.result() for t in hostile]
        finally:
            writer.close()
        return worst, taken

    worst, taken = asyncio.run(scenario())
    grown_mib = (_vm_kib(pid, "VmHWM") - peak_before) / 1024
    assert grown_mib < 32, f"the node's peak resident memory grew {grown_mib:.0f} MiB"
    assert worst < 1.0, f"another client waited {worst:.2f} s"
    assert all(t < token_size for t in taken), taken  # the node stopped reading at the size prefix
    assert "sasl.server.max.receive.size" in secured.log()


def test_zkcoord_tools_refuse_to_merge_into_a_malformed_znode_and_leave_it_intact(
    secured: SecuredNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from zkcoord.cli import main

    secured.write("/kafka-acl/Topic/keep-me", DEEP)
    secured.write("/config/users/keep-me", DEEP)
    argv = ["security", "add-acl", "--zk", secured.zk_connect, "--topic", "keep-me",
            "--allow-principal", "User:alice", "--operation", "Read"]  # fmt: skip
    assert main(argv) == 2
    assert "/kafka-acl/Topic/keep-me: not JSON: brackets do not pair up" in capsys.readouterr().err
    secret = tmp_path / "password"
    secret.write_text("pw\n")
    argv = ["security", "add-scram-user", "--zk", secured.zk_connect, "--user", "keep-me",
            "--password-file", str(secret)]  # fmt: skip
    assert main(argv) == 2
    assert "malformed znode /config/users/keep-me" in capsys.readouterr().err
    assert secured.zk.get("/kafka-acl/Topic/keep-me")[0] == DEEP
    assert secured.zk.get("/config/users/keep-me")[0] == DEEP
