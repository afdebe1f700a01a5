"""The bridge against a real `zkcoord serve` node (Kafka wire protocol via kafka-python) and real ZooKeeper:
the broker store, the dual committer over both real stores, and the whole `zkcoord migrate` CLI path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zkcoord.bridge import CommitOrder, DualCommitter, Store, TopicPartition
from zkcoord.bridge.broker_store import BrokerOffsetStore
from zkcoord.bridge.zk_side import ZooKeeperSide
from zkcoord.cli import main
from zkcoord.local.node import NodeProcess
from zkcoord.zk.offset_store import ZooKeeperOffsetStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """The broker, holding the topic `t` (2 partitions) the tests commit offsets of: a broker takes commits only
    for partitions it has."""
    from kafka.admin import KafkaAdminClient, NewTopic

    server = NodeProcess(tmp_path_factory.mktemp("serve"))
    server.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            admin.create_topics([NewTopic("t", 2, 1)])
        finally:
            admin.close()
        yield server
    finally:
        server.stop()


@pytest.fixture
def broker(node: NodeProcess, request: pytest.FixtureRequest) -> Iterator[BrokerOffsetStore]:
    store = BrokerOffsetStore(
        node.bootstrap, f"g-{request.node.name[:40]}", request_timeout_ms=5000, bootstrap_timeout_ms=5000
    )
    try:
        yield store
    finally:
        store.close()


def test_broker_store_round_trip(broker: BrokerOffsetStore) -> None:
    reply = broker.write_offsets({TopicPartition("t", 0): 5, TopicPartition("t", 1): 7})
    assert all(err is None for _, err in reply.errors) and len(reply.errors) == 2
    assert dict(broker.read_offsets().offsets) == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 7}
    assert dict(broker.read_offsets([("t", 1), ("t", 9)]).offsets) == {TopicPartition("t", 1): 7}
    assert broker.describe()["members"] == []
    assert broker.group in broker.list_groups()


def test_unreachable_broker_is_an_error_on_every_partition() -> None:
    from zkcoord.testing import free_port

    store = BrokerOffsetStore(
        f"127.0.0.1:{free_port()}", "g", request_timeout_ms=1000, bootstrap_timeout_ms=1000
    )
    try:
        reply = store.write_offsets({("t", 0): 1})
        assert [(tp, err.store if err else None) for tp, err in reply.errors] == [
            (TopicPartition("t", 0), Store.BROKER)
        ]
        assert store.read_offsets().request_error is not None
    finally:
        store.close()


def test_dual_committer_over_real_zookeeper_and_real_broker(zk: Any, broker: BrokerOffsetStore) -> None:
    committer = DualCommitter(ZooKeeperSide.for_group(zk, broker.group), broker, CommitOrder.BROKER_FIRST)
    result = committer.commit({("t", 0): 11, ("t", 1): 12})
    assert result.committed, result.describe()
    assert zk.get(f"/consumers/{broker.group}/offsets/t/0")[0] == b"11"
    zk.set(f"/consumers/{broker.group}/offsets/t/1", b"40")  # a ZooKeeper-only member moved on
    fetched = committer.fetch([("t", 0), ("t", 1)])
    assert fetched.complete and fetched.offsets() == {("t", 0): 11, ("t", 1): 40}
    assert [p.source for p in fetched.partitions] == [Store.ZOOKEEPER, Store.ZOOKEEPER]


def test_dual_commit_of_a_partition_the_broker_lacks_writes_neither_store(
    zk: Any, broker: BrokerOffsetStore
) -> None:
    """Broker first: the broker answers UNKNOWN_TOPIC_OR_PARTITION for `t-5` and `gone-0`, so their ZooKeeper
    writes are skipped, and the result says so; `t-0` goes to both."""
    committer = DualCommitter(ZooKeeperSide.for_group(zk, broker.group), broker, CommitOrder.BROKER_FIRST)
    result = committer.commit({("t", 0): 3, ("t", 5): 4, ("gone", 0): 5})
    assert not result.committed
    assert sorted((o.tp, o.store.value, o.status) for o in result.outcomes if o.status != "written") == [
        (TopicPartition("gone", 0), "broker", "failed"),
        (TopicPartition("gone", 0), "zookeeper", "skipped"),
        (TopicPartition("t", 5), "broker", "failed"),
        (TopicPartition("t", 5), "zookeeper", "skipped"),
    ]
    assert {o.error.error for o in result.outcomes if o.status == "failed" and o.error} == {
        "UNKNOWN_TOPIC_OR_PARTITION"
    }
    offsets = f"/consumers/{broker.group}/offsets"
    assert zk.get(f"{offsets}/t/0")[0] == b"3"
    assert zk.get_children(f"{offsets}/t") == ["0"] and zk.exists(f"{offsets}/gone") is None
    assert dict(broker.read_offsets().offsets) == {TopicPartition("t", 0): 3}


def test_migrate_cli_end_to_end(
    zk: Any, zk_connect: str, node: NodeProcess, tmp_path: Path, capsys: Any
) -> None:
    ZooKeeperOffsetStore(zk, "orders").write({("t", 0): 100, ("t", 1): 200})
    base = ["migrate"]
    common = [
        "--zk",
        zk_connect,
        "--bootstrap",
        node.bootstrap,
        "--group",
        "orders",
        "--state-dir",
        str(tmp_path / "s"),
    ]
    assert main([*base, "verify", *common]) == 2
    assert "`migrate verify` needs one of: dual-commit, verified" in capsys.readouterr().err
    assert main([*base, "plan", *common]) == 0
    out = capsys.readouterr().out
    assert (
        "copy 2 of 2 ZooKeeper offsets to the broker" in out
        and "legacy members (/consumers/orders/ids): none" in out
    )
    assert main([*base, "dual-commit", *common]) == 0
    store = BrokerOffsetStore(node.bootstrap, "orders", request_timeout_ms=5000, bootstrap_timeout_ms=5000)
    try:
        assert dict(store.read_offsets().offsets) == {
            TopicPartition("t", 0): 100,
            TopicPartition("t", 1): 200,
        }
        store.write_offsets({("t", 1): 230})  # a dual-committing member got to the broker first
        assert main([*base, "verify", *common, "--max-lag", "10"]) == 1
        assert "t-1: broker=230 ahead of zookeeper=200 by 30" in capsys.readouterr().err
        assert main([*base, "verify", *common, "--max-lag", "30"]) == 0
        assert main([*base, "finalize", *common, "--max-lag", "30"]) == 0
        assert main([*base, "status", *common]) == 0
        assert "state finalized" in capsys.readouterr().out
        assert main([*base, "rollback", *common]) == 0
        assert ZooKeeperOffsetStore(zk, "orders").read().offsets == {("t", 0): 100, ("t", 1): 230}
    finally:
        store.close()
    journal = (tmp_path / "s" / "orders.journal.jsonl").read_text().splitlines()
    assert json.loads(journal[-1])["step"] == "rollback"

    export = tmp_path / "orders.txt"
    assert main([*base, "export", "--zk", zk_connect, "--group", "orders", "--out", str(export)]) == 0
    assert export.read_text() == "/consumers/orders/offsets/t/0:100\n/consumers/orders/offsets/t/1:230\n"
    export.write_text("/consumers/copy/offsets/t/0:5\n")
    assert (
        main(
            [
                *base,
                "import",
                "--zk",
                zk_connect,
                "--bootstrap",
                node.bootstrap,
                "--in",
                str(export),
                "--target",
                "broker",
            ]
        )
        == 0
    )
    copy = BrokerOffsetStore(node.bootstrap, "copy", request_timeout_ms=5000, bootstrap_timeout_ms=5000)
    try:
        assert dict(copy.read_offsets().offsets) == {TopicPartition("t", 0): 5}
    finally:
        copy.close()
    export.write_text("/consumers/copy/offsets/t/0:5\nbroken\n")
    assert main([*base, "import", "--zk", zk_connect, "--in", str(export)]) == 2
    assert f"{export}:2: expected '<znode path>:<offset>'" in capsys.readouterr().err
