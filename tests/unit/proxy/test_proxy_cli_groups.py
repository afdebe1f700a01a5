"""`zkcoord proxy`'s consumer-protocol (KIP-848) timing flags: carried into the coordinator's GroupConfig, and a
combination the coordinator cannot use refused at start (exit 2) before anything is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcoord.cli import build_parser, main
from zkcoord.cli.proxy import config_from, proxy_listener
from zkcoord.proxy.upstream import PLAINTEXT


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["proxy", "--zk", "127.0.0.1:1", "--listen", "127.0.0.1:1", "--node-id", "9",
            "--data-dir", str(tmp_path / "d"), "--bridge-zk-groups", "g.*", *extra]  # fmt: skip


def test_the_consumer_group_flags_reach_the_group_config(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        _args(
            tmp_path,
            "--group.consumer.heartbeat.interval.ms",
            "250",
            "--group.consumer.session.timeout.ms",
            "6000",
        )
    )
    listener = proxy_listener(args)
    try:
        config = config_from(args, listener, PLAINTEXT)
    finally:
        listener.close()
    assert (config.group_config.group_consumer_heartbeat_interval_ms, config.group_config.group_consumer_session_timeout_ms) == (250, 6000)  # fmt: skip
    plain = build_parser().parse_args(_args(tmp_path))
    listener = proxy_listener(plain)
    try:
        defaults = config_from(plain, listener, PLAINTEXT).group_config
    finally:
        listener.close()
    assert (defaults.group_consumer_heartbeat_interval_ms, defaults.group_consumer_session_timeout_ms) == (
        5000,
        45000,
    )


def test_a_heartbeat_interval_not_below_the_session_timeout_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_args(tmp_path, "--group.consumer.heartbeat.interval.ms", "6000",
                      "--group.consumer.session.timeout.ms", "6000"))  # fmt: skip
    assert code == 2
    assert "group.consumer.heartbeat.interval.ms" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
