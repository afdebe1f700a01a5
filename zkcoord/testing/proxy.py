"""The kit's `zkcoord proxy` child process (what an operator runs) on free loopback ports, ready once it has printed
the line naming the port of the broker it waits for, its output kept in a bounded buffer, stopped with SIGTERM
(killed if that hangs); for benchmarks and scripts that put the proxy in front of Tansu.

    with ProxyProcess(zk_connect, data_dir, "--bridge-zk-groups", "orders-.*", "--bridge-zk-offsets") as proxy:
        consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap, group_id="orders-1")
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

from zkcoord.local.zookeeper import free_port
from zkcoord.testing.tansu import TANSU_NODE_ID

OUTPUT_LINES = 2000  # the output kept (the last lines: what a failure report shows)


class ProxyProcess:
    """`python -m zkcoord proxy --zk ZK --listen 127.0.0.1:PORT --node-id N --data-dir DIR --broker-port B=PORT`
    plus `extra` flags; broker `broker` (Tansu's 111 by default) is pinned to a free port and must be registered
    in ZooKeeper before the proxy is ready; `verbose` runs it with `zkcoord -v` (its INFO log lines too, each
    timestamped)."""

    def __init__(
        self,
        zk_connect: str,
        data_dir: Path,
        *extra: str,
        node_id: int = 9000,
        broker: int = TANSU_NODE_ID,
        verbose: bool = False,
    ) -> None:
        self.port = free_port()
        self.broker_port = free_port()
        self.data_dir = data_dir
        self.output: deque[str] = deque(maxlen=OUTPUT_LINES)
        self._ready_line = f"zkcoord proxy: broker {broker} behind"  # printed once its start() is done
        self._ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zkcoord", *(["-v"] if verbose else []), "proxy", "--zk", zk_connect, "--listen", f"127.0.0.1:{self.port}",
             "--node-id", str(node_id), "--data-dir", str(data_dir), "--broker-port", f"{broker}={self.broker_port}",
             *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        # read all along: a full pipe would stop the proxy at its next log line
        self._reader = threading.Thread(target=self._read, name=f"proxy-{self.port}-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if line.startswith(self._ready_line):
                self._ready.set()

    def wait_ready(self, timeout: float = 30.0) -> ProxyProcess:
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError(
                f"zkcoord proxy not ready within {timeout:g} s (exit code {self.proc.poll()}):\n"
                + "".join(list(self.output)[-50:])
            )
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)

    def __enter__(self) -> ProxyProcess:
        return self.wait_ready()

    def __exit__(self, *exc: object) -> None:
        self.stop()
