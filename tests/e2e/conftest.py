"""Fixtures for end-to-end tests: one real `zkcoord serve` subprocess per module, always killed afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkcoord.testing import free_port

READY = "zkcoord serve: listening on"

# Small timeouts keep group tests fast (session timeouts down to 1 s, no initial rebalance delay).
FAST_GROUP_FLAGS = (
    "--group.min.session.timeout.ms=1000",
    "--group.initial.rebalance.delay.ms=0",
)


class ServerProcess:
    """A `python -m zkcoord serve` child on a free loopback port; restartable on the same port and data dir."""

    def __init__(self, data_dir: Path, extra: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        cmd = [
            sys.executable,
            "-m",
            "zkcoord",
            "-v",
            "serve",
            "--listen",
            self.bootstrap,
            "--data-dir",
            str(self.data_dir),
            *self.extra,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )
        ready = threading.Event()
        proc = self.proc

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line)
                if READY in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("zkcoord serve did not start:\n" + "".join(self.output[-50:]))

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill9()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("zkcoord-serve"), (*FAST_GROUP_FLAGS, "--num.partitions=1"))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill9()
