"""The one place a SparkSession is built and a job path becomes a URI every executor can read: local[2] by
default, a cluster by `spark://...` (or any master), Spark Connect by `sc://...`; on loopback only when local."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONNECT_SCHEME = "sc://"

# JVM options for a short job on small data (the demo's report, a test's session): only the C1 compiler. C2's
# optimised code pays off over minutes of work; in a job of seconds on 2 cores its compiler threads are mostly
# what the JVM spends its CPU on (the demo's report, session included: 57 CPU s with C2, 33 with C1 only).
SHORT_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def is_local_master(master: str | None) -> bool:
    return master is None or master == "local" or master.startswith("local[")


def is_connect(session: Any) -> bool:
    """True for a Spark Connect session: it has no SparkContext, so no status tracker and no log level."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def spark_session(
    master: str | None = None,
    app_name: str = "zkcoord",
    driver_memory: str = "1g",
    conf: Mapping[str, str] | None = None,
    short_job: bool = False,
) -> Any:
    """A SparkSession for zkcoord jobs. `master`: 'local[2]' (default), 'spark://host:7077' (or yarn, k8s...),
    or 'sc://host:15002' for a Spark Connect server. `conf` adds or overrides Spark settings.

    Only a local master is pinned to 127.0.0.1 and to this interpreter for Python workers: on a cluster the
    executors must reach the driver at an address they can route to (Spark's own choice, or the user's
    SPARK_LOCAL_IP / spark.driver.host) and run the Python the cluster has (spark.pyspark.python or their
    PATH's python3), which is rarely the driver's path.

    `short_job`: a job of seconds on small data; the JVMs this session starts (the driver, and on a cluster
    its executors) run SHORT_JOB_JAVA_OPTIONS. A Connect server's JVMs are the server's own."""
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
    }
    if master is not None and master.startswith(CONNECT_SCHEME):
        # The server owns the driver: driver and UI settings are its own; only session SQL settings apply.
        builder = SparkSession.builder.remote(master)
        for key, value in {**settings, **(conf or {})}.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    settings["spark.driver.memory"] = driver_memory
    if short_job:
        settings["spark.driver.extraJavaOptions"] = SHORT_JOB_JAVA_OPTIONS
        if not is_local_master(master):
            settings["spark.executor.extraJavaOptions"] = SHORT_JOB_JAVA_OPTIONS
    if is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings |= {
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        }
    builder = SparkSession.builder.master(master or "local[2]").appName(app_name)
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def job_uri(path: str | Path) -> str:
    """A path as every executor sees it: a URI ('file:///abs', 's3a://...', 'hdfs://...') is kept as it is; a
    local path becomes an absolute file:// URI, because a relative path would resolve against each executor's
    working directory instead of the caller's."""
    text = str(path)
    if has_scheme(text):
        return text
    # Not Path.as_uri(): Hadoop's Path keeps percent escapes literally, so 'a b' must stay 'a b', not 'a%20b'.
    return "file://" + Path(text).resolve().as_posix()


def has_scheme(text: str) -> bool:
    head, sep, _ = text.partition("://")
    return bool(sep) and head.replace("+", "").replace("-", "").replace(".", "").isalnum()


def filesystem(uri: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, path inside it) for a local path or a URI the driver itself must read or write
    (run metadata, summary files); the schemes are pyarrow's: file, s3, gs, hdfs, abfs."""
    from pyarrow import fs as pafs

    if not has_scheme(uri):
        return pafs.LocalFileSystem(), str(Path(uri).resolve())
    if uri.startswith("file://"):  # job_uri's form, which may hold characters a strict URI parser refuses
        return pafs.LocalFileSystem(), uri[len("file://") :]
    # Hadoop spells S3 's3a'; pyarrow reads the same buckets as 's3'.
    if uri.startswith("s3a://"):
        uri = "s3://" + uri[len("s3a://") :]
    filesys, inner = pafs.FileSystem.from_uri(uri)
    return filesys, inner
