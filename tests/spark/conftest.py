"""One local SparkSession for every Spark test in the run (starting one costs ~7 s)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from migration.spark import spark_session

pytestmark = pytest.mark.spark


def _stop(session: Any, timeout: float = 60.0) -> None:
    """Stop the session; if py4j's shutdown hangs (it can, in its accumulator server), end the JVM instead."""
    stopper = threading.Thread(target=session.stop, name="spark-stop", daemon=True)
    stopper.start()
    stopper.join(timeout)
    if stopper.is_alive():
        gateway = session.sparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.kill()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]", app_name="zkcoord-tests", short_job=True)  # test data is small
    try:
        yield session
    finally:
        _stop(session)
