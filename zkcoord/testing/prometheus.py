"""A real Prometheus server for tests (the Debian package's `prometheus` binary): scrapes the given loopback
targets every `scrape_interval`, answers PromQL through its HTTP API, and stops when asked (or at exit)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from zkcoord.local.zookeeper import free_port


class PrometheusServer:
    """`query(expr)` -> {sorted label pairs: value}; `wait_for(expr, check)` polls until `check(value)`."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.proc = proc
        self.url = url
        self.log_path = log_path

    @classmethod
    def start(
        cls, targets: Sequence[str], base_dir: Path, scrape_interval: str = "1s", deadline_s: float = 60.0
    ) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("no `prometheus` on PATH: apt-get install prometheus (scripts/setup.sh does)")
        base_dir.mkdir(parents=True, exist_ok=True)
        config = base_dir / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            f"  evaluation_interval: {scrape_interval}\n"
            "scrape_configs:\n"
            "  - job_name: zkcoord\n"
            f"    scrape_timeout: {scrape_interval}\n"
            f"    static_configs:\n      - targets: {json.dumps(list(targets))}\n"
        )
        port = free_port()
        log_path = base_dir / "prometheus.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={base_dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        server = cls(proc, f"http://127.0.0.1:{port}", log_path)
        try:
            server._wait_ready(deadline_s)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {deadline_s:.0f} s:\n{self.log_tail()}")

    def query(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant PromQL query through /api/v1/query; one entry per series (labels without __name__)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.loads(resp.read().decode("utf-8"))
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus query {expr!r} failed: {body}")
        out = {}
        for series in body["data"]["result"]:
            labels = tuple(sorted((k, v) for k, v in series["metric"].items() if k != "__name__"))
            out[labels] = float(series["value"][1])
        return out

    def value(self, expr: str) -> float | None:
        """The single value of `expr` (None when it has no series); use sum(...) for several series."""
        result = self.query(expr)
        if len(result) > 1:
            raise ValueError(f"{expr!r} has {len(result)} series; aggregate it")
        return next(iter(result.values()), None)

    def wait_for(
        self, expr: str, check: Callable[[float | None], bool], timeout: float = 30.0
    ) -> float | None:
        """Poll `value(expr)` until `check` accepts it; raises with the last value at the deadline."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.value(expr)
            if check(last):
                return last
            time.sleep(0.2)
        raise TimeoutError(f"{expr!r} never satisfied the check within {timeout} s (last value {last})")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
