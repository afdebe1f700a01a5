"""How the comparison report presents its figures (pure, no Spark): no percentile from too few samples and every
one beside its count, rates per run-minute and per churn event, the run metadata, a takeaway written from the
numbers, and shades of one hue far enough apart to tell members of one protocol kind apart."""

from __future__ import annotations

import itertools
from pathlib import Path

from migration.compare.report import (
    MIN_SAMPLES,
    _plt,
    _protocol_colours,
    _shades,
    presentable,
    run_metadata,
    takeaway,
)
from migration.compare.trace import RunMeta

RUNS = [
    RunMeta("a1", "demo", "legacy-fast", "range", 0, ended_ms=16_000),
    RunMeta("b1", "demo", "classic", "range", 0, ended_ms=25_000),  # a longer run: more time to lose
    RunMeta("b2", "demo", "classic", "range", 0, ended_ms=35_000),
]
SUMMARY = [
    {"scenario": "demo", "protocol": "legacy-fast", "rebalances": 6, "rebalance_p50_ms": 300.0,
     "rebalance_p95_ms": 900.0, "rebalance_p99_ms": 950.0, "churn_to_stable_p95_ms": 1000.0, "gaps": 12,
     "gap_ms_total": 4000, "duplicates": 36, "lost": 0},
    {"scenario": "demo", "protocol": "classic", "rebalances": 120, "rebalance_p50_ms": 40.0,
     "rebalance_p95_ms": 90.0, "rebalance_p99_ms": 120.0, "churn_to_stable_p95_ms": 200.0, "gaps": 24,
     "gap_ms_total": 4000, "duplicates": 0, "lost": 0},
]  # fmt: skip
CHURN = {("demo", "legacy-fast"): 6, ("demo", "classic"): 24}


def test_percentiles_need_enough_samples_and_rates_are_normalised() -> None:
    rows = {r["protocol"]: r for r in presentable(SUMMARY, CHURN, RUNS)}
    few, many = rows["legacy-fast"], rows["classic"]
    assert MIN_SAMPLES == {"p95": 20, "p99": 100}
    assert (few["rebalance_p95_ms"], few["rebalance_p99_ms"], few["rebalance_p50_ms"]) == (
        "n<20",
        "n<100",
        300.0,
    )
    assert (many["rebalance_p95_ms"], many["rebalance_p99_ms"]) == (90.0, 120.0)  # 120 samples: both shown
    assert (few["churn_to_stable_p95_ms"], many["churn_to_stable_p95_ms"]) == ("n<20", 200.0)
    # The same gap time over 16 s of play and over 60 s of play is not the same rate.
    assert (few["run_minutes"], many["run_minutes"]) == (0.27, 1.0)
    assert (few["gap_ms_per_minute"], many["gap_ms_per_minute"]) == (15_000.0, 4000.0)
    assert (few["duplicates_per_churn"], few["gaps_per_churn"], many["gaps_per_churn"]) == (6.0, 2.0, 1.0)
    assert SUMMARY[0]["rebalance_p95_ms"] == 900.0  # the tables keep the raw figures


def test_the_takeaway_is_written_from_the_figures() -> None:
    text = takeaway(presentable(SUMMARY, CHURN, RUNS))
    assert text[0] == (
        "demo: classic rebalanced fastest, median 40.0 ms over 120 rebalances; legacy-fast slowest, 300.0 ms "
        "over 6 (7.5x); fewer than 20 rebalances each: a ranking a second run may reverse, play more runs (--runs N) "
        "before relying on it."
    )
    assert "least with classic (4,000.0 ms per run-minute) and most with legacy-fast (15,000.0" in text[1]
    assert text[2].startswith("demo: duplicates legacy-fast 36 (6.0 per churn event): records consumed after")
    assert text[3] == "demo: no record lost."


def test_run_metadata_names_date_version_machine_and_load() -> None:
    meta = run_metadata(RUNS, 1_800_000_000.0)
    assert meta["generated"] == "2027-01-15 08:00:00 UTC"
    assert meta["zkcoord"] and "CPUs" in meta["machine"] and "(1 / 5 / 15 min)" in meta["load"]
    assert meta["runs_from"] == "1970-01-01 00:00 UTC"


def test_shades_of_one_hue_are_far_apart_and_neighbours_differ_most() -> None:
    assert _shades(1) == [0.65]
    six = _shades(6)
    assert min(six) == 0.3 and max(six) == 1.0 and len(set(six)) == 6
    assert min(abs(a - b) for a, b in itertools.pairwise(six)) > 0.25  # legend neighbours
    members = [f"m{i}" for i in range(12)]
    protocols = {m: ("legacy-fast" if i < 6 else "classic") for i, m in enumerate(members)}
    colours = _protocol_colours(_plt(), members, protocols)
    assert len({colours[m] for m in members}) == 12


def test_a_ranking_from_enough_rebalances_carries_no_caveat() -> None:
    enough = [{**row, "rebalances": 40} for row in SUMMARY]
    first = takeaway(presentable(enough, CHURN, RUNS))[0]
    assert first.endswith("300.0 ms over 40 (7.5x).")


def test_the_summary_document_follows_its_schema_and_hides_thin_percentiles() -> None:
    import jsonschema

    from migration.compare.report import SUMMARY_SCHEMA, ReportResult, summary_document

    result = ReportResult(out_dir=Path("."), runs=RUNS, summary=SUMMARY, churn_events=CHURN)
    result.generated = run_metadata(RUNS, 1_800_000_000.0)
    doc = summary_document(result)
    jsonschema.validate(doc, SUMMARY_SCHEMA)
    rows = {r["protocol"]: r for r in doc["summary"]}
    assert (rows["legacy-fast"]["rebalance_p95_ms"], rows["legacy-fast"]["rebalance_p50_ms"]) == (None, 300.0)
    assert (rows["classic"]["rebalance_p95_ms"], rows["classic"]["rebalances"]) == (90.0, 120)
    assert doc["min_samples"] == {"p95": 20, "p99": 100} and doc["runs"] == 3
    assert doc["takeaway"][0].startswith("demo: classic rebalanced fastest")
