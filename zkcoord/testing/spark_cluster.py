"""A standalone Spark cluster on loopback for tests (a master and N one-core workers, from the installed
PySpark's `spark-class`), and a Spark Connect server on it; both stop every process they started.

Started once per run by the `spark_cluster` fixture; `spark_connect` adds a Connect server for one module.
A standalone application keeps its executors until it stops, so a Connect server (itself an application)
is started only after the tests that drive their own sessions on the cluster have stopped theirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkcoord.local.zookeeper import free_port

WORKER_MEMORY = "512m"
EXECUTOR_MEMORY = "450m"
# Every JVM of a test cluster lives for seconds to a few minutes on 2 shared cores: the C1 compiler only. C2's
# compiler threads would otherwise take much of their CPU for code that pays off over longer runs (as
# migration.spark.SHORT_JOB_JAVA_OPTIONS, which the test kit cannot import).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(log_dir: Path) -> dict[str, str]:
    """The processes' environment: loopback only, logs in the run's temp dir, and this interpreter's bin
    first on PATH so executors find a `python3` with pyspark (as a cluster's machines would have one)."""
    env = dict(os.environ)
    env |= {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_WORKER_DIR": str(log_dir / "work"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_DAEMON_JAVA_OPTS": JAVA_OPTIONS,  # the master's and the workers'
    }
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    return env


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def _wait(what: str, check: Any, deadline_s: float, procs: list[subprocess.Popen[bytes]]) -> Any:
    deadline = time.monotonic() + deadline_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: a Spark process exited with {proc.returncode}")
        try:
            result = check()
            if result:
                return result
        except OSError as exc:
            last = exc
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not ready after {deadline_s:.0f} s (last error: {last})")


@dataclass
class SparkCluster:
    """A running standalone cluster: `master_url` (spark://127.0.0.1:P), `ui_url` (the master's web UI, whose
    /json/ lists workers and applications), `worker_ui_urls` (each worker's /json/ lists its executors)."""

    master_url: str
    ui_url: str
    worker_ui_urls: list[str]
    base_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def start(cls, base_dir: Path, workers: int = 2, deadline_s: float = 120.0) -> SparkCluster:
        base_dir.mkdir(parents=True, exist_ok=True)
        env = _env(base_dir)
        spark_class = str(spark_home() / "bin" / "spark-class")
        port, ui = free_port(), free_port()
        cluster = cls(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", [], base_dir)
        try:
            cluster._spawn(
                "master",
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                env,
            )
            for i in range(workers):
                wui = free_port()
                cluster.worker_ui_urls.append(f"http://127.0.0.1:{wui}")
                cluster._spawn(
                    f"worker-{i}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        cluster.master_url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        WORKER_MEMORY,
                        "--webui-port",
                        str(wui),
                        "--work-dir",
                        str(base_dir / f"work-{i}"),
                    ],
                    env,
                )
            _wait(
                f"{workers} workers alive at {cluster.ui_url}",
                lambda: len([w for w in cluster.status()["workers"] if w["state"] == "ALIVE"]) >= workers,
                deadline_s,
                cluster.procs,
            )
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = open(self.base_dir / f"{name}.log", "wb")  # noqa: SIM115 - the process keeps writing to it
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs.append(proc)
        return proc

    def status(self) -> Any:
        """The master's JSON status: workers (id, state, cores, coresused), activeapps, completedapps."""
        return get_json(f"{self.ui_url}/json/")

    def worker_executors(self) -> list[list[dict[str, Any]]]:
        """Per worker, the executors it runs or ran (each with `appid` and `id`)."""
        out = []
        for url in self.worker_ui_urls:
            data = get_json(f"{url}/json/")
            out.append(list(data.get("executors", [])) + list(data.get("finishedexecutors", [])))
        return out

    def session_conf(self) -> dict[str, str]:
        """Settings an application on this small cluster needs: executors that fit a worker, and the driver's
        UI on (its REST API reports tasks per executor) at a free loopback port."""
        return {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.executor.extraJavaOptions": JAVA_OPTIONS,
            "spark.driver.extraJavaOptions": JAVA_OPTIONS,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "true",
            "spark.ui.port": str(free_port()),
        }

    def log_tails(self, lines: int = 40) -> str:
        out = []
        for path in sorted(self.base_dir.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _terminate(proc)
        self.procs.clear()


def _terminate(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    # spark-class execs the JVM in its own session: signal the whole group so no child JVM survives.
    try:
        os.killpg(proc.pid, 15)
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(timeout)
    except ProcessLookupError:
        pass


@dataclass
class SparkConnectServer:
    """A Spark Connect server running as an application on `cluster`: `url` (sc://127.0.0.1:P) for clients,
    `ui_url` for its REST API (tasks per executor)."""

    url: str
    ui_url: str
    proc: subprocess.Popen[bytes]

    @classmethod
    def start(cls, cluster: SparkCluster, deadline_s: float = 180.0) -> SparkConnectServer:
        port, ui = free_port(), free_port()
        conf = cluster.session_conf() | {
            "spark.connect.grpc.binding.port": str(port),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.ui.port": str(ui),
            "spark.driver.memory": "512m",
        }
        argv = [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            cluster.master_url,
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name",
            "zkcoord-connect",
        ]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        jars = sorted((spark_home() / "jars").glob("spark-connect_*.jar"))
        if not jars:
            raise RuntimeError(f"no spark-connect jar in {spark_home() / 'jars'}")
        argv.append(str(jars[0]))
        proc = cluster._spawn("connect", argv, _env(cluster.base_dir))
        server = cls(f"sc://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", proc)
        try:
            _wait(
                f"Spark Connect on 127.0.0.1:{port}",
                lambda: _port_open(port) and server.app_id() is not None,
                deadline_s,
                [proc],
            )
        except BaseException:
            server.stop()
            raise
        return server

    def app_id(self) -> str | None:
        apps = get_json(f"{self.ui_url}/api/v1/applications")
        return apps[0]["id"] if apps else None

    def stop(self) -> None:
        _terminate(self.proc)


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def executor_tasks(ui_url: str, app_id: str) -> dict[str, int]:
    """Completed tasks per executor id of an application, from its UI's REST API (the driver included)."""
    rows = get_json(f"{ui_url}/api/v1/applications/{app_id}/allexecutors")
    return {row["id"]: int(row["completedTasks"]) for row in rows}
