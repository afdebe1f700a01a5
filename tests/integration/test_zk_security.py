"""zkcoord against a ZooKeeper that requires SASL: serve (cluster mode, with the offset and mixed-group bridges), a
legacy group,
`legacy describe` and `migrate verify` work with the JAAS file and fail clearly without it; with --zk-set-acl
every znode they create carries Kafka's ACLs, which another user cannot get past. One server, one node."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkcoord.cli import main
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for
from zkcoord.testing.plugin import SaslZooKeeper
from zkcoord.zk.acl import ZnodeAccessDenied, permission_names
from zkcoord.zk.auth import JaasError
from zkcoord.zk.member import LegacyConsumer
from zkcoord.zk.session import ZkAuthFailed, connect

pytestmark = pytest.mark.integration

TOPIC = "secured"
MIXED_GROUP = "g-mixed"  # the one group the node bridges as a mixed group


@pytest.fixture(scope="module")
def secured(zk_sasl_server: SaslZooKeeper) -> Iterator[str]:
    """A chroot on the SASL server for this module (the node and every test share it)."""
    from zkcoord.zk.session import ensure_chroot

    yield ensure_chroot(zk_sasl_server.hosts, "/security-tests", auth=zk_sasl_server.auth())


@pytest.fixture(scope="module")
def jaas(zk_sasl_server: SaslZooKeeper) -> Path:
    return zk_sasl_server.jaas_config("zkcoord")


@pytest.fixture(scope="module")
def zkc(secured: str, zk_sasl_server: SaslZooKeeper) -> Iterator[Any]:
    client = connect(secured, auth=zk_sasl_server.auth("zkcoord"))
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="module")
def node(secured: str, jaas: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    server = NodeProcess(
        tmp_path_factory.mktemp("secured-node"),
        ("--zk", secured, "--zk-jaas-config", str(jaas), "--zk-set-acl", "--node-id", "1",
         "--num.partitions=2", "--bridge-zk-offsets", "--bridge-zk-groups", MIXED_GROUP, *FAST_GROUP_FLAGS),
    )  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def broker_group(node: NodeProcess, zkc: Any) -> str:
    """A kafka-python group that produced, consumed and committed through the node; the bridge mirrored it."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    for i in range(20):
        producer.send(TOPIC, f"r{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    group = "g-broker"
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=node.bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=20_000,
    )  # fmt: skip
    seen = 0
    for seen, _record in enumerate(consumer, 1):
        if seen == 20:
            break
    assert seen == 20
    consumer.commit()
    consumer.close()
    for p in (0, 1):
        wait_for(lambda p=p: zkc.exists(f"/consumers/{group}/offsets/{TOPIC}/{p}") is not None, 20, "mirror")
    return group


# kazoo's connection thread must not die on the refused login (it printed a traceback before the clear error).
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_connecting_without_or_with_wrong_credentials_fails_clearly(
    zk_sasl_server: SaslZooKeeper, secured: str
) -> None:
    with pytest.raises(ZkAuthFailed, match="requires SASL authentication"):
        connect(secured, timeout=10)
    wrong = zk_sasl_server.jaas_text("zkcoord", password="not-it")
    from zkcoord.zk.auth import ZkAuth

    with pytest.raises(ZkAuthFailed, match="refused the credentials of sasl:zkcoord"):
        connect(secured, timeout=10, auth=ZkAuth.from_jaas(wrong))


def test_serve_without_the_jaas_file_exits_naming_the_cause(secured: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zkcoord", "serve", "--zk", secured, "--listen", "127.0.0.1:0",
         "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "requires SASL authentication" in proc.stderr + proc.stdout


def _walk(client: Any, path: str = "/") -> Iterator[str]:
    for child in sorted(client.get_children(path)):
        full = f"{path.rstrip('/')}/{child}"
        yield full
        yield from _walk(client, full)


def _acl(client: Any, path: str) -> list[tuple[str, str, str]]:
    acls, _ = client.get_acls(path)
    return sorted((a.id.scheme, a.id.id, permission_names(a.perms)) for a in acls)


CREATOR_AND_WORLD_READ = [("sasl", "zkcoord", "READ|WRITE|CREATE|DELETE|ADMIN"), ("world", "anyone", "READ")]


def test_every_znode_serve_and_the_bridge_create_carries_kafkas_acls(
    node: NodeProcess, broker_group: str, zkc: Any
) -> None:
    created = list(_walk(zkc))
    for expected in ("/brokers/ids/1", "/controller", "/controller_epoch", f"/brokers/topics/{TOPIC}",
                     f"/consumers/{broker_group}/offsets/{TOPIC}/0"):  # fmt: skip
        assert expected in created
    assert _acl(zkc, "/consumers") == [("world", "anyone", "READ|WRITE|CREATE|DELETE|ADMIN")]
    wrong = {p: _acl(zkc, p) for p in created if p != "/consumers" and _acl(zkc, p) != CREATOR_AND_WORLD_READ}
    assert wrong == {}
    assert len(created) > 20


def test_the_mixed_group_bridge_logs_in_and_locks_what_it_creates(
    node: NodeProcess, broker_group: str, zkc: Any
) -> None:
    """A broker-protocol member of a bridged group: the bridge registers it under /consumers/G/ids and holds its
    owner znodes, on the secured ZooKeeper, each with Kafka's ACL."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=node.bootstrap, group_id=MIXED_GROUP, auto_offset_reset="earliest",
        enable_auto_commit=False, partition_assignment_strategy=[RangePartitionAssignor],
    )  # fmt: skip
    try:
        consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost join: docs/cluster.md)

        def assigned() -> bool:
            consumer.poll(timeout_ms=200)
            return {tp.partition for tp in consumer.assignment()} == {0, 1}

        wait_for(assigned, 60, "the mixed group's member assigned both partitions")
        ids = zkc.get_children(f"/consumers/{MIXED_GROUP}/ids")
        assert len(ids) == 1 and ids[0].startswith(f"{MIXED_GROUP}_classic-")
        owners = f"/consumers/{MIXED_GROUP}/owners/{TOPIC}"
        assert sorted(zkc.get_children(owners)) == ["0", "1"]
        assert zkc.get(f"{owners}/0")[0].decode() == f"{ids[0]}-0"
        made = [f"/consumers/{MIXED_GROUP}", *_walk(zkc, f"/consumers/{MIXED_GROUP}"), "/zkcoord/mixed-groups",
                f"/zkcoord/mixed-groups/{MIXED_GROUP}"]  # fmt: skip
        assert len(made) >= 8
        assert {p: _acl(zkc, p) for p in made} == {p: CREATOR_AND_WORLD_READ for p in made}
    finally:
        consumer.close()


def test_another_user_cannot_change_what_zkcoord_created(
    node: NodeProcess, broker_group: str, zk_sasl_server: SaslZooKeeper, secured: str
) -> None:
    other = connect(secured, auth=zk_sasl_server.auth("other"))
    try:
        assert other.get("/controller")[0]  # world read
        with pytest.raises(
            ZnodeAccessDenied, match=r"refused set /controller: .* WRITE permission to sasl:other"
        ):
            other.set("/controller", b"{}")
        with pytest.raises(ZnodeAccessDenied) as info:
            other.create("/brokers/ids/98", b"{}", ephemeral=True)
        assert (info.value.acl_path, info.value.permission) == ("/brokers/ids", "CREATE")
        with pytest.raises(ZnodeAccessDenied, match="DELETE"):
            other.delete(f"/consumers/{broker_group}/offsets/{TOPIC}/0")
        tx = other.transaction()
        tx.set_data(f"/consumers/{broker_group}/offsets/{TOPIC}/1", b"0")
        with pytest.raises(ZnodeAccessDenied, match="refused set"):
            tx.commit()
    finally:
        other.stop()
        other.close()


def test_legacy_group_describe_and_migrate_verify(
    node: NodeProcess, broker_group: str, zk_sasl_server: SaslZooKeeper, secured: str, jaas: Path,
    zkc: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = LegacyConsumerConfig(
        group_id="g-legacy", zookeeper_connect=secured, consumer_id="legacy-1", auto_offset_reset="smallest",
        auto_commit_interval_ms=200, rebalance_backoff_ms=200, socket_timeout_ms=3000, mode="fast",
    )  # fmt: skip
    legacy = LegacyConsumer(config, {TOPIC: 1}, zk_auth=zk_sasl_server.auth(set_acl=True))
    seen: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            msg = legacy.next_message(timeout=0.1)
            if msg is not None:
                seen.append(msg.offset)

    legacy.start()
    thread = threading.Thread(target=run, name="secured-legacy", daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(seen) >= 20, 30, "20 records on the legacy member")
        legacy.commit_offsets()
        owned = list(_walk(zkc, "/consumers/g-legacy"))
        assert (
            "/consumers/g-legacy/ids/g-legacy_legacy-1" in owned
            and "/consumers/g-legacy/owners/secured/0" in owned
        )
        assert {p: _acl(zkc, p) for p in owned} == {p: CREATOR_AND_WORLD_READ for p in owned}

        assert (
            main(
                ["legacy", "describe", "--zk", secured, "--group", "g-legacy", "--zk-jaas-config", str(jaas)]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "g-legacy_legacy-1" in out and TOPIC in out
    finally:
        stop.set()
        thread.join(10)
        legacy.close()
    assert main(["legacy", "describe", "--zk", secured, "--group", "g-legacy"]) != 0
    assert "requires SASL authentication" in capsys.readouterr().err

    common = ["--zk", secured, "--bootstrap", node.bootstrap, "--group", broker_group,
              "--state-dir", str(tmp_path / "state")]  # fmt: skip
    secure = ["--zk-jaas-config", str(jaas), "--zk-set-acl"]
    for step in ("plan", "dual-commit", "verify"):
        assert main(["migrate", step, *common, *secure]) == 0, capsys.readouterr().err
    capsys.readouterr()
    # What the member and the workflow created is locked like the rest (the chroot's /consumers stays open).
    created = [p for p in _walk(zkc) if p != "/consumers"]
    assert {p: _acl(zkc, p) for p in created} == {p: CREATOR_AND_WORLD_READ for p in created}
    assert main(["migrate", "verify", *common]) != 0
    assert "requires SASL authentication" in capsys.readouterr().err
    missing = zk_sasl_server.jaas_config("zkcoord", section="KafkaServer")
    assert main(["migrate", "verify", *common, "--zk-jaas-config", str(missing)]) != 0
    assert "no section 'Client' (sections found: KafkaServer)" in capsys.readouterr().err


def test_a_bad_jaas_file_is_refused_before_connecting(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text(
        'Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username="x"\n};\n'
    )
    import argparse

    from zkcoord.cli.zkargs import zk_auth

    args = argparse.Namespace(
        zk_jaas_config=str(bad), zk_sasl_clientconfig="Client", zk_digest=None, zk_set_acl=False
    )
    with pytest.raises(
        JaasError, match=r"bad.conf line 4 \(section Client\): expected an option name or ';'"
    ):
        zk_auth(args)
