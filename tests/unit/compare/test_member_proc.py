"""The member process's recorder and tracing wrappers, without any client: what rows they write and when."""

from __future__ import annotations

import io
import json
from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import pytest

from migration.compare.member_proc import (
    Recorder,
    describe_zk_request,
    trace_commits,
    trace_zk_requests,
)
from zkcoord.legacy.rebalance import TopicPartition

GetData = namedtuple("GetData", "path watcher")
Transaction = namedtuple("Transaction", "operations")
SetData = namedtuple("SetData", "path data version")


def rows(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_rebalance_rows_and_ownership():
    buf = io.StringIO()
    rec = Recorder(buf, "m0")
    rec.install([("t", 1), ("t", 0)], incremental=False)
    rec.rebalance_start("release")
    rec.release([("t", 0)])
    rec.install([("t", 1), ("t", 2)], incremental=False)
    kinds = [(r["kind"], r["partition"], r["generation"]) for r in rows(buf)]
    assert kinds == [
        ("rebalance_start", None, 1), ("own_start", 0, 1), ("own_start", 1, 1), ("assignment", 0, 1),
        ("assignment", 1, 1), ("rebalance_end", None, 1),
        ("rebalance_start", None, 2), ("own_end", 0, 2), ("own_start", 2, 2), ("assignment", 1, 2),
        ("assignment", 2, 2), ("rebalance_end", None, 2),
    ]  # fmt: skip
    assert rec.owned == {("t", 1), ("t", 2)}


def test_shutdown_ends_ownership_first_and_ignores_callbacks_from_close():
    buf = io.StringIO()
    rec = Recorder(buf, "m0")
    rec.install([("t", 0), ("t", 1)], incremental=False)
    n = len(rows(buf))
    rec.shutdown()
    # What a client's close() may call back with: a revoke (confluent), even a fresh assignment.
    rec.rebalance_start("revoke")
    rec.release([("t", 0)])
    rec.install([("t", 0)], incremental=False)
    after = [(r["kind"], r["partition"]) for r in rows(buf)[n:]]
    assert after == [("own_end", 0), ("own_end", 1)]
    assert rec.owned == set()


def test_zk_requests_are_described_by_op_and_path():
    assert describe_zk_request(GetData("/c/g/ids", None)) == {"op": "GetData", "path": "/c/g/ids"}
    multi = Transaction([SetData("/c/g/offsets/t/0", b"5", 1), SetData("/c/g/offsets/t/1", b"6", 1)])
    assert describe_zk_request(multi) == {"op": "Transaction", "path": "/c/g/offsets/t/0", "ops": 2}
    assert describe_zk_request(Transaction([])) == {"op": "Transaction", "path": None, "ops": 0}


def test_trace_zk_requests_records_then_sends_every_request():
    sent: list[Any] = []

    class FakeClient:
        def _call(self, request: Any, async_object: Any) -> bool:
            sent.append((request, async_object))
            return True

    buf = io.StringIO()
    client = FakeClient()
    trace_zk_requests(client, Recorder(buf, "m1"))
    assert client._call(GetData("/a", None), "async") is True
    assert sent == [(GetData("/a", None), "async")]
    (row,) = rows(buf)
    assert (row["kind"], row["member"], json.loads(json.dumps(row["detail"]))) == (
        "zk_op", "m1", {"op": "GetData", "path": "/a"},
    )  # fmt: skip


def test_trace_commits_records_what_reached_zookeeper():
    @dataclass
    class Outcome:
        zk_written: dict[TopicPartition, tuple[int, int]]

    class FakeStorage:
        def commit(self, *args: Any) -> Outcome:
            return Outcome({TopicPartition("t", 3): (42, 7), TopicPartition("t", 1): (10, 2)})

    buf = io.StringIO()
    storage = FakeStorage()
    trace_commits(storage, Recorder(buf, "m2"))
    assert storage.commit({}, {}, {}, lambda: None).zk_written[TopicPartition("t", 3)] == (42, 7)
    assert [(r["kind"], r["partition"], r["offset"], r["detail"]) for r in rows(buf)] == [
        ("commit", 1, 10, {"how": "zookeeper"}), ("commit", 3, 42, {"how": "zookeeper"}),
    ]  # fmt: skip


def test_a_fenced_legacy_member_ends_its_ownership_at_once():
    from migration.compare.member_proc import fence_on

    buf = io.StringIO()
    rec = Recorder(buf, "m3")
    rec.install([("t", 0), ("t", 1)], incremental=False)
    n = len(rows(buf))
    fence_on("CONNECTED", rec)
    assert rec.owned == {("t", 0), ("t", 1)}
    fence_on("SUSPENDED", rec)
    fence_on("LOST", rec)  # nothing left to end
    after = [(r["kind"], r["partition"], r["detail"]) for r in rows(buf)[n:]]
    assert after == [
        ("own_end", 0, {"reason": "connection suspended"}), ("own_end", 1, {"reason": "connection suspended"}),
    ]  # fmt: skip
    # The rebalance that follows the reconnect: nothing to release, the new share is owned again.
    rec.rebalance_start("release")
    rec.release([("t", 0), ("t", 1)])
    rec.install([("t", 1)], incremental=False)
    assert [r["kind"] for r in rows(buf)[n + 2 :]] == [
        "rebalance_start", "own_start", "assignment", "rebalance_end",
    ]  # fmt: skip


# --- one librdkafka member shape, the group protocol a parameter; cooperative variants -----------------------


def _confluent_args(strategy: str) -> Any:
    from migration.compare.member_proc import parse_args

    return parse_args(["--protocol", "classic-confluent", "--group", "g", "--member", "m0", "--topics", "t",
                       "--bootstrap", "127.0.0.1:9092", "--trace-file", "/dev/null", "--strategy", strategy])  # fmt: skip


def test_confluent_config_differs_by_group_protocol_only_where_the_protocol_does() -> None:
    from migration.compare.member_proc import confluent_config

    classic = confluent_config(_confluent_args("cooperative-sticky"), "classic")
    consumer = confluent_config(_confluent_args("uniform"), "consumer")
    assert classic["partition.assignment.strategy"] == "cooperative-sticky"
    assert classic["session.timeout.ms"] == 6000 and "group.protocol" not in classic
    assert consumer["group.protocol"] == "consumer" and consumer["group.remote.assignor"] == "uniform"
    assert "session.timeout.ms" not in consumer and "partition.assignment.strategy" not in consumer
    shared = {k for k in classic if k in consumer and classic[k] == consumer[k]}
    assert {"group.id", "client.id", "enable.auto.commit", "topic.metadata.refresh.interval.ms"} <= shared


def test_confluent_config_refuses_a_strategy_its_protocol_lacks() -> None:
    from migration.compare.member_proc import confluent_config

    with pytest.raises(SystemExit, match="no eager 'sticky'"):
        confluent_config(_confluent_args("sticky"), "classic")
    with pytest.raises(SystemExit, match="no 'range-ish' server assignor"):
        confluent_config(_confluent_args("range-ish"), "consumer")


def test_every_scenario_protocol_has_a_member() -> None:
    from migration.compare.member_proc import RUNNERS
    from migration.compare.scenario import PROTOCOLS

    assert set(RUNNERS) == set(PROTOCOLS)
