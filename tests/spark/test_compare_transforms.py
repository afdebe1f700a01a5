"""The report's metrics on small synthetic traces, checked against values computed by hand (in the comments)."""

from __future__ import annotations

import pytest

from migration.compare import transforms as T
from migration.compare.report import events_spark_schema, runs_frame
from migration.compare.trace import RunMeta

pytestmark = pytest.mark.spark

R1 = ("r1", "s", "P")
R2 = ("r2", "s", "Q")


def ev(run, ts, kind, member=None, topic=None, partition=None, offset=None, generation=None, detail=None):
    return (*run, ts, kind, member, topic, partition, offset, generation, detail)


def own(run, member, partition, start, end=None):
    rows = [ev(run, start, "own_start", member, "t", partition)]
    if end is not None:
        rows.append(ev(run, end, "own_end", member, "t", partition))
    return rows


def _rows():
    r = []
    # Ownership, run r1 (ends at 100):
    # t-0: A [0,40), B [30,70), A [80,end)      -> overlap [30,40) 10 ms, gap [70,80) 10 ms
    r += own(R1, "A", 0, 0, 40) + own(R1, "B", 0, 30, 70) + own(R1, "A", 0, 80)
    # t-1: A [10,50), B [50,60) (same-ms hand-off), C [55,65) -> overlap [55,60) 5 ms, gap [65,100) 35 ms
    r += own(R1, "A", 1, 10, 50) + own(R1, "B", 1, 50, 60) + own(R1, "C", 1, 55, 65)
    # t-2: A [0,100), B [20,50), C [30,40): owners 1,2,3,2,1 -> ONE overlap [20,50) 30 ms, max 3 owners
    r += own(R1, "A", 2, 0, 100) + own(R1, "B", 2, 20, 50) + own(R1, "C", 2, 30, 40)
    # t-3: first owned at 50 (added later): no gap before its first owner
    r += own(R1, "A", 3, 50)
    # Rebalances: gen 1 [0,9] = 9 ms; gen 2 [30,38] = 8 ms; gen 3 never ends (dropped); gen 4 [80,84] = 4 ms
    r += [
        ev(R1, 0, "rebalance_start", "A", generation=1),
        ev(R1, 2, "rebalance_start", "B", generation=1),
        ev(R1, 5, "rebalance_end", "A", generation=1),
        ev(R1, 9, "rebalance_end", "B", generation=1),
        ev(R1, 30, "rebalance_start", "A", generation=2),
        ev(R1, 31, "rebalance_start", "B", generation=2),
        ev(R1, 38, "rebalance_end", "A", generation=2),
        ev(R1, 36, "rebalance_end", "B", generation=2),
        ev(R1, 70, "rebalance_start", "A", generation=3),
        ev(R1, 80, "rebalance_start", "A", generation=4),
        ev(R1, 84, "rebalance_end", "A", generation=4),
    ]
    # Churn: @28 -> last end in [28,69) is 38 (latency 10); @69 -> 84 in [69,90) (15); @90 -> none (null)
    r += [
        ev(R1, 28, "churn", "C", detail='{"event":"join"}'),
        ev(R1, 69, "churn", "C", detail='{"event":"crash"}'),
        ev(R1, 90, "churn", "B", detail='{"event":"pause"}'),
    ]
    # Assignments: g1 A{0,1} B{2}; g2 A{0} B{1,2} C{} (t-1 moved A->B: 1);
    # g4 A{0,1,2} B{3} (t-1 B->A, t-2 B->A: 2; t-3 is new: not moved)
    for g, member, parts in (
        (1, "A", (0, 1)),
        (1, "B", (2,)),
        (2, "A", (0,)),
        (2, "B", (1, 2)),
        (4, "A", (0, 1, 2)),
        (4, "B", (3,)),
    ):
        r += [ev(R1, 0, "assignment", member, "t", p, generation=g) for p in parts]
    r.append(ev(R1, 0, "assignment", "C", generation=2))
    # Records: produced t-0 0..4 and t-1 0..2 (8); consumed t-0 0,1,2,2,3,3,3 and t-1 0,2 and t-1 7 (10 rows)
    # duplicates = (2-1) + (3-1) = 3 over 2 offsets; lost = t-0 4 and t-1 1 = 2
    r += [ev(R1, 1, "produce", None, "t", 0, o) for o in range(5)]
    r += [ev(R1, 1, "produce", None, "t", 1, o) for o in range(3)]
    r += [ev(R1, 2, "consume", "A", "t", 0, o) for o in (0, 1, 2, 2, 3, 3, 3)]
    r += [ev(R1, 2, "consume", "A", "t", 1, o) for o in (0, 2, 7)]
    # Work: commits at 3, 9 (gen 1, end inclusive), 20 (outside), 35 (gen 2); zk ops at 0 (g1), 31, 31 (g2), 84 (g4), 85
    r += [ev(R1, ts, "commit", "A", "t", 0, 1) for ts in (3, 9, 20, 35)]
    r += [ev(R1, ts, "zk_op", "A", detail='{"op":"get"}') for ts in (0, 31, 31, 84, 85)]
    # Run r2 never closed (ended_ms null): its end is its last event (50). Nothing consumed: lost 2.
    r += own(R2, "A", 0, 10)
    r += [ev(R2, 20, "produce", None, "t", 0, 0), ev(R2, 50, "produce", None, "t", 0, 1)]
    return r


@pytest.fixture(scope="module", autouse=True)
def one_shuffle_partition(spark):
    """Tiny inputs: one shuffle partition per stage instead of the session's default (as the report job does)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.fixture(scope="module")
def frames(spark):
    events = spark.createDataFrame(_rows(), events_spark_schema()).cache()
    runs = runs_frame(
        spark,
        [RunMeta("r1", "s", "P", "range", 0, 100, True), RunMeta("r2", "s", "Q", "sticky", 0, None, False)],
    ).cache()
    return events, runs


def test_ownership_intervals_pair_starts_with_ends_and_close_at_run_end(frames):
    events, runs = frames
    got = sorted(
        (r.run_id, r.partition, r.member, r.start_ms, r.end_ms)
        for r in T.ownership_intervals(events, runs).collect()
    )
    assert got == sorted(
        [
            ("r1", 0, "A", 0, 40),
            ("r1", 0, "B", 30, 70),
            ("r1", 0, "A", 80, 100),
            ("r1", 1, "A", 10, 50),
            ("r1", 1, "B", 50, 60),
            ("r1", 1, "C", 55, 65),
            ("r1", 2, "A", 0, 100),
            ("r1", 2, "B", 20, 50),
            ("r1", 2, "C", 30, 40),
            ("r1", 3, "A", 50, 100),
            ("r2", 0, "A", 10, 50),
        ]
    )


def test_gaps_and_overlaps_exact_intervals(frames):
    events, runs = frames
    anomalies = T.ownership_anomalies(T.ownership_intervals(events, runs), runs)
    got = sorted(
        (r.run_id, r.partition, r.kind, r.start_ms, r.end_ms, r.duration_ms, r.max_owners)
        for r in anomalies.collect()
    )
    assert got == [
        ("r1", 0, "gap", 70, 80, 10, 0),
        ("r1", 0, "overlap", 30, 40, 10, 2),
        ("r1", 1, "gap", 65, 100, 35, 0),
        ("r1", 1, "overlap", 55, 60, 5, 2),
        ("r1", 2, "overlap", 20, 50, 30, 3),
    ]
    totals = {r.run_id: r.asDict() for r in T.anomaly_totals(anomalies, runs).collect()}
    assert totals["r1"] == {
        "run_id": "r1", "scenario": "s", "protocol": "P",
        "gaps": 2, "gap_ms_total": 45, "gap_ms_max": 35,
        "overlaps": 3, "overlap_ms_total": 45, "overlap_ms_max": 30,
    }  # fmt: skip
    assert {k: v for k, v in totals["r2"].items() if k.startswith(("gap", "overlap"))} == {
        "gaps": 0, "gap_ms_total": 0, "gap_ms_max": 0, "overlaps": 0, "overlap_ms_total": 0, "overlap_ms_max": 0,
    }  # fmt: skip


def test_rebalance_episodes_and_churn_to_stable(frames):
    events, runs = frames
    eps = sorted(
        (r.generation, r.start_ms, r.end_ms, r.duration_ms, r.members)
        for r in T.rebalance_episodes(events).collect()
    )
    assert eps == [(1, 0, 9, 9, 2), (2, 30, 38, 8, 2), (4, 80, 84, 4, 1)]
    churn = sorted(
        (r.seq, r.churn_ms, r.event, r.stable_ms, r.latency_ms)
        for r in T.churn_to_stable(events, runs).collect()
    )
    assert churn == [(1, 28, "join", 38, 10), (2, 69, "crash", 84, 15), (3, 90, "pause", None, None)]


def test_percentiles_linear_interpolation(spark):
    df = spark.createDataFrame([("s", "P", v) for v in (40, 10, 100, 30, 20)], ["scenario", "protocol", "v"])
    (row,) = T.percentiles(df, "v").collect()
    # sorted 10 20 30 40 100; p50 at 0.5*4 = 2 -> 30; p95 at 3.8 -> 40 + 0.8*60 = 88; p99 at 3.96 -> 97.6
    assert row.n == 5
    assert row.p50 == pytest.approx(30.0)
    assert row.p95 == pytest.approx(88.0)
    assert row.p99 == pytest.approx(97.6)
    assert row.max == 100.0
    assert row.mean == pytest.approx(40.0)


def test_partitions_moved_per_generation(frames):
    events, _ = frames
    got = sorted((r.generation, r.assigned, r.moved, r.first) for r in T.partitions_moved(events).collect())
    assert got == [(1, 3, 0, True), (2, 3, 1, False), (4, 4, 2, False)]


def test_duplicates_and_lost(frames):
    events, runs = frames
    got = {r.run_id: r.asDict() for r in T.record_delivery(events, runs).collect()}
    assert got["r1"] == {
        "run_id": "r1", "scenario": "s", "protocol": "P",
        "produced": 8, "consumed": 10, "duplicates": 3, "duplicated_offsets": 2, "lost": 2,
    }  # fmt: skip
    assert (got["r2"]["produced"], got["r2"]["consumed"], got["r2"]["lost"]) == (2, 0, 2)


def test_commits_and_zk_ops_per_rebalance(frames):
    events, _ = frames
    ops = T.ops_per_episode(events, T.rebalance_episodes(events))
    got = sorted((r.generation, r.commits, r.zk_ops) for r in ops.collect())
    assert got == [(1, 2, 1), (2, 1, 2), (4, 0, 1)]


def test_summary_joins_every_metric(frames):
    events, runs = frames
    eps = T.rebalance_episodes(events)
    intervals = T.ownership_intervals(events, runs)
    summ = T.summary(
        runs,
        eps,
        T.churn_to_stable(events, runs),
        T.partitions_moved(events),
        T.anomaly_totals(T.ownership_anomalies(intervals, runs), runs),
        T.record_delivery(events, runs),
        T.ops_per_episode(events, eps),
    )
    rows = {r.protocol: r.asDict() for r in summ.collect()}
    p = rows["P"]
    # durations 4, 8, 9: p50 = 8; p95 at 1.9 -> 8.9; churn latencies 10, 15: p50 = 12.5
    assert (p["rebalances"], p["rebalance_p50_ms"], p["rebalance_p95_ms"], p["rebalance_max_ms"]) == (
        3, 8.0, pytest.approx(8.9), 9.0,
    )  # fmt: skip
    assert p["churn_to_stable_p50_ms"] == pytest.approx(12.5)
    assert p["moved_per_rebalance_mean"] == pytest.approx(1.5)  # (1 + 2) / 2, first generation excluded
    assert (p["gaps"], p["overlaps"], p["duplicates"], p["lost"]) == (2, 3, 3, 2)
    assert p["commits_per_rebalance"] == pytest.approx(1.0)  # (2 + 1 + 0) / 3
    assert p["zk_ops_per_rebalance"] == pytest.approx(4 / 3)
    q = rows["Q"]
    assert (q["strategy"], q["runs"], q["rebalances"], q["lost"]) == ("sticky", 1, None, 2)


def test_orderly_shutdown_is_not_judged(spark):
    r3 = ("r3", "s", "P")
    # Stopping begins at 60, the run ends at 100. t-0: A [0,50) then nobody: gap [50,60) only (10 ms).
    # t-1: A [0,70), then nobody: the gap would start after 60, so there is none. t-2: A [0,100), B [55,80):
    # overlap [55,60) only (5 ms).
    rows = own(r3, "A", 0, 0, 50) + own(r3, "A", 1, 0, 70) + own(r3, "A", 2, 0, 100) + own(r3, "B", 2, 55, 80)
    events = spark.createDataFrame(rows, events_spark_schema())
    runs = runs_frame(spark, [RunMeta("r3", "s", "P", "range", 0, 100, True, stopping_ms=60)])
    anomalies = T.ownership_anomalies(T.ownership_intervals(events, runs), runs)
    got = sorted((r.partition, r.kind, r.start_ms, r.end_ms, r.duration_ms) for r in anomalies.collect())
    assert got == [(0, "gap", 50, 60, 10), (2, "overlap", 55, 60, 5)]


def test_handovers_per_change_on_the_shared_trace(frames):
    events, runs = frames
    anomalies = T.ownership_anomalies(T.ownership_intervals(events, runs), runs)
    got = sorted(
        (r.run_id, r.seq, r.event, r.released, r.released_kept, r.unowned_ms)
        for r in T.handovers_per_change(events, runs, anomalies).collect()
    )
    # join @28, window [28,69): own_end at 40 (A t-0), 50 (A t-1), 60 (B t-1), 65 (C t-1), 50 (B t-2), 40 (C t-2);
    # none owned again by its member before 69; gap t-1 from 65 (35 ms). crash @69, [69,90): B t-0 at 70, gap
    # t-0 from 70 (10 ms). pause @90, [90,101): A t-2 at 100.
    assert got == [("r1", 1, "join", 6, 0, 35), ("r1", 2, "crash", 1, 0, 10), ("r1", 3, "pause", 1, 0, 0)]


def test_an_eager_hand_over_releases_what_its_holder_keeps_a_cooperative_one_does_not(spark):
    eager, coop = ("e", "s", "eager"), ("c", "s", "coop")
    rows = []
    for run in (eager, coop):
        rows += [
            ev(run, 10, "churn", "B", detail='{"event":"join"}'),
            ev(run, 30, "churn", "B", detail='{"event":"leave"}'),
        ]
        rows += own(run, "B", 1, 16, 30)
    # eager: A releases t-0 and t-1 at 12, owns t-0 again at 15 (kept, gap 3 ms); B takes t-1 at 16 (gap 4 ms)
    rows += own(eager, "A", 0, 0, 12) + own(eager, "A", 0, 15) + own(eager, "A", 1, 0, 12)
    # cooperative: A keeps t-0 throughout and releases only t-1 at 12
    rows += own(coop, "A", 0, 0) + own(coop, "A", 1, 0, 12)
    events = spark.createDataFrame(rows, events_spark_schema())
    runs = runs_frame(
        spark,
        [
            RunMeta("e", "s", "eager", "range", 0, 40, True),
            RunMeta("c", "s", "coop", "cooperative-sticky", 0, 40, True),
        ],
    )
    anomalies = T.ownership_anomalies(T.ownership_intervals(events, runs), runs)
    changes = T.handovers_per_change(events, runs, anomalies).cache()
    got = sorted((r.run_id, r.event, r.released, r.released_kept, r.unowned_ms) for r in changes.collect())
    # the leave at 30: B's own_end at 30 (t-1 then unowned until the run's end at 40: 10 ms)
    assert got == [
        ("c", "join", 1, 0, 4), ("c", "leave", 1, 0, 10),
        ("e", "join", 2, 1, 7), ("e", "leave", 1, 0, 10),
    ]  # fmt: skip
    by = {r.protocol: r.asDict() for r in T.handovers_by_protocol(changes).collect()}
    assert by["eager"] == {"scenario": "s", "protocol": "eager", "changes": 2, "released_per_change": 1.5,
                           "released_kept_per_change": 0.5, "unowned_s_per_change": pytest.approx(0.0085)}  # fmt: skip
    assert by["coop"]["released_kept_per_change"] == 0 and by["coop"][
        "unowned_s_per_change"
    ] == pytest.approx(0.007)
