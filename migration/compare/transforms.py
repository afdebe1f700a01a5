"""The comparison metrics as pure DataFrame -> DataFrame transforms over trace events (no I/O, no collect).

Inputs: `events` with the trace schema (migration.compare.trace.EVENT_SCHEMA) and `runs` with one row per run
(run_id, scenario, protocol, strategy, started_ms, ended_ms, stopping_ms). Every metric is defined exactly in
docs/comparison.md; the short form is in each docstring. Times are milliseconds.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

RUN_KEYS = ("run_id", "scenario", "protocol")
TP = ("topic", "partition")
PERCENTILES = (0.5, 0.95, 0.99)


def _kind(events: DataFrame, kind: str) -> DataFrame:
    return events.where(F.col("kind") == kind)


def _effective_end(events: DataFrame, runs: DataFrame) -> DataFrame:
    """run_id -> end_ms: the run's recorded end, or its last event when the run did not close."""
    last = events.groupBy("run_id").agg(F.max("ts_ms").alias("last_ts_ms"))
    return (
        runs.select("run_id", "ended_ms")
        .join(last, "run_id", "left")
        .select("run_id", F.coalesce("ended_ms", "last_ts_ms").alias("end_ms"))
    )


# --------------------------------------------------------------------------------------------------------------
# Rebalances and latency


def rebalance_episodes(events: DataFrame) -> DataFrame:
    """One row per (run, generation) that has both a rebalance_start and a rebalance_end:
    start_ms = earliest rebalance_start, end_ms = latest rebalance_end, duration_ms = end_ms - start_ms,
    members = distinct members that ended it."""
    starts = (
        _kind(events, "rebalance_start")
        .groupBy(*RUN_KEYS, "generation")
        .agg(F.min("ts_ms").alias("start_ms"))
    )
    ends = (
        _kind(events, "rebalance_end")
        .groupBy(*RUN_KEYS, "generation")
        .agg(F.max("ts_ms").alias("end_ms"), F.countDistinct("member").alias("members"))
    )
    return (
        starts.join(ends, [*RUN_KEYS, "generation"], "inner")
        .where(F.col("end_ms") >= F.col("start_ms"))
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .select(*RUN_KEYS, "generation", "start_ms", "end_ms", "duration_ms", "members")
    )


def _churn_windows(events: DataFrame, runs: DataFrame) -> DataFrame:
    """One row per churn event, numbered `seq` in the run's order, with its window [churn_ms, window_end_ms):
    until the run's next churn event, or the run's end + 1."""
    w = Window.partitionBy("run_id").orderBy("churn_ms", "member", "detail")
    return (
        _kind(events, "churn")
        .select(*RUN_KEYS, F.col("ts_ms").alias("churn_ms"), "member", "detail")
        .withColumn("seq", F.row_number().over(w))
        .withColumn("next_ms", F.lead("churn_ms").over(w))
        .join(_effective_end(events, runs), "run_id", "left")
        .withColumn("window_end_ms", F.coalesce("next_ms", F.col("end_ms") + F.lit(1)))
    )


def churn_to_stable(events: DataFrame, runs: DataFrame) -> DataFrame:
    """One row per churn event: stable_ms = the latest rebalance_end at or after the churn and before the next
    churn event of the run (or the run's end); latency_ms = stable_ms - churn ts. Both null when no rebalance
    ended in that window (the event did not disturb the group)."""
    churn = _churn_windows(events, runs)
    ends = _kind(events, "rebalance_end").select(F.col("run_id").alias("e_run"), F.col("ts_ms").alias("e_ts"))
    cond = (
        (F.col("e_run") == F.col("run_id"))
        & (F.col("e_ts") >= F.col("churn_ms"))
        & (F.col("e_ts") < F.col("window_end_ms"))
    )
    return (
        churn.join(ends, cond, "left")
        .groupBy(*RUN_KEYS, "seq", "churn_ms", "member", "detail")
        .agg(F.max("e_ts").alias("stable_ms"))
        .withColumn("latency_ms", F.col("stable_ms") - F.col("churn_ms"))
        .withColumn("event", F.get_json_object("detail", "$.event"))
        .select(*RUN_KEYS, "seq", "churn_ms", "event", "member", "stable_ms", "latency_ms")
    )


def percentiles(df: DataFrame, value: str, by: tuple[str, ...] = ("scenario", "protocol")) -> DataFrame:
    """n, p50, p95, p99 (exact, linear interpolation between closest ranks: position p*(n-1) in the sorted
    values), max and mean of `value` per `by`; null values are left out."""
    vals = df.where(F.col(value).isNotNull())
    pct = F.percentile(F.col(value).cast("double"), F.array(*[F.lit(p) for p in PERCENTILES]))
    return (
        vals.groupBy(*by)
        .agg(
            F.count(value).alias("n"),
            pct.alias("_p"),
            F.max(value).cast("double").alias("max"),
            F.avg(value).alias("mean"),
        )
        .select(
            *by,
            "n",
            F.col("_p")[0].alias("p50"),
            F.col("_p")[1].alias("p95"),
            F.col("_p")[2].alias("p99"),
            "max",
            "mean",
        )
    )


# --------------------------------------------------------------------------------------------------------------
# Partition movement


def partitions_moved(events: DataFrame) -> DataFrame:
    """One row per (run, generation) with assignment rows: assigned = partitions assigned in it; moved =
    partitions whose owner differs from their owner in the most recent earlier generation that assigned them
    (a partition with no earlier owner has not moved); first = whether this is the run's first generation."""
    owners = (
        _kind(events, "assignment")
        .where(F.col("topic").isNotNull())
        .groupBy(*RUN_KEYS, "generation", *TP)
        # Two members assigned one partition in one generation is an assignor bug; min() keeps it deterministic.
        .agg(F.min("member").alias("owner"))
    )
    w = Window.partitionBy("run_id", *TP).orderBy("generation")
    flagged = owners.withColumn("prev_owner", F.lag("owner").over(w)).withColumn(
        "moved", (F.col("prev_owner").isNotNull() & (F.col("prev_owner") != F.col("owner"))).cast("int")
    )
    gens = _kind(events, "assignment").select(*RUN_KEYS, "generation").distinct()
    first = gens.groupBy("run_id").agg(F.min("generation").alias("first_gen"))
    per_gen = flagged.groupBy(*RUN_KEYS, "generation").agg(
        F.count(F.lit(1)).alias("assigned"), F.sum("moved").alias("moved")
    )
    return (
        gens.join(per_gen, [*RUN_KEYS, "generation"], "left")
        .join(first, "run_id")
        .select(
            *RUN_KEYS,
            "generation",
            F.coalesce("assigned", F.lit(0)).cast("long").alias("assigned"),
            F.coalesce("moved", F.lit(0)).cast("long").alias("moved"),
            (F.col("generation") == F.col("first_gen")).alias("first"),
        )
    )


# --------------------------------------------------------------------------------------------------------------
# Ownership intervals, gaps and overlaps


def ownership_intervals(events: DataFrame, runs: DataFrame) -> DataFrame:
    """[start_ms, end_ms) per member and partition: the k-th own_start of a (run, member, partition) pairs with
    its k-th own_end; a start with no end lasts until the run's end."""
    end = _effective_end(events, runs)
    key = ["run_id", "member", *TP]
    w_order = ["ts_ms", "offset"]
    starts = (
        _kind(events, "own_start")
        .withColumn("k", F.row_number().over(Window.partitionBy(*key).orderBy(*w_order)))
        .select(*RUN_KEYS, "member", *TP, "k", F.col("ts_ms").alias("start_ms"))
    )
    ends = (
        _kind(events, "own_end")
        .withColumn("k", F.row_number().over(Window.partitionBy(*key).orderBy(*w_order)))
        .select("run_id", "member", *TP, "k", F.col("ts_ms").alias("own_end_ms"))
    )
    return (
        starts.join(ends, [*key, "k"], "left")
        .join(end, "run_id", "left")
        .select(
            *RUN_KEYS,
            *TP,
            "member",
            "start_ms",
            F.coalesce("own_end_ms", "end_ms").alias("end_ms"),
        )
    )


def ownership_anomalies(intervals: DataFrame, runs: DataFrame) -> DataFrame:
    """Maximal intervals [start_ms, end_ms) of positive length in which a partition has no owner ("gap") or two
    or more owners ("overlap"), counted from the partition's first own_start to the run's end. A hand-off where
    one owner's end and the next owner's start carry the same timestamp is neither. When the run has a
    `stopping_ms` (the runner's orderly shutdown began), everything from then on is left out: members stopping
    at the end of a run are not gaps."""
    end = runs.select("run_id", F.col("ended_ms").alias("run_end_ms"), F.col("stopping_ms"))
    points = (
        intervals.select(*RUN_KEYS, *TP, F.col("start_ms").alias("ts"), F.lit(1).alias("d"))
        .unionByName(intervals.select(*RUN_KEYS, *TP, F.col("end_ms").alias("ts"), F.lit(-1).alias("d")))
        .groupBy(*RUN_KEYS, *TP, "ts")
        .agg(F.sum("d").alias("d"))
    )
    last_end = intervals.groupBy("run_id").agg(F.max("end_ms").alias("last_end_ms"))
    w = Window.partitionBy("run_id", *TP).orderBy("ts")
    segments = (
        points.join(end, "run_id", "left")
        .join(last_end, "run_id", "left")
        .withColumn("owners", F.sum("d").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .withColumn(
            "next_ts",
            F.coalesce(
                F.lead("ts").over(w), F.greatest(F.col("run_end_ms"), F.col("last_end_ms")), F.col("ts")
            ),
        )
        .withColumn("next_ts", F.least("next_ts", F.coalesce("stopping_ms", "next_ts")))
        .where(F.col("next_ts") > F.col("ts"))
        .withColumn(
            "state",
            F.when(F.col("owners") == 0, F.lit("gap"))
            .when(F.col("owners") >= 2, F.lit("overlap"))
            .otherwise(F.lit("ok")),
        )
    )
    w2 = Window.partitionBy("run_id", *TP).orderBy("ts")
    islands = segments.withColumn(
        "change", (F.lag("state").over(w2).isNull() | (F.lag("state").over(w2) != F.col("state"))).cast("int")
    ).withColumn("island", F.sum("change").over(w2.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    return (
        islands.where(F.col("state") != "ok")
        .groupBy(*RUN_KEYS, *TP, "island", "state")
        .agg(
            F.min("ts").alias("start_ms"),
            F.max("next_ts").alias("end_ms"),
            F.max("owners").alias("max_owners"),
        )
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .select(
            *RUN_KEYS, *TP, F.col("state").alias("kind"), "start_ms", "end_ms", "duration_ms", "max_owners"
        )
    )


def anomaly_totals(anomalies: DataFrame, runs: DataFrame) -> DataFrame:
    """Per run: count, total and longest duration of gaps and of overlaps (zero when there are none)."""

    def agg(kind: str) -> list[Column]:
        sel = F.col("kind") == kind
        return [
            F.sum(F.when(sel, 1).otherwise(0)).alias(f"{kind}s"),
            F.sum(F.when(sel, F.col("duration_ms")).otherwise(0)).alias(f"{kind}_ms_total"),
            F.max(F.when(sel, F.col("duration_ms"))).alias(f"{kind}_ms_max"),
        ]

    per_run = anomalies.groupBy("run_id").agg(*agg("gap"), *agg("overlap"))
    cols = ["gaps", "gap_ms_total", "gap_ms_max", "overlaps", "overlap_ms_total", "overlap_ms_max"]
    return (
        runs.select(*RUN_KEYS)
        .join(per_run, "run_id", "left")
        .select(*RUN_KEYS, *[F.coalesce(c, F.lit(0)).cast("long").alias(c) for c in cols])
    )


# --------------------------------------------------------------------------------------------------------------
# Hand-overs per membership change (eager against cooperative)


def handovers_per_change(events: DataFrame, runs: DataFrame, anomalies: DataFrame) -> DataFrame:
    """One row per churn event (a membership change or fault), over its window [churn_ms, the next churn event of
    the run, or the run's stopping_ms / end): released = own_end rows (partitions some member stopped owning);
    released_kept = those the same member owned again (own_start of the same partition) within the window, a
    partition released although its holder stayed the same; unowned_ms = the duration of the gaps (no owner,
    from `ownership_anomalies`) that began in the window. An incremental hand-over releases only what moves:
    released_kept 0."""
    window = (
        _churn_windows(events, runs)
        .join(runs.select("run_id", "stopping_ms"), "run_id", "left")
        .withColumn("window_end_ms", F.least("window_end_ms", F.coalesce("stopping_ms", "window_end_ms")))
        .select(*RUN_KEYS, "seq", "churn_ms", "member", "detail", "window_end_ms")
    )
    # Each own_end with the time its member next owned the partition (own_start and own_end alternate per member
    # and partition; at one ms an own_end sorts before an own_start, a release and a reclaim).
    w = Window.partitionBy("run_id", "member", *TP).orderBy("ts_ms", "kind")
    ends = (
        events.where(F.col("kind").isin("own_start", "own_end"))
        .withColumn("next_kind", F.lead("kind").over(w))
        .withColumn("next_ts", F.lead("ts_ms").over(w))
        .where(F.col("kind") == "own_end")
        .select(
            F.col("run_id").alias("m_run"),
            F.col("ts_ms").alias("ts"),
            F.lit(1).alias("is_end"),
            F.when(F.col("next_kind") == "own_start", F.col("next_ts")).alias("again_ms"),
            F.lit(None).cast("long").alias("gap_ms"),
        )
    )
    gaps = anomalies.where(F.col("kind") == "gap").select(
        F.col("run_id").alias("m_run"),
        F.col("start_ms").alias("ts"),
        F.lit(0).alias("is_end"),
        F.lit(None).cast("long").alias("again_ms"),
        F.col("duration_ms").cast("long").alias("gap_ms"),
    )
    in_window = (
        (F.col("m_run") == F.col("run_id"))
        & (F.col("ts") >= F.col("churn_ms"))
        & (F.col("ts") < F.col("window_end_ms"))
    )
    kept = (F.col("is_end") == 1) & (F.col("again_ms") < F.col("window_end_ms"))
    return (
        window.join(ends.unionByName(gaps), in_window, "left")
        .groupBy(*RUN_KEYS, "seq", "churn_ms", "member", "detail")
        .agg(
            F.sum("is_end").alias("released"),
            F.sum(F.when(kept, 1).otherwise(0)).alias("released_kept"),
            F.sum("gap_ms").alias("unowned_ms"),
        )
        .select(
            *RUN_KEYS,
            "seq",
            "churn_ms",
            "member",
            F.get_json_object("detail", "$.event").alias("event"),
            *[
                F.coalesce(c, F.lit(0)).cast("long").alias(c)
                for c in ("released", "released_kept", "unowned_ms")
            ],
        )
    )


def handovers_by_protocol(changes: DataFrame) -> DataFrame:
    """Per (scenario, protocol): changes = churn events, and the mean per change of released, released_kept
    and unowned partition-seconds (`handovers_per_change`), side by side for every protocol."""
    return (
        changes.groupBy("scenario", "protocol")
        .agg(
            F.count(F.lit(1)).alias("changes"),
            F.avg("released").alias("released_per_change"),
            F.avg("released_kept").alias("released_kept_per_change"),
            (F.avg("unowned_ms") / 1000.0).alias("unowned_s_per_change"),
        )
        .orderBy("scenario", "protocol")
    )


# --------------------------------------------------------------------------------------------------------------
# Records


def record_delivery(events: DataFrame, runs: DataFrame) -> DataFrame:
    """Per run: produced = distinct (topic, partition, offset) produced; consumed = consume rows; duplicates =
    consume rows beyond the first for the same (topic, partition, offset); duplicated_offsets = offsets consumed
    more than once; lost = produced offsets never consumed."""
    rec = (*TP, "offset")
    consumed = _kind(events, "consume").groupBy("run_id", *rec).agg(F.count(F.lit(1)).alias("times"))
    per_consumed = consumed.groupBy("run_id").agg(
        F.sum("times").alias("consumed"),
        F.sum(F.col("times") - 1).alias("duplicates"),
        F.sum(F.when(F.col("times") > 1, 1).otherwise(0)).alias("duplicated_offsets"),
    )
    produced = _kind(events, "produce").select("run_id", *rec).distinct()
    per_produced = produced.groupBy("run_id").agg(F.count(F.lit(1)).alias("produced"))
    lost = (
        produced.join(consumed.select("run_id", *rec), ["run_id", *rec], "left_anti")
        .groupBy("run_id")
        .agg(F.count(F.lit(1)).alias("lost"))
    )
    cols = ["produced", "consumed", "duplicates", "duplicated_offsets", "lost"]
    return (
        runs.select(*RUN_KEYS)
        .join(per_produced, "run_id", "left")
        .join(per_consumed, "run_id", "left")
        .join(lost, "run_id", "left")
        .select(*RUN_KEYS, *[F.coalesce(c, F.lit(0)).cast("long").alias(c) for c in cols])
    )


# --------------------------------------------------------------------------------------------------------------
# Work done per rebalance


def ops_per_episode(events: DataFrame, episodes: DataFrame) -> DataFrame:
    """Per rebalance episode: commits and zk_ops = commit / zk_op rows with start_ms <= ts <= end_ms."""
    ops = events.where(F.col("kind").isin("commit", "zk_op")).select(
        F.col("run_id").alias("o_run"), F.col("ts_ms").alias("o_ts"), F.col("kind").alias("o_kind")
    )
    cond = (
        (F.col("o_run") == F.col("run_id"))
        & (F.col("o_ts") >= F.col("start_ms"))
        & (F.col("o_ts") <= F.col("end_ms"))
    )
    return (
        episodes.join(ops, cond, "left")
        .groupBy(*RUN_KEYS, "generation", "start_ms", "end_ms")
        .agg(
            F.sum(F.when(F.col("o_kind") == "commit", 1).otherwise(0)).cast("long").alias("commits"),
            F.sum(F.when(F.col("o_kind") == "zk_op", 1).otherwise(0)).cast("long").alias("zk_ops"),
        )
    )


# --------------------------------------------------------------------------------------------------------------
# Summary per scenario and protocol


def summary(
    runs: DataFrame,
    episodes: DataFrame,
    churn: DataFrame,
    moved: DataFrame,
    anomalies_per_run: DataFrame,
    delivery: DataFrame,
    ops: DataFrame,
) -> DataFrame:
    """One row per (scenario, protocol) joining every metric; sums over runs for counts, percentiles over all
    rebalances of all runs for latencies, means per rebalance for movement and work."""
    by = ("scenario", "protocol")
    lat = percentiles(episodes, "duration_ms", by).select(
        *by,
        F.col("n").alias("rebalances"),
        *[F.col(c).alias(f"rebalance_{c}_ms") for c in ("p50", "p95", "p99", "max")],
    )
    stable = percentiles(churn, "latency_ms", by).select(
        *by, *[F.col(c).alias(f"churn_to_stable_{c}_ms") for c in ("p50", "p95", "p99", "max")]
    )
    mv = (
        moved.where(~F.col("first"))
        .groupBy(*by)
        .agg(
            F.avg("moved").alias("moved_per_rebalance_mean"), F.max("moved").alias("moved_per_rebalance_max")
        )
    )
    an = anomalies_per_run.groupBy(*by).agg(
        *[F.sum(c).alias(c) for c in ("gaps", "gap_ms_total", "overlaps", "overlap_ms_total")],
        F.max("gap_ms_max").alias("gap_ms_max"),
        F.max("overlap_ms_max").alias("overlap_ms_max"),
    )
    dl = delivery.groupBy(*by).agg(
        *[F.sum(c).alias(c) for c in ("produced", "consumed", "duplicates", "duplicated_offsets", "lost")]
    )
    wk = ops.groupBy(*by).agg(
        F.avg("commits").alias("commits_per_rebalance"), F.avg("zk_ops").alias("zk_ops_per_rebalance")
    )
    base = runs.groupBy(*by).agg(
        F.countDistinct("run_id").alias("runs"),
        F.concat_ws(",", F.sort_array(F.collect_set("strategy"))).alias("strategy"),
    )
    out = base
    for part in (lat, stable, mv, an, dl, wk):
        out = out.join(part, list(by), "left")
    return out.orderBy(*by)
