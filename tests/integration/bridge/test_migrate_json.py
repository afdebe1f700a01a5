"""The `--json` outputs against real ZooKeeper and a real `zkcoord serve --zk` node, validated with their published
JSON Schemas (zkcoord/cli/describe_json.SCHEMA, migration/workflow/json_schema): `legacy describe` (both offset
stores, the log end offset and lag per partition, live with `--watch`) and `migrate plan|verify|status`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from kafka import KafkaProducer

from migration.workflow import json_schema
from zkcoord.bridge.broker_store import BrokerOffsetStore
from zkcoord.cli import build_parser, describe_json, legacy, main
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.testing import wait_for

pytestmark = pytest.mark.integration
TOPIC = "jt"


@pytest.fixture(scope="module")
def node(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, str]]:
    """One chroot and one plain (unbridged) node: the coordinator's offsets are its own."""
    from zkcoord.zk.session import ensure_chroot

    connect = ensure_chroot(zk_server.hosts, "/zkcoord-tests/migrate-json")
    proc = NodeProcess(
        tmp_path_factory.mktemp("json-node"), ("--zk", connect, "--node-id", "1", "--num.partitions=2",
                                               *FAST_GROUP_FLAGS),
    )  # fmt: skip
    proc.start()
    producer = KafkaProducer(bootstrap_servers=proc.bootstrap)
    try:
        for p, n in ((0, 7), (1, 5)):
            for _ in range(n):
                producer.send(TOPIC, b"x", partition=p).get(10)
    finally:
        producer.close(5)
    try:
        yield proc, connect
    finally:
        proc.stop()


@pytest.fixture
def zk_group(node: tuple[NodeProcess, str], request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    """A legacy group (its own per test: the node keeps committed offsets): one registered member owning both
    partitions, offsets 3 and 4 in ZooKeeper."""
    from zkcoord.zk.session import connect

    group = f"jg-{request.node.name[5:13]}"
    # The group's coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it has loaded the group's offsets
    # partition: the test starts once it answers.
    probe = BrokerOffsetStore(node[0].bootstrap, group, request_timeout_ms=3000)
    try:
        wait_for(
            lambda: probe.read_offsets(None).request_error is None,
            60,
            "the coordinator to answer",
            interval=0.1,
        )
    finally:
        probe.close()
    client = connect(node[1])
    reg = {"version": 1, "subscription": {TOPIC: 1}, "pattern": "static", "timestamp": "1"}
    client.create(f"/consumers/{group}/ids/{group}_h-1", json.dumps(reg).encode(), makepath=True)
    for p, off in ((0, 3), (1, 4)):
        client.create(f"/consumers/{group}/owners/{TOPIC}/{p}", f"{group}_h-1-0".encode(), makepath=True)
        client.create(f"/consumers/{group}/offsets/{TOPIC}/{p}", str(off).encode(), makepath=True)
    try:
        yield client, group
    finally:
        client.delete(f"/consumers/{group}", recursive=True)
        client.stop()
        client.close()


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_describe_shows_both_stores_log_end_and_lag(
    node: tuple[NodeProcess, str],
    zk_group: tuple[Any, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    proc, connect = node
    client, group = zk_group
    base = ["legacy", "describe", "--zk", connect, "--group", group]
    code, view = run_json(capsys, *base, "--bootstrap", proc.bootstrap, "--json")
    assert code == 0
    jsonschema.validate(view, describe_json.SCHEMA)
    rows = {p["partition"]: p for p in view["partitions"]}
    assert view["coordinator"] == {"bootstrap": proc.bootstrap, "offsets": "coordinator", "error": None}
    # Nothing committed to the coordinator yet: its column is empty, ZooKeeper's lags behind the log end.
    assert [(r["zookeeper_offset"], r["coordinator_offset"], r["log_end_offset"], r["zookeeper_lag"])
            for r in (rows[0], rows[1])] == [(3, None, 7, 4), (4, None, 5, 1)]  # fmt: skip
    assert rows[0]["owner"] == {"consumer_id": f"{group}_h-1", "client_id": None, "thread": f"{group}_h-1-0"}
    assert view["members"] == [
        {"consumer_id": f"{group}_h-1", "client_id": None, "protocol": "legacy", "topics": [TOPIC]}
    ]

    # The coordinator's own offsets once dual-commit seeded them; ZooKeeper moves on alone (a legacy member).
    state = str(tmp_path / "state")
    steps = ["--zk", connect, "--bootstrap", proc.bootstrap, "--group", group, "--state-dir", state]
    assert main(["migrate", "plan", *steps]) == 0 and main(["migrate", "dual-commit", *steps]) == 0
    capsys.readouterr()
    client.set(f"/consumers/{group}/offsets/{TOPIC}/0", b"6")
    args = build_parser().parse_args([*base, "--bootstrap", proc.bootstrap, "--json", "--watch", "0.05"])
    assert (
        describe_json.run(
            args, group, connect=legacy._client, end_offsets=legacy.log_end_offsets, views=range(2)
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2  # --watch: one document per line
    for line in lines:
        view = json.loads(line)
        jsonschema.validate(view, describe_json.SCHEMA)
        row = view["partitions"][0]
        assert (row["zookeeper_offset"], row["coordinator_offset"], row["zookeeper_lag"], row["coordinator_lag"]) == (
            6, 3, 1, 4,
        )  # fmt: skip

    # The text table carries the same columns.
    assert main([*base, "--bootstrap", proc.bootstrap]) == 0
    out = capsys.readouterr().out
    assert describe_json.ROW % (TOPIC, 0, 6, 3, 7, 1, 4, f"{group}_h-1") in out.splitlines()


def test_migrate_plan_verify_status_json(
    node: tuple[NodeProcess, str],
    zk_group: tuple[Any, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    proc, connect = node
    client, group = zk_group
    steps = [
        "--zk",
        connect,
        "--bootstrap",
        proc.bootstrap,
        "--group",
        group,
        "--state-dir",
        str(tmp_path / "s"),
    ]

    code, doc = run_json(
        capsys, "migrate", "verify", *steps, "--json"
    )  # refused: the group was never planned
    assert code == 2
    jsonschema.validate(doc, json_schema.document("verify"))
    assert (
        doc["groups"][0]["exit"] == 2 and "needs one of: dual-commit, verified" in doc["groups"][0]["error"]
    )

    code, doc = run_json(capsys, "migrate", "plan", *steps, "--json")
    assert code == 0
    jsonschema.validate(doc, json_schema.document("plan"))
    plan = doc["groups"][0]
    assert plan["state"] == "planned" and plan["plan"]["offsets"] == {
        "zookeeper": 2,
        "broker": 0,
        "to_seed": 2,
    }
    assert plan["plan"]["broker_offsets"] == "coordinator"
    assert plan["next"][0]["command"].startswith(f"zkcoord migrate dual-commit --zk {connect}")

    assert main(["migrate", "dual-commit", *steps]) == 0
    capsys.readouterr()
    code, doc = run_json(capsys, "migrate", "verify", *steps, "--json")
    assert code == 0
    jsonschema.validate(doc, json_schema.document("verify"))
    assert doc["groups"][0]["verify"]["ok"] is True and doc["groups"][0]["verify"]["partitions"] == 2

    client.set(f"/consumers/{group}/offsets/{TOPIC}/1", b"5")  # a ZooKeeper-only member moved on
    code, doc = run_json(capsys, "migrate", "verify", *steps, "--json")
    assert code == 1
    jsonschema.validate(doc, json_schema.document("verify"))
    [bad] = doc["groups"][0]["verify"]["disagreements"]
    assert (bad["partition"], bad["zookeeper"], bad["broker"], bad["agreement"]) == (
        1,
        5,
        4,
        "zookeeper-ahead",
    )

    code, doc = run_json(capsys, "migrate", "status", *steps, "--json")
    assert code == 0
    jsonschema.validate(doc, json_schema.document("status"))
    status = doc["groups"][0]
    assert status["state"] == "dual-commit" and status["status"]["marker"]["step"] == "verify"
    assert (
        status["status"]["journal"][-1]["event"] == "failed"
        and "zookeeper" in status["status"]["journal"][-1]["reason"]
    )
    assert status["membership"]["members"][0]["owns"] == [f"{TOPIC}-0", f"{TOPIC}-1"]


def test_the_watched_view_as_prometheus_gauges(
    node: tuple[NodeProcess, str], zk_group: tuple[Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`legacy describe --watch S --metrics-listen`: the gauges are the last view read (scraped between rounds)."""
    import re
    import urllib.request

    from zkcoord.local.zookeeper import free_port

    proc, connect = node
    client, group = zk_group
    port = free_port()
    args = build_parser().parse_args(
        ["legacy", "describe", "--zk", connect, "--group", group, "--bootstrap", proc.bootstrap, "--watch", "0.05",
         "--metrics-listen", f"127.0.0.1:{port}"]
    )  # fmt: skip
    scraped: list[str] = []

    def rounds() -> Iterator[int]:
        yield 0
        client.set(f"/consumers/{group}/offsets/{TOPIC}/0", b"5")  # read by the second round
        yield 1
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            scraped.append(page.read().decode())

    assert describe_json.run(args, group, connect=legacy._client, end_offsets=legacy.log_end_offsets,
                             views=rounds()) == 0  # fmt: skip
    assert f"metrics on http://127.0.0.1:{port}/metrics" in capsys.readouterr().err
    series = {
        (name, dict(re.findall(r'(\w+)="([^"]*)"', labels)).get("partition"),
         dict(re.findall(r'(\w+)="([^"]*)"', labels)).get("store")): float(value)
        for name, labels, value in re.findall(r"^(zkcoord_group_\w+)\{([^}]*)\} (\S+)$", scraped[0], re.M)
    }  # fmt: skip
    assert series == {
        ("zkcoord_group_committed_offset", "0", "zookeeper"): 5.0,
        ("zkcoord_group_committed_offset", "1", "zookeeper"): 4.0,
        ("zkcoord_group_log_end_offset", "0", None): 7.0,
        ("zkcoord_group_log_end_offset", "1", None): 5.0,
        ("zkcoord_group_lag", "0", "zookeeper"): 2.0,
        ("zkcoord_group_lag", "1", "zookeeper"): 1.0,
    }  # nothing committed to the coordinator: no coordinator series
    with pytest.raises(Exception, match="add --watch"):
        describe_json.run(
            build_parser().parse_args(["legacy", "describe", "--zk", connect, "--group", group,
                                       "--metrics-listen", "127.0.0.1:0"]),
            group, connect=legacy._client, end_offsets=legacy.log_end_offsets,
        )  # fmt: skip
