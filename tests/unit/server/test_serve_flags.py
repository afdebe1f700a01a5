"""`zkcoord serve` cluster flags: refused without --zk, validated before anything starts, passed to ClusterConfig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkcoord.cli import main
from zkcoord.cli import serve as serve_cli
from zkcoord.server.log import TopicConfig


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `zkcoord serve` would have served (`seen["node"]`), its serving replaced by a stand-in."""
    found: dict[str, Any] = {}

    async def fake_serve(node: Any, *_: Any) -> int:
        found["node"] = node
        return 0

    monkeypatch.setattr(serve_cli, "_serve", fake_serve)
    return found


def test_cluster_flags_without_zk_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["serve", "--data-dir", str(tmp_path), "--zookeeper.session.timeout.ms", "3000"])
    assert rc == 2
    assert "--zookeeper.session.timeout.ms only apply with --zk" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was started or written


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--offsets.compact.after.batches", "1", "offsets.compact.after.batches must be >= 2, got 1"),
        ("--zookeeper.session.timeout.ms", "999", "zookeeper.session.timeout.ms must be >= 1000, got 999"),
    ],
)
def test_cluster_flags_are_validated_before_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    rc = main(["serve", "--data-dir", str(tmp_path), "--zk", "127.0.0.1:1", flag, value])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_cluster_flags_reach_the_node(tmp_path: Path, seen: dict[str, Any]) -> None:
    argv = ["serve", "--data-dir", str(tmp_path), "--zk", "127.0.0.1:1", "--offsets.compact.after.batches",
            "7", "--zookeeper.session.timeout.ms", "4000"]  # fmt: skip
    assert main(argv) == 0
    assert seen["node"].cluster_overrides == {
        "zookeeper_session_timeout_ms": 4000,
        "offsets_compact_after_batches": 7,
    }


def test_limit_flags_reach_the_node_and_are_validated(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--data-dir", str(tmp_path), "--max.connections", "7", "--connections.max.idle.ms", "5000",
            "--max.partitions.per.topic", "12", "--message.max.bytes", "2048", "--group.max.size", "3"]  # fmt: skip
    assert main(argv) == 0
    cfg = seen["node"].server_config
    assert (cfg.connection_limits.max_connections, cfg.connection_limits.connections_max_idle_ms) == (7, 5000)
    assert cfg.connection_limits.max_connections_per_ip == 2**31 - 1  # Kafka's default where not given
    assert (cfg.log_limits.max_partitions_per_topic, cfg.append_rules.message_max_bytes) == (12, 2048)
    assert seen["node"].group_config.group_max_size == 3
    assert main(["serve", "--data-dir", str(tmp_path), "--max.connections", "0"]) == 2
    assert "max.connections must be >= 1, got 0" in capsys.readouterr().err


def test_records_fsync_flags_reach_the_config_and_are_refused_where_meaningless(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["serve", "--data-dir", str(tmp_path)]
    assert main(base) == 0
    cfg = seen["node"].server_config
    assert (cfg.group_records_fsync, cfg.group_records_fsync_interval_ms) == ("always", 1000)
    assert main([*base, "--group.records.fsync", "interval", "--group.records.fsync.interval.ms", "250"]) == 0
    cfg = seen["node"].server_config
    assert (cfg.group_records_fsync, cfg.group_records_fsync_interval_ms) == ("interval", 250)
    for argv, message in (
        (["--group.records.fsync.interval.ms", "250"], "needs --group.records.fsync interval"),
        (
            ["--group.records.fsync", "interval", "--group.records.fsync.interval.ms", "0"],
            "must be >= 1, got 0",
        ),
        (["--group.records.fsync", "never", "--zk", "127.0.0.1:1"], "applies to a standalone node"),
    ):
        seen.clear()
        assert main([*base, *argv]) == 2, argv
        assert message in capsys.readouterr().err
        assert not seen


def test_sasl_server_max_receive_size_flag_has_kafkas_name_and_default(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--data-dir", str(tmp_path)]) == 0
    assert seen["node"].server_config.connection_limits.sasl_server_max_receive_size == 524288
    assert main(["serve", "--data-dir", str(tmp_path), "--sasl.server.max.receive.size", "4096"]) == 0
    assert seen["node"].server_config.connection_limits.sasl_server_max_receive_size == 4096
    assert main(["serve", "--data-dir", str(tmp_path), "--sasl.server.max.receive.size", "0"]) == 2
    assert "sasl.server.max.receive.size must be >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "--sasl.server.max.receive.size N" in capsys.readouterr().out


def test_records_compaction_flags_reach_the_config_and_are_refused_where_meaningless(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["serve", "--data-dir", str(tmp_path)]
    assert main(base) == 0
    cfg = seen["node"].server_config
    assert (cfg.group_records_compact_min_bytes, cfg.group_records_delete_retention_ms) == (
        4 * 1024 * 1024,
        86_400_000,
    )
    assert (
        main([*base, "--group.records.compact.min.bytes", "0", "--log.cleaner.delete.retention.ms", "60000"])
        == 0
    )
    cfg = seen["node"].server_config
    assert (cfg.group_records_compact_min_bytes, cfg.group_records_delete_retention_ms) == (0, 60_000)
    for argv, message in (
        (["--group.records.compact.min.bytes", "-1"], "group.records.compact.min.bytes must be >= 0, got -1"),
        (["--log.cleaner.delete.retention.ms", "-5"], "log.cleaner.delete.retention.ms must be >= 0, got -5"),
        (["--group.records.compact.min.bytes", "1", "--zk", "127.0.0.1:1"], "applies to a standalone node"),
    ):
        seen.clear()
        assert main([*base, *argv]) == 2, argv
        assert message in capsys.readouterr().err
        assert not seen


def test_log_retention_and_flush_flags_reach_the_config(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["serve", "--data-dir", str(tmp_path)]
    assert main(base) == 0
    defaults = seen["node"].server_config.topic_defaults
    assert (defaults.retention_ms, defaults.retention_bytes) == (7 * 24 * 3600 * 1000, -1)
    flags = ["--log.retention.ms", "60000", "--log.retention.bytes", "1048576", "--log.segment.bytes", "4096",
             "--log.flush.interval.messages", "10", "--log.flush.interval.ms", "500",
             "--log.retention.check.interval.ms", "1000", "--delete.topic.enable", "false"]  # fmt: skip
    assert main([*base, *flags]) == 0
    cfg = seen["node"].server_config
    assert cfg.topic_defaults == TopicConfig(60000, 1048576, 4096, 10, 500)
    assert (cfg.log_retention_check_interval_ms, cfg.delete_topic_enable) == (1000, False)
    seen.clear()
    assert main([*base, "--log.retention.ms", "-2"]) == 2
    assert "retention.ms must be >= -1, got -2" in capsys.readouterr().err
    assert not seen


def test_consumer_protocol_flags_reach_the_group_config_and_are_validated(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--data-dir", str(tmp_path), "--group.consumer.session.timeout.ms", "3000",
            "--group.consumer.heartbeat.interval.ms", "250", "--group.consumer.assignors", "range, uniform",
            "--group.consumer.max.size", "9", "--group.consumer.regex.refresh.interval.ms", "500"]  # fmt: skip
    assert main(argv) == 0
    g = seen["node"].group_config
    assert (g.group_consumer_session_timeout_ms, g.group_consumer_heartbeat_interval_ms) == (3000, 250)
    assert (g.group_consumer_assignors, g.group_consumer_max_size) == (("range", "uniform"), 9)
    assert g.group_consumer_regex_refresh_interval_ms == 500
    assert main(["serve", "--data-dir", str(tmp_path), "--group.consumer.assignors", "sticky"]) == 2
    assert (
        "group.consumer.assignors must be distinct names among uniform, range, got sticky"
        in capsys.readouterr().err
    )
    assert (
        main(["serve", "--data-dir", str(tmp_path), "--group.consumer.heartbeat.interval.ms", "45000"]) == 2
    )
    assert "below group.consumer.session.timeout.ms" in capsys.readouterr().err


def test_migration_policy_flag_reaches_the_group_config_and_is_validated(
    tmp_path: Path, seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--data-dir", str(tmp_path)]) == 0
    assert seen["node"].group_config.group_consumer_migration_policy == "bidirectional"  # Kafka's default
    assert main(["serve", "--data-dir", str(tmp_path), "--group.consumer.migration.policy", "upgrade"]) == 0
    g = seen["node"].group_config
    assert (g.upgrade_enabled, g.downgrade_enabled) == (True, False)
    with pytest.raises(SystemExit):
        main(["serve", "--data-dir", str(tmp_path), "--group.consumer.migration.policy", "sideways"])
    assert "invalid choice: 'sideways'" in capsys.readouterr().err
