"""`--config FILE` on serve, legacy consume and migrate: properties named like the flags become defaults that
command-line flags override; an unknown name, a bad value or a malformed line is refused, naming it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from zkcoord.cli import build_parser, legacy_consume, main
from zkcoord.cli import serve as serve_cli
from zkcoord.cli.options import apply_config


def parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    apply_config(parser, argv)
    return parser.parse_args(argv)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_serve(node: Any, *rest: Any) -> int:
        seen["node"], seen["rest"] = node, rest
        return 0

    monkeypatch.setattr(serve_cli, "_serve", fake_serve)
    return seen


def test_serve_reads_flags_from_a_properties_file(tmp_path: Path, served: dict[str, Any]) -> None:
    conf = tmp_path / "node.properties"
    conf.write_text(
        f"# a node\ndata-dir={tmp_path / 'data'}\nlisten = 127.0.0.1:19092\n! java-style comment\n"
        "num.partitions=3\ngroup.max.size=7\nauto.create.topics.enable=false\nmetrics-listen=127.0.0.1:0\n"
    )
    assert main(["serve", "--config", str(conf), "--num.partitions", "5"]) == 0
    node = served["node"]
    assert node.server_config.data_dir == tmp_path / "data"  # a required flag, given by the file
    assert (node.server_config.host, node.server_config.port) == ("127.0.0.1", 19092)
    assert node.server_config.num_partitions == 5  # the command line wins over the file
    assert node.server_config.auto_create_topics_enable is False
    assert node.group_config.group_max_size == 7
    assert served["rest"][-1] == ("127.0.0.1", 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("data-dir=/x\nnum.partitons=3\n", "unknown name(s): num.partitons (line 2)"),
        ("data-dir=/x\nnum.partitions=three\n", ":2: num.partitions: invalid int value"),
        ("data-dir=/x\nauto.create.topics.enable=maybe\n", "'maybe' is not one of true, false"),
        ("data-dir /x\n", ":1: expected name=value"),
    ],
)
def test_serve_refuses_a_bad_file_by_name(
    tmp_path: Path, served: dict[str, Any], capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text(text)
    assert main(["serve", "--config", str(conf)]) == 2
    assert message in capsys.readouterr().err
    assert "node" not in served


def test_legacy_consume_takes_flags_and_consumer_properties(tmp_path: Path) -> None:
    conf = tmp_path / "consumer.properties"
    conf.write_text("zk=127.0.0.1:2181/kafka\ngroup=orders\nauto.commit.interval.ms=250\nstreams=2\n")
    args = parse(["legacy", "consume", "--config", str(conf), "--topic", "t"])
    assert (args.zk, args.group, args.streams) == ("127.0.0.1:2181/kafka", "orders", 2)
    config = legacy_consume.build_config(args)
    assert config.auto_commit_interval_ms == 250 and config.group_id == "orders"


def test_legacy_consume_refuses_an_unknown_property_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "consumer.properties"
    conf.write_text("zk=127.0.0.1:1\ngroup=g\nauto.comit.interval.ms=250\n")
    assert main(["legacy", "consume", "--config", str(conf), "--topic", "t"]) == 2
    assert "auto.comit.interval.ms" in capsys.readouterr().err


def test_migrate_steps_read_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "migrate.properties"
    conf.write_text(
        "zk=127.0.0.1:2181\nbootstrap=127.0.0.1:9092\ngroup=a,b\nmax-lag=5\nrequest-timeout-ms=2000\n"
    )
    args = parse(["migrate", "verify", "--config", str(conf)])
    assert (args.zk, args.bootstrap, args.group, args.max_lag, args.request_timeout_ms) == (
        "127.0.0.1:2181", "127.0.0.1:9092", ["a", "b"], 5, 2000,
    )  # fmt: skip

    bad = tmp_path / "bad.properties"
    bad.write_text("zk=127.0.0.1:2181\nmax-lag=5\n")
    with pytest.raises(Exception, match="unknown name"):
        parse(["migrate", "plan", "--config", str(bad)])  # plan has no --max-lag
