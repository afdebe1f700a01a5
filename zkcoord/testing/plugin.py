"""The zkcoord pytest plugin: real ZooKeeper for every test that asks for one, a fresh chroot per test,
server logs attached to failing tests, and every process stopped at the end of the run.

Fixtures: `zk_server` (session), `zk_ensemble` (3 nodes, healed before each test), `zk` (a connected kazoo
client rooted in a fresh chroot), `zk_connect` (that chroot's connect string), `zk_client_factory` (more
clients in the same chroot); `zk_sasl_server` (session: a ZooKeeper that requires SASL DIGEST-MD5 logins,
with JAAS files for its users) and `zk_sasl_connect` (a fresh chroot on it); `spark_cluster` (session: a
standalone Spark master and two one-core workers on loopback) and `spark_connect` (module: a Spark Connect
server on that cluster).
Environment: `ZKCOORD_ZK_CONNECT=host:port` uses an existing ZooKeeper;
`ZKCOORD_ZK_MODE=local|container` chooses how one is started (container needs a Docker engine).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.zk.auth import ZkAuth
from zkcoord.zk.session import connect, ensure_chroot

CHROOT_BASE = "/zkcoord-tests"


@dataclass
class ZooKeeperHandle:
    """What a test sees of the server: its connect string, and the process manager when we started it."""

    hosts: str
    local: ZooKeeper | None = None
    closer: Callable[[], None] | None = None
    description: str = ""

    def log_tails(self) -> str:
        return self.local.log_tails() if self.local is not None else ""

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()
        if self.closer is not None:
            self.closer()


@dataclass
class _Started:
    handles: list[ZooKeeperHandle] = field(default_factory=list)


_started = _Started()


def docker_available(timeout: float = 1.0) -> bool:
    try:
        import docker

        docker.from_env(timeout=timeout).ping()  # type: ignore[attr-defined]
        return True
    except Exception:
        return False


def _container_zookeeper() -> ZooKeeperHandle:
    if not docker_available():
        pytest.exit(
            "ZKCOORD_ZK_MODE=container but no Docker engine answers (checked with docker.from_env().ping()); "
            "unset ZKCOORD_ZK_MODE to run ZooKeeper from the local jars",
            returncode=4,
        )
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    container = DockerContainer("zookeeper:3.8").with_exposed_ports(2181)
    container.start()
    wait_for_logs(container, "binding to port", timeout=60)
    hosts = f"{container.get_container_host_ip()}:{container.get_exposed_port(2181)}"
    return ZooKeeperHandle(hosts=hosts, closer=container.stop, description="testcontainers zookeeper:3.8")


def start_zookeeper(size: int, base_dir: Any) -> ZooKeeperHandle:
    """A ZooKeeper for the run: the given one, a container, or local processes."""
    external = os.environ.get("ZKCOORD_ZK_CONNECT")
    mode = os.environ.get("ZKCOORD_ZK_MODE", "local")
    if size == 1 and external:
        handle = ZooKeeperHandle(hosts=external, description=f"external {external}")
    elif mode == "container" and size == 1:
        handle = _container_zookeeper()
    elif mode in ("local", "container"):
        zk = ZooKeeper.start(size, base_dir=base_dir, tick_time_ms=500 if size > 1 else 2000)
        handle = ZooKeeperHandle(hosts=zk.hosts, local=zk, description=f"local {size}-node {zk.hosts}")
    else:
        pytest.exit(f"ZKCOORD_ZK_MODE must be 'local' or 'container', not {mode!r}", returncode=4)
    _started.handles.append(handle)
    return handle


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperHandle]:
    """One standalone ZooKeeper for the whole run (or ZKCOORD_ZK_CONNECT)."""
    handle = start_zookeeper(1, tmp_path_factory.mktemp("zookeeper"))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def _zk_ensemble_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeper]:
    handle = start_zookeeper(3, tmp_path_factory.mktemp("ensemble"))
    assert handle.local is not None
    try:
        yield handle.local
    finally:
        handle.stop()


@pytest.fixture
def zk_ensemble(_zk_ensemble_session: ZooKeeper) -> ZooKeeper:
    """A 3-node ensemble on loopback with every node running: `kill_node(i)`, `restart_node(i)`, `leader()`."""
    down = [i for i, node in enumerate(_zk_ensemble_session.nodes) if not node.running]
    for i in down:
        _zk_ensemble_session.nodes[i].start()
    _zk_ensemble_session.wait_ready()
    return _zk_ensemble_session


def _chroot_name(request: pytest.FixtureRequest) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    return f"{CHROOT_BASE}/{safe}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_chroot(zk_server: ZooKeeperHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty chroot path for this test, removed afterwards."""
    root = connect(zk_server.hosts)
    path = _chroot_name(request)
    try:
        root.ensure_path(path)
        yield path
        root.delete(path, recursive=True)
    finally:
        root.stop()
        root.close()


@pytest.fixture
def zk_connect(zk_server: ZooKeeperHandle, zk_chroot: str) -> str:
    """The connect string of this test's chroot, e.g. '127.0.0.1:40123/zkcoord-tests/test_x-1a2b3c4d'."""
    return f"{zk_server.hosts}{zk_chroot}"


@pytest.fixture
def zk_client_factory(zk_connect: str) -> Iterator[Callable[..., Any]]:
    """`make()` returns another connected kazoo client in this test's chroot; all are closed afterwards."""
    clients: list[Any] = []

    def make(**kwargs: Any) -> Any:
        client = connect(zk_connect, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.stop()
        finally:
            client.close()


@pytest.fixture
def zk(zk_client_factory: Callable[..., Any]) -> Any:
    """A connected kazoo client rooted in this test's fresh chroot."""
    return zk_client_factory()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A standalone Spark cluster (master + 2 workers, 1 core each), once per run, stopped at the end."""
    from zkcoord.testing.spark_cluster import SparkCluster

    cluster = SparkCluster.start(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def spark_connect(spark_cluster: Any) -> Iterator[Any]:
    """A Spark Connect server on `spark_cluster` for one module (it holds the workers' cores while up)."""
    from zkcoord.testing.spark_cluster import SparkConnectServer

    server = SparkConnectServer.start(spark_cluster)
    try:
        yield server
    finally:
        server.stop()


# The users of the SASL test server: the identity zkcoord runs as, and another one that must not be able to
# change what the first created.
SASL_USERS = {"zkcoord": "zkcoord-secret", "other": "other-secret"}


@dataclass
class SaslZooKeeper:
    """A ZooKeeper that refuses every request of a session that has not logged in with SASL DIGEST-MD5 as one
    of `users`; `jaas_config(user)` writes the JAAS file a client of the era would be given."""

    hosts: str
    users: dict[str, str]
    local: ZooKeeper
    files: Path

    def jaas_text(self, user: str = "zkcoord", section: str = "Client", password: str | None = None) -> str:
        pw = self.users[user] if password is None else password
        return (
            f"{section} {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f'  username="{user}"\n  password="{pw}";\n}};\n'
        )

    def jaas_config(
        self, user: str = "zkcoord", section: str = "Client", password: str | None = None
    ) -> Path:
        """A JAAS file whose `section` logs in as `user` (with `password`, default the right one)."""
        path = self.files / f"jaas-{user}-{section}-{uuid.uuid4().hex[:6]}.conf"
        path.write_text(self.jaas_text(user, section, password))
        return path

    def auth(self, user: str = "zkcoord", *, set_acl: bool = False) -> ZkAuth:
        return ZkAuth.from_jaas(self.jaas_text(user), source=f"test user {user}", set_acl=set_acl)


@pytest.fixture(scope="session")
def zk_sasl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslZooKeeper]:
    """One standalone ZooKeeper requiring SASL for the whole run (started on first use)."""
    base = tmp_path_factory.mktemp("zookeeper-sasl")
    zk = ZooKeeper.start(1, base_dir=base / "server", sasl_users=SASL_USERS)
    handle = ZooKeeperHandle(hosts=zk.hosts, local=zk, description=f"local SASL {zk.hosts}")
    _started.handles.append(handle)
    files = base / "jaas"
    files.mkdir()
    try:
        yield SaslZooKeeper(hosts=zk.hosts, users=dict(SASL_USERS), local=zk, files=files)
    finally:
        handle.stop()


@pytest.fixture
def zk_sasl_connect(zk_sasl_server: SaslZooKeeper, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh chroot on the SASL server (created world-open by user zkcoord), as a connect string."""
    auth = zk_sasl_server.auth()
    path = _chroot_name(request)
    hosts = ensure_chroot(zk_sasl_server.hosts, path, auth=auth)
    yield hosts
    root = connect(zk_sasl_server.hosts, auth=auth)
    try:
        root.delete(path, recursive=True)
    finally:
        root.stop()
        root.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    uses_zk = any(name.startswith(("zk", "_zk")) for name in getattr(item, "fixturenames", ()))
    if report.failed and uses_zk and _started.handles:
        tails = "\n".join(h.log_tails() for h in _started.handles if h.local is not None)
        if tails:
            report.sections.append(("zookeeper server logs (tail)", tails))
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for handle in _started.handles:
        handle.stop()
