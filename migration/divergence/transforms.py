"""Pure DataFrame → DataFrame transforms of the divergence report: per-partition comparison of the two
stores (agreement, lag), per-group summary against a lag bound, and overall counts. No reading, no
writing, no session creation here — the job does that — so every transform is testable on tiny frames.

Agreement values match zkcoord.bridge.policy.Agreement: agree, zookeeper-ahead, broker-ahead,
missing-in-zookeeper, missing-in-broker. Negative offsets (-1: nothing committed) count as missing.
"""

from __future__ import annotations

from typing import Any

KEYS = ["group", "topic", "partition"]
AGREEMENTS = ("agree", "zookeeper-ahead", "broker-ahead", "missing-in-zookeeper", "missing-in-broker")


def compare(zookeeper: Any, broker: Any) -> Any:
    """One row per (group, topic, partition) present in either snapshot: zk_offset, broker_offset,
    agreement, lag (|zk - broker|, 0 when a side is missing)."""
    from pyspark.sql import functions as F

    zk = zookeeper.where(F.col("offset") >= 0).select(*KEYS, F.col("offset").cast("long").alias("zk_offset"))
    br = broker.where(F.col("offset") >= 0).select(*KEYS, F.col("offset").cast("long").alias("broker_offset"))
    joined = zk.join(br, on=KEYS, how="full_outer")
    z, b = F.col("zk_offset"), F.col("broker_offset")
    agreement = (
        F.when(z.isNull(), F.lit("missing-in-zookeeper"))
        .when(b.isNull(), F.lit("missing-in-broker"))
        .when(z == b, F.lit("agree"))
        .when(z > b, F.lit("zookeeper-ahead"))
        .otherwise(F.lit("broker-ahead"))
    )
    lag = F.when(z.isNull() | b.isNull(), F.lit(0).cast("long")).otherwise(F.abs(z - b))
    return joined.select(*KEYS, z, b, agreement.alias("agreement"), lag.alias("lag"))


def disagreements(compared: Any, max_lag: int = 0) -> Any:
    """Rows that break the bound: a missing side or a lag above `max_lag` (what `migrate verify` lists)."""
    from pyspark.sql import functions as F

    if max_lag < 0:
        raise ValueError(f"max_lag must be >= 0, not {max_lag}")
    missing = F.col("agreement").startswith("missing-")
    return compared.where(missing | (F.col("lag") > F.lit(max_lag)))


def group_summary(compared: Any, max_lag: int = 0) -> Any:
    """Per group: partition counts by agreement, max and total lag, and `within_bound` (ready to verify).

    `regress_if_broker_only` counts partitions where ZooKeeper is ahead (a member switched to broker-only
    storage now would re-read); `regress_if_zookeeper_only` the reverse (what a careless rollback re-reads)."""
    from pyspark.sql import functions as F

    def count(value: str) -> Any:
        return F.sum(F.when(F.col("agreement") == value, 1).otherwise(0)).cast("long")

    summary = compared.groupBy("group").agg(
        F.count(F.lit(1)).alias("partitions"),
        *[count(a).alias(a.replace("-", "_")) for a in AGREEMENTS],
        F.max("lag").alias("max_lag"),
        F.sum("lag").alias("total_lag"),
        F.sum(F.when(F.col("agreement") == "zookeeper-ahead", F.col("lag")).otherwise(0))
        .cast("long")
        .alias("regress_if_broker_only"),
        F.sum(F.when(F.col("agreement") == "broker-ahead", F.col("lag")).otherwise(0))
        .cast("long")
        .alias("regress_if_zookeeper_only"),
    )
    bound_ok = (
        (F.col("missing_in_zookeeper") == 0)
        & (F.col("missing_in_broker") == 0)
        & (F.col("max_lag") <= F.lit(max_lag))
    )
    return summary.withColumn("within_bound", bound_ok)


def overall(compared: Any) -> Any:
    """Partition counts and total lag per agreement value, all five always present, in AGREEMENTS order."""
    from pyspark.sql import functions as F

    spark = compared.sparkSession
    order = spark.createDataFrame([(a, i) for i, a in enumerate(AGREEMENTS)], "agreement string, ord int")
    counts = compared.groupBy("agreement").agg(
        F.count(F.lit(1)).alias("partitions"), F.sum("lag").alias("lag")
    )
    return (
        order.join(counts, on="agreement", how="left")
        .select(
            "agreement",
            F.coalesce("partitions", F.lit(0)).cast("long").alias("partitions"),
            F.coalesce("lag", F.lit(0)).cast("long").alias("lag"),
            "ord",
        )
        .orderBy("ord")
        .drop("ord")
    )
