"""Runs both Spark jobs on one cluster session in a process of its own (the test process already holds a
local SparkContext, and a JVM has one), then prints the application's completed tasks per executor (its UI's
REST API) as JSON on the last line of stdout.

    python cluster_job.py MASTER CONF_JSON TRACES REPORT_OUT ZK_SNAPSHOT BROKER_SNAPSHOT DIVERGENCE_OUT
"""

from __future__ import annotations

import io
import json
import sys

from migration.compare.report import run_report
from migration.divergence.job import run_divergence
from migration.spark import spark_session
from zkcoord.testing.spark_cluster import executor_tasks


def main(argv: list[str]) -> None:
    master, conf, traces, report_out, zk_snap, broker_snap, divergence_out = argv
    session = spark_session(master, app_name="zkcoord-cluster-test", conf=json.loads(conf))
    try:
        run_report([traces], report_out, spark=session, progress=False)
        run_divergence(zk_snap, broker_snap, divergence_out, spark=session, progress_out=io.StringIO())
        sc = session.sparkContext
        print(
            json.dumps({"app_id": sc.applicationId, "tasks": executor_tasks(sc.uiWebUrl, sc.applicationId)})
        )
    finally:
        session.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
