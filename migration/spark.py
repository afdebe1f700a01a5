"""The one place a SparkSession is built: local[2] by default, any cluster by `master`, quiet and loopback-bound."""

from __future__ import annotations

import os
from typing import Any


def spark_session(master: str | None = None, app_name: str = "zkcoord", driver_memory: str = "1g") -> Any:
    """A SparkSession for zkcoord jobs; `master` like 'local[2]' (default) or 'spark://host:7077'."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", _python()))
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master or "local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _python() -> str:
    import sys

    return sys.executable
