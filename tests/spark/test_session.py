"""The shared Spark session works on loopback and computes."""

import pytest

pytestmark = pytest.mark.spark


def test_local_session_counts(spark) -> None:
    df = spark.createDataFrame([(i % 3,) for i in range(30)], ["k"])
    counts = {r["k"]: r["count"] for r in df.groupBy("k").count().collect()}
    assert counts == {0: 10, 1: 10, 2: 10}
