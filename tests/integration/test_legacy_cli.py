"""`zkcoord legacy ...` in-process against real ZooKeeper: list, describe (Kafka 0.10.2 layout), export and
import round trips, refusal of malformed input before any write, and delete of inactive groups only."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from zkcoord.cli import legacy as legacy_cli
from zkcoord.cli import main
from zkcoord.legacy.codecs import ConsumerRegistration, PartitionState, SubscriptionPattern
from zkcoord.zk import group_admin, registry

pytestmark = pytest.mark.integration

TS = 1428512949385


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def seed_group(zk: Any) -> None:
    registry.write_topic(zk, "t1", {0: [1], 1: [1], 2: [1]})
    registry.write_topic(zk, "t2", {0: [1]})
    zk.create(
        "/consumers/g1/ids/g1_c1",
        ConsumerRegistration.static({"t1": 2}, timestamp_ms=TS).encode(),
        makepath=True,
    )
    zk.create("/consumers/g1/ids/g1_idle", ConsumerRegistration.static({"t2": 1}, timestamp_ms=TS).encode())
    zk.create("/consumers/g1/owners/t1/0", b"g1_c1-0", makepath=True, ephemeral=True)
    zk.create("/consumers/g1/owners/t1/1", b"g1_c1-1", ephemeral=True)
    zk.create("/consumers/g1/offsets/t1/0", b"5", makepath=True)
    zk.create("/consumers/g1/offsets/t1/2", b"-1", makepath=True)
    zk.create("/consumers/g2/offsets/t2/0", b"9", makepath=True)


def test_list(zk: Any, zk_connect: str, capsys: Any) -> None:
    seed_group(zk)
    assert run(capsys, "legacy", "list", "--zk", zk_connect) == (0, "g1\ng2\n", "")


def test_describe_with_log_end_offsets(zk: Any, zk_connect: str, capsys: Any, monkeypatch: Any) -> None:
    seed_group(zk)
    seen: list[Any] = []

    def fake_ends(client: Any, tps: Any, timeout_ms: int) -> dict[tuple[str, int], int]:
        seen.append(list(tps))
        return {("t1", 0): 12, ("t1", 1): 3}

    monkeypatch.setattr(legacy_cli, "log_end_offsets", fake_ends)
    code, out, err = run(capsys, "legacy", "describe", "--zk", zk_connect, "--group", "g1")
    assert code == 0
    assert err == legacy_cli.ZOOKEEPER_NOTE + "\n\n"
    assert seen == [[("t1", 0), ("t1", 1), ("t1", 2)]]
    fmt = legacy_cli.ROW_FORMAT
    assert out.splitlines() == [
        "Error: Could not fetch offset from zookeeper for group 'g1' partition '[t1,1]' due to missing offset "
        "data in zookeeper.",
        "",
        fmt % ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"),
        fmt % ("t1", "0", "5", "12", "7", "g1_c1"),
        fmt % ("t1", "1", "-", "3", "-", "g1_c1"),
        fmt % ("t1", "2", "-1", "-", "-", "-"),
        fmt % ("t2", "-", "-", "-", "-", "g1_idle"),
    ]


def test_describe_wildcard_member_and_unreachable_broker(zk: Any, zk_connect: str, capsys: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    registry.register_broker(zk, 1, "127.0.0.1", dead_port, timestamp_ms=TS)
    registry.write_topic(zk, "logs-a", {0: [1]})
    registry.write_partition_state(
        zk, "logs-a", 0, PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
    )
    reg = ConsumerRegistration.wildcard("logs-.*", 1, pattern=SubscriptionPattern.WHITE_LIST, timestamp_ms=TS)
    zk.create("/consumers/w/ids/w_a", reg.encode(), makepath=True)
    zk.create("/consumers/w/ids/w_b", reg.encode())
    zk.create("/consumers/w/owners/logs-a/0", b"w_a-0", makepath=True)
    zk.create("/consumers/w/offsets/logs-a/0", b"4", makepath=True)
    code, out, _ = run(
        capsys, "legacy", "describe", "--zk", zk_connect, "--group", "w", "--timeout-ms", "300"
    )
    assert code == 0
    fmt = legacy_cli.ROW_FORMAT
    assert out.splitlines()[2:] == [
        fmt % ("logs-a", "0", "4", "-", "-", "w_a"),
        fmt % ("logs-a", "-", "-", "-", "-", "w_b"),
    ]


def test_describe_missing_group(zk: Any, zk_connect: str, capsys: Any) -> None:
    code, out, _ = run(capsys, "legacy", "describe", "--zk", zk_connect, "--group", "nope")
    assert code == 1
    assert out == "Error: The consumer group 'nope' does not exist.\n"


def test_export_import_round_trip(zk: Any, zk_connect: str, capsys: Any, tmp_path: Path) -> None:
    seed_group(zk)
    code, out, _ = run(capsys, "legacy", "export", "--zk", zk_connect)
    assert code == 0
    assert (
        out == "/consumers/g1/offsets/t1/0:5\n/consumers/g1/offsets/t1/2:-1\n/consumers/g2/offsets/t2/0:9\n"
    )
    code, jl, _ = run(capsys, "legacy", "export", "--zk", zk_connect, "--group", "g2", "--format", "jsonl")
    assert [json.loads(line) for line in jl.splitlines()] == [
        {"group": "g2", "topic": "t2", "partition": 0, "offset": 9}
    ]

    # import into a fresh tree under another chroot path of the same server
    dump = tmp_path / "offsets.txt"
    dump.write_text(out + "/consumers/g3/offsets/new-topic/7:100\n/consumers/g1/offsets/t1/0:6\n")
    target = zk_connect + "/copy"
    zk.ensure_path("/copy")
    code, msg, _ = run(capsys, "legacy", "import", "--zk", target, "--input", str(dump))
    assert (code, msg) == (0, "imported 4 offsets\n")
    assert zk.get("/copy/consumers/g1/offsets/t1/0")[0] == b"6"  # later duplicate wins
    assert zk.get("/copy/consumers/g3/offsets/new-topic/7")[0] == b"100"
    # importing again updates in place
    jdump = tmp_path / "o.jsonl"
    jdump.write_text(json.dumps({"group": "g3", "topic": "new-topic", "partition": 7, "offset": 101}) + "\n")
    assert run(capsys, "legacy", "import", "--zk", target, "--input", str(jdump), "--format", "jsonl")[0] == 0
    assert zk.get("/copy/consumers/g3/offsets/new-topic/7")[0] == b"101"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("/consumers/g/offsets/t/0:12\n/consumers/g/offsets/t/1:x\n", "line 2: offset 'x' is not a decimal"),
        (
            "/consumers/g/offsets/t/0:1\n/consumers/g/owners/t/0:1\n",
            "line 2: '/consumers/g/owners/t/0' is not",
        ),
        ("/consumers/g/offsets/t/0:1\n\n/consumers/g/offsets/t/1:1\n", "content after the empty line 2"),
        ("/consumers/g/offsets/t t/0:1\n", "invalid topic"),
        ("/consumers/g/offsets/t/01:1\n", "decimal partition id"),
        ("no colon here\n", "expected <znode path>:<offset>"),
        ("/consumers/g/offsets/t/0:99999999999999999999\n", "64-bit"),
    ],
)
def test_import_refuses_malformed_files_before_writing(
    zk: Any, zk_connect: str, capsys: Any, tmp_path: Path, text: str, reason: str
) -> None:
    f = tmp_path / "bad.txt"
    f.write_text(text)
    code, _, err = run(capsys, "legacy", "import", "--zk", zk_connect, "--input", str(f))
    assert code == 2
    assert reason in err
    assert zk.exists("/consumers") is None


def test_delete(zk: Any, zk_connect: str, capsys: Any) -> None:
    seed_group(zk)
    code, out, _ = run(capsys, "legacy", "delete", "--zk", zk_connect, "--group", "g1")
    assert (code, out) == (1, "Error: Delete for group 'g1' failed because its consumers are still active.\n")
    assert zk.exists("/consumers/g1/offsets/t1/0") is not None
    code, out, _ = run(capsys, "legacy", "delete", "--zk", zk_connect, "--group", "nope", "--topic", "t")
    assert out == "Error: Delete for group 'nope' topic 't' failed because group does not exist.\n"
    # g2 has no members
    zk.create("/consumers/g2/offsets/t9/0", b"1", makepath=True)
    code, out, _ = run(capsys, "legacy", "delete", "--zk", zk_connect, "--group", "g2", "--topic", "t9")
    assert (code, out) == (0, "Deleted consumer group information for group 'g2' topic 't9' in zookeeper.\n")
    assert (
        zk.exists("/consumers/g2/offsets/t9") is None and zk.exists("/consumers/g2/offsets/t2/0") is not None
    )
    code, out, _ = run(capsys, "legacy", "delete", "--zk", zk_connect, "--group", "g2")
    assert (code, out) == (0, "Deleted all consumer group information for group 'g2' in zookeeper.\n")
    assert zk.exists("/consumers/g2") is None
    # --topic alone: every inactive group holding the topic
    zk.create("/consumers/g4/offsets/t1/0", b"1", makepath=True)
    zk.create("/consumers/g4/offsets/t2/0", b"1", makepath=True)
    code, out, _ = run(capsys, "legacy", "delete", "--zk", zk_connect, "--topic", "t1")
    assert (
        out
        == "Deleted consumer group information for all inactive consumer groups for topic 't1' in zookeeper.\n"
    )
    assert (
        zk.exists("/consumers/g4/offsets/t1") is None and zk.exists("/consumers/g4/offsets/t2/0") is not None
    )
    assert zk.exists("/consumers/g1/offsets/t1/0") is not None  # active group untouched


def test_delete_transaction_fails_if_a_member_registers(zk: Any, monkeypatch: Any) -> None:
    zk.create("/consumers/g/offsets/t/0", b"1", makepath=True)
    zk.create("/consumers/g/ids", b"")
    real = group_admin.delete_ops

    def racing(client: Any, path: str) -> list[str]:
        found = real(client, path)
        if path == "/consumers/g" and client.exists("/consumers/g/ids/late") is None:
            client.create("/consumers/g/ids/late", b"{}", ephemeral=True)  # a member joins after the check
        return found

    monkeypatch.setattr(group_admin, "delete_ops", racing)
    code, message = group_admin.delete_group(zk, "g", None)
    assert code == 1 and "still active" in message
    assert zk.exists("/consumers/g/offsets/t/0") is not None


def test_malformed_znode_is_reported_by_path(zk: Any, zk_connect: str, capsys: Any) -> None:
    zk.create("/consumers/g/offsets/t/0", b"abc", makepath=True)
    code, _, err = run(capsys, "legacy", "export", "--zk", zk_connect)
    assert code == 2
    assert "/consumers/g/offsets/t/0" in err and "not a decimal integer" in err
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"abc"


def test_consume_subcommand_is_registered() -> None:
    from zkcoord.cli import build_parser

    args = build_parser().parse_args(["legacy", "list", "--zk", "127.0.0.1:1"])
    assert args.func is legacy_cli.cmd_list
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["legacy", "consume", "--help"])
    assert info.value.code == 0


def test_describe_lag_from_a_real_wire_server(zk: Any, zk_connect: str, capsys: Any, tmp_path: Path) -> None:
    """End to end: a zkcoord node registers itself and its topic in this chroot; describe asks it for the log
    end offset with kafka-python and prints the lag."""
    import asyncio
    import threading

    from kafka import KafkaProducer

    from zkcoord.server.app import Node
    from zkcoord.server.broker import ServerConfig

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    node = Node(ServerConfig(port=0, data_dir=tmp_path / "data", num_partitions=1), zk_connect=zk_connect)
    try:
        asyncio.run_coroutine_threadsafe(node.start(), loop).result(30)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{node.server_config.port}")
        try:
            for _ in range(7):
                producer.send("lagt", b"x", partition=0).get(10)
        finally:
            producer.close()
        zk.create("/consumers/g/owners/lagt/0", b"g_c1-0", makepath=True)
        zk.create("/consumers/g/offsets/lagt/0", b"3", makepath=True)
        code, out, _ = run(capsys, "legacy", "describe", "--zk", zk_connect, "--group", "g")
    finally:
        asyncio.run_coroutine_threadsafe(node.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    assert code == 0
    assert out.splitlines()[-1] == legacy_cli.ROW_FORMAT % ("lagt", "0", "3", "7", "4", "g_c1")
