"""Helpers of the proxy e2e tests (test_proxy, test_proxy_handoff): `zkcoord proxy` as its own process, the tree
outside /zkcoord, the members of a group in Tansu's own coordinator, and which proxy node coordinates a group."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from zkcoord.local.zookeeper import free_port
from zkcoord.testing.tansu import Tansu


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


def two_bridging_proxies(zk_connect: str, base: Path) -> dict[int, ProxyProcess]:
    """Proxy nodes 9000 and 9001 coordinating the mixed groups `mixed-.*`, with the ZooKeeper offset bridge and
    3 s ZooKeeper sessions (a killed node's partitions move within seconds)."""
    flags = (
        "--bridge-zk-groups",
        "mixed-.*",
        "--bridge-zk-offsets",
        "--zookeeper.session.timeout.ms",
        "3000",
    )
    return {n: ProxyProcess(zk_connect, base / f"proxy-{n}", *flags, node_id=n) for n in (9000, 9001)}


def outside_zkcoord(tree: dict[str, tuple[bytes, int, int]]) -> dict[str, tuple[bytes, int, int]]:
    """The tree outside /zkcoord (the root's child count moves when /zkcoord is first created)."""
    kept = {p: v for p, v in tree.items() if p != "/zkcoord" and not p.startswith("/zkcoord/")}
    kept["/"] = (*kept["/"][:2], 0)
    return kept


def tansu_group_members(tansu: Tansu, group: str) -> int:
    """Members of `group` in Tansu's own coordinator, by a raw DescribeGroups v0 (kafka-python's admin client
    cannot parse Tansu's answer: reference page)."""
    from zkcoord.server import kafka_protocol as kp

    with socket.create_connection(("127.0.0.1", tansu.port), timeout=10) as sock:
        sock.sendall(kp.encode_request(kp.DESCRIBE_GROUPS, 0, 1, "test", groups=[group]))
        head = read_exactly(sock, 4)
        frame = read_exactly(sock, int.from_bytes(head, "big"))
    _, resp = kp.decode_response(kp.DESCRIBE_GROUPS, 0, frame)
    (described,) = resp.groups
    return len(described.members)


def read_exactly(sock: socket.socket, n: int) -> bytes:
    """`n` bytes from `sock`, or ConnectionError when it closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


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
