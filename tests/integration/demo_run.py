"""One `zkcoord demo` run as a user runs it (a subprocess with its own ZooKeeper and nodes), and what the tests
read of it: the conftest runs it once per session for test_demo and test_compare_rolling_migration."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DemoRun:
    result: subprocess.CompletedProcess[str]
    out: Path  # --out: traces/ and report/
    elapsed_s: float
    marker: str  # NAME=VALUE in the environment of the demo, inherited by every process it starts


def run_demo(out: Path) -> DemoRun:
    """`zkcoord demo --out OUT --no-progress`, with its rolling migration (the default)."""
    name, value = "ZKCOORD_DEMO_TEST", uuid.uuid4().hex
    env = {**os.environ, name: value, "COLUMNS": "200"}
    t0 = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "zkcoord", "demo", "--out", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    return DemoRun(result, out, time.monotonic() - t0, f"{name}={value}")
