"""Both Spark jobs on a standalone cluster (master + two workers on loopback) and on Spark Connect over it:
executors on the workers do the tasks, and every output equals the local[2] run's on the same input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from spark_traces import write_run

from migration.compare.report import run_report
from migration.divergence.job import run_divergence
from migration.divergence.synth import write_synthetic

# Starting a master, two workers and a Connect server and running both jobs takes minutes on 2 busy cores.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

REPORT_TABLES = (
    "summary",
    "rebalances",
    "churn_to_stable",
    "partitions_moved",
    "ownership_per_run",
    "records",
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cluster-inputs")
    write_run(root / "traces", "eager-1", "legacy-fast", "range", eager=True)
    write_run(root / "traces", "coop-1", "classic-confluent", "cooperative-sticky", eager=False)
    write_synthetic(root / "snap", groups=12, partitions=10, seed=3)
    return root


@pytest.fixture(scope="module")
def local_outputs(spark: Any, inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local-out")
    run_report([inputs / "traces"], out / "report", spark=spark, progress=False)
    run_divergence(
        str(inputs / "snap" / "zookeeper.parquet"),
        str(inputs / "snap" / "broker.parquet"),
        str(out / "divergence"),
        spark=spark,
        progress_out=io.StringIO(),
    )
    return out


def _rows(path: Path) -> list[dict[str, Any]]:
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def assert_same_outputs(local: Path, other: Path) -> None:
    for name in REPORT_TABLES:
        assert _rows(other / "report" / "tables" / f"{name}.parquet") == _rows(
            local / "report" / "tables" / f"{name}.parquet"
        ), name
        assert (other / "report" / "tables" / f"{name}.csv").read_text() == (
            local / "report" / "tables" / f"{name}.csv"
        ).read_text(), name
    assert (other / "report" / "report.html").is_file()
    for name in ("disagreements.parquet", "groups.parquet"):
        local_rows = _rows(local / "divergence" / name)
        assert local_rows and _rows(other / "divergence" / name) == local_rows, name
    assert (other / "divergence" / "summary.md").read_text() == (
        local / "divergence" / "summary.md"
    ).read_text()


def _env() -> dict[str, str]:
    # A cluster's executors run the Python on their own PATH: the driver's interpreter path is not passed on.
    return {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}


def _worker_hosted(cluster: Any, app_id: str) -> list[set[str]]:
    return [
        {e["id"] if "id" in e else e["execId"] for e in execs if e.get("appid") == app_id}
        for execs in cluster.worker_executors()
    ]


def assert_ran_on_workers(cluster: Any, app_id: str, tasks: dict[str, int]) -> None:
    """Each worker hosts an executor of the application (its /json/), and every completed task of the
    application ran on one of those executors, none on the driver (the application's REST API)."""
    hosted = [{str(e) for e in executors} for executors in _worker_hosted(cluster, app_id)]
    assert len(hosted) == 2 and all(hosted), hosted
    on_workers = set().union(*hosted)
    assert sum(tasks.values()) > 0, tasks
    assert all(n == 0 or executor in on_workers for executor, n in tasks.items()), (hosted, tasks)


def test_both_jobs_on_a_standalone_cluster(spark_cluster, inputs, local_outputs, tmp_path) -> None:
    out = tmp_path / "cluster"
    # Inputs as file:// URIs and outputs as a relative path (resolved by the driver, not by each executor).
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent / "cluster_job.py"),
            spark_cluster.master_url,
            json.dumps(spark_cluster.session_conf()),
            (inputs / "traces").as_uri(),
            "cluster/report",
            (inputs / "snap" / "zookeeper.parquet").as_uri(),
            (inputs / "snap" / "broker.parquet").as_uri(),
            "cluster/divergence",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + spark_cluster.log_tails()
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    tasks = stats["tasks"]
    assert_ran_on_workers(spark_cluster, stats["app_id"], tasks)
    assert_same_outputs(local_outputs, out)


def test_both_commands_on_spark_connect(
    spark_cluster, spark_connect, inputs, local_outputs, tmp_path
) -> None:
    from zkcoord.testing.spark_cluster import executor_tasks

    out = tmp_path / "connect"
    for argv in (
        [
            "compare",
            "report",
            str(inputs / "traces"),
            "--out",
            str(out / "report"),
            "--remote",
            spark_connect.url,
            "--no-progress",
        ],
        [
            "migrate",
            "divergence",
            "--zk-snapshot",
            (inputs / "snap" / "zookeeper.parquet").as_uri(),
            "--broker-snapshot",
            str(inputs / "snap" / "broker.parquet"),
            "--out",
            (out / "divergence").as_uri(),
            "--remote",
            spark_connect.url,
        ],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "zkcoord", *argv], env=_env(), capture_output=True, text=True, timeout=400
        )
        assert proc.returncode == 0, proc.stderr[-4000:] + spark_cluster.log_tails()
    app_id = spark_connect.app_id()
    assert_ran_on_workers(spark_cluster, app_id, executor_tasks(spark_connect.ui_url, app_id))
    assert_same_outputs(local_outputs, out)
