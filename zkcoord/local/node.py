"""Local `zkcoord serve` processes: started on a free loopback port, ready when the node says it listens,
restartable on the same port and data directory, and always stopped (even on interpreter exit).

Used by `zkcoord demo`, comparison runs and the end-to-end tests.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from zkcoord.errors import ZkcoordError
from zkcoord.local.zookeeper import free_port

READY = "zkcoord serve: listening on"

# Small timeouts keep local groups quick: session timeouts down to 1 s, no initial rebalance delay.
FAST_GROUP_FLAGS = (
    "--group.min.session.timeout.ms=1000",
    "--group.initial.rebalance.delay.ms=0",
)

_live: set[NodeProcess] = set()
_live_lock = threading.Lock()


class NodeUnavailable(ZkcoordError):
    """The node did not start, or exited before it was ready."""


@atexit.register
def _kill_all_at_exit() -> None:
    with _live_lock:
        nodes = list(_live)
    for node in nodes:
        node.kill9()


class NodeProcess:
    """A `python -m zkcoord serve` child; `extra` are further serve flags (e.g. `--zk`, `--node-id`).
    `protocol`: the security protocol of its listener on `port` (a cluster node has only that one); other than
    PLAINTEXT, `extra` carries what it needs (`--jaas-config`, `--ssl.keystore.location`)."""

    def __init__(
        self,
        data_dir: Path,
        extra: tuple[str, ...] = (),
        port: int | None = None,
        protocol: str = "PLAINTEXT",  # the listener's security protocol (a cluster node has only this one)
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port if port is not None else free_port()
        self.extra = extra
        self.protocol = protocol
        self.proc: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=2000)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> NodeProcess:
        listen = (
            ["--listen", self.bootstrap]
            if self.protocol == "PLAINTEXT"
            else ["--listeners", f"{self.protocol}://{self.bootstrap}"]
        )
        cmd = [sys.executable, "-m", "zkcoord", "-v", "serve", *listen,
               "--data-dir", str(self.data_dir), *self.extra]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, env=env, start_new_session=True,
        )  # fmt: skip
        self.proc = proc
        with _live_lock:
            _live.add(self)
        ready = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line)
                if READY in line:
                    ready.set()

        threading.Thread(target=pump, name=f"serve-{self.port}-output", daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill9()
                raise NodeUnavailable("zkcoord serve did not start:\n" + "".join(list(self.output)[-50:]))
        return self

    def kill9(self) -> None:
        """SIGKILL, as a crash would."""
        self._signal(signal.SIGKILL, 10.0)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after `timeout`."""
        self._signal(signal.SIGTERM, timeout)

    def _signal(self, sig: signal.Signals, timeout: float) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        with _live_lock:
            _live.discard(self)

    def __enter__(self) -> NodeProcess:
        return self.start() if not self.running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
