"""The trace format: what the writer stores is what a reader gets back, parts appear atomically, a run is
complete only after close, and bad metadata is named precisely."""

from __future__ import annotations

import json
import threading

import pyarrow.parquet as pq
import pytest

from migration.compare.trace import (
    EVENT_SCHEMA,
    KINDS,
    EventKind,
    RunMeta,
    TraceError,
    TraceWriter,
    event_parts,
    find_runs,
    read_events,
    read_meta,
)


def meta(run_id="r1"):
    return RunMeta(run_id, "demo", "legacy-fast", "range", started_ms=1000)


def test_round_trip_rows_parts_and_metadata(tmp_path):
    w = TraceWriter(tmp_path / "r1", meta(), flush_rows=3)
    w.assignment(1001, "m0", 1, [("t", 1), ("t", 0)])
    w.assignment(1001, "m1", 1, [])
    w.emit(1002, EventKind.OWN_START, member="m0", topic="t", partition=0)
    w.emit(1003, EventKind.ZK_OP, member="m0", detail={"path": "/x", "op": "create"})
    assert read_meta(tmp_path / "r1").complete is False
    w.close(ended_ms=2000, extra={"zk_hosts": "127.0.0.1:2181"})

    assert len(event_parts(tmp_path / "r1")) == 2  # 3 rows flushed at the limit, 2 at close
    table = read_events(tmp_path / "r1")
    assert table.schema.equals(EVENT_SCHEMA)
    rows = table.to_pylist()
    assert [
        (r["ts_ms"], r["kind"], r["member"], r["topic"], r["partition"], r["generation"]) for r in rows
    ] == [
        (1001, "assignment", "m0", "t", 0, 1),
        (1001, "assignment", "m0", "t", 1, 1),
        (1001, "assignment", "m1", None, None, 1),
        (1002, "own_start", "m0", "t", 0, None),
        (1003, "zk_op", "m0", None, None, None),
    ]
    assert {r["run_id"] for r in rows} == {"r1"} and {r["protocol"] for r in rows} == {"legacy-fast"}
    assert json.loads(rows[4]["detail"]) == {"op": "create", "path": "/x"}
    m = read_meta(tmp_path / "r1")
    assert (m.complete, m.started_ms, m.ended_ms, dict(m.extra or {})) == (
        True,
        1000,
        2000,
        {"zk_hosts": "127.0.0.1:2181"},
    )
    assert not list((tmp_path / "r1").rglob("*.tmp"))


def test_kinds_cover_the_documented_set():
    assert set(KINDS) == {
        "assignment", "own_start", "own_end", "commit", "consume", "produce",
        "rebalance_start", "rebalance_end", "zk_op", "churn",
    }  # fmt: skip


def test_concurrent_emitters_lose_nothing(tmp_path):
    w = TraceWriter(tmp_path / "r", meta(), flush_rows=100)

    def work(n):
        for i in range(500):
            w.emit(i, EventKind.CONSUME, member=f"m{n}", topic="t", partition=n, offset=i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close(ended_ms=1)
    rows = read_events(tmp_path / "r").to_pylist()
    assert len(rows) == 2000
    assert sorted((r["partition"], r["offset"]) for r in rows) == [
        (n, i) for n in range(4) for i in range(500)
    ]


def test_writer_rejects_bad_rows_and_reuse(tmp_path):
    w = TraceWriter(tmp_path / "r", meta())
    with pytest.raises(TraceError, match="topic and partition must both be set"):
        w.emit(1, EventKind.OWN_START, member="m", topic="t")
    with pytest.raises(TraceError, match="kind must be an EventKind"):
        w.emit(1, "consume")  # type: ignore[arg-type]
    w.emit(1, EventKind.CHURN, member="m", detail={"event": "crash"})
    w.close(ended_ms=5)
    with pytest.raises(TraceError, match="trace is closed"):
        w.emit(2, EventKind.CHURN)
    with pytest.raises(TraceError, match="already holds a trace"):
        TraceWriter(tmp_path / "r", meta())


def test_exception_inside_context_keeps_rows_but_not_complete(tmp_path):
    with pytest.raises(RuntimeError), TraceWriter(tmp_path / "r", meta()) as w:
        w.emit(1, EventKind.CHURN)
        raise RuntimeError("runner died")
    assert read_meta(tmp_path / "r").complete is False
    assert len(read_events(tmp_path / "r")) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{\n  "run_id": ', "run.json:2: not valid JSON"),
        ("[]", "expected a JSON object"),
        (
            json.dumps({**meta().to_json(), "schema_version": 9}),
            "schema_version 9 is not supported (expected 1)",
        ),
        (
            json.dumps({**meta().to_json(), "started_ms": "soon"}),
            "field 'started_ms' must be int, got 'soon'",
        ),
        (
            json.dumps({**meta().to_json(), "ended_ms": 5}),
            "field 'ended_ms' must be null or an integer >= started_ms",
        ),
    ],
)
def test_bad_metadata_is_named(tmp_path, content, message):
    (tmp_path / "run.json").write_text(content)
    with pytest.raises(TraceError) as info:
        read_meta(tmp_path)
    assert message in str(info.value)
    assert str(tmp_path / "run.json") in str(info.value)


def test_foreign_parquet_part_is_rejected(tmp_path):
    w = TraceWriter(tmp_path / "r", meta())
    w.close(ended_ms=1)
    import pyarrow as pa

    pq.write_table(pa.table({"x": [1]}), tmp_path / "r" / "events" / "part-00009.parquet")
    with pytest.raises(TraceError, match=r"part-00009\.parquet: schema does not match"):
        read_events(tmp_path / "r")


def test_find_runs_recurses_and_names_empty_paths(tmp_path):
    for rid in ("b", "a"):
        TraceWriter(tmp_path / "x" / rid, meta(rid)).close(ended_ms=1)
    assert find_runs([tmp_path / "x", tmp_path / "x" / "a"]) == [
        (tmp_path / "x" / n).resolve() for n in ("a", "b")
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="holds no trace run"):
        find_runs([tmp_path / "empty"])
    with pytest.raises(TraceError, match="no such file or directory"):
        find_runs([tmp_path / "nope"])


def test_stopping_ms_round_trips_and_is_bounded(tmp_path):
    w = TraceWriter(tmp_path / "r", meta())
    w.emit(1500, EventKind.CHURN)
    with pytest.raises(TraceError, match=r"stopping_ms 999 must lie within \[started_ms, ended_ms\]"):
        w.close(ended_ms=2000, stopping_ms=999)
    w.close(ended_ms=2000)  # a rejected close leaves the writer open
    assert read_meta(tmp_path / "r").complete is True
    w2 = TraceWriter(tmp_path / "r2", meta("r2"))
    w2.close(ended_ms=2000, stopping_ms=1800)
    assert read_meta(tmp_path / "r2").stopping_ms == 1800
    (tmp_path / "r2" / "run.json").write_text(
        json.dumps({**read_meta(tmp_path / "r2").to_json(), "stopping_ms": 5})
    )
    with pytest.raises(TraceError, match="field 'stopping_ms' must be null or an integer >= started_ms"):
        read_meta(tmp_path / "r2")
