"""One local SparkSession for every Spark test in the run (starting one costs ~7 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from migration.spark import spark_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]", app_name="zkcoord-tests")
    try:
        yield session
    finally:
        session.stop()
