"""`zkcoord compare` sub-commands that need no Spark: validate, simulate, run."""

from __future__ import annotations

import csv

from zkcoord.cli import main


def test_validate_builtin(capsys):
    assert main(["compare", "validate", "demo"]) == 0
    out = capsys.readouterr().out
    assert "scenario 'demo' is valid" in out
    assert "classic-kafka-python: 3 members, range" in out


def test_validate_bad_file_names_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nduration_s: ten\ntopics: [{name: t, partitions: 1}]\nproducer: {rate_per_s: 1, duration_s: 1}\n"
        "protocols: {legacy-fast: {members: 1, strategy: range}}\n"
    )
    assert main(["compare", "validate", str(bad)]) == 2
    assert (
        f"{bad}:2: duration_s: expected a number in (0.0, 86400.0], got str 'ten'" in capsys.readouterr().err
    )


def test_simulate_sweep_writes_csv_deterministically(tmp_path, capsys):
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for p in paths:
        args = [
            "compare",
            "simulate",
            "--group-sizes",
            "3,4",
            "--churn",
            "1",
            "--rebalances",
            "5",
            "--topics",
            "1",
        ]
        assert main([*args, "--partitions", "6", "--seed", "9", "--no-progress", "--csv", str(p)]) == 0
    assert paths[0].read_text() == paths[1].read_text()
    rows = list(csv.DictReader(paths[0].open()))
    assert len(rows) == 2 * 6  # two cases x six assignors
    assert "classic/cooperative-sticky" in capsys.readouterr().out


def test_simulate_scenario_and_bad_arguments(tmp_path, capsys):
    assert main(["compare", "simulate", "demo", "--csv", str(tmp_path / "s.csv")]) == 0
    assert len(list(csv.DictReader((tmp_path / "s.csv").open()))) == 12  # 3 protocols x 4 rebalances
    assert main(["compare", "simulate", "--group-sizes", "3,x", "--no-progress"]) == 2
    assert "--group-sizes: expected a comma-separated list of integers" in capsys.readouterr().err
    assert main(["compare", "simulate", "--families", "kraft", "--no-progress"]) == 2


def test_run_refuses_a_bad_run_count(capsys):
    assert main(["compare", "run", "demo", "--runs", "0"]) == 2
    assert "--runs must be at least 1" in capsys.readouterr().err


def test_a_given_node_needs_its_zookeeper(capsys):
    assert main(["compare", "run", "demo", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "--bootstrap needs --zk" in capsys.readouterr().err
    assert main(["demo", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "--bootstrap needs --zk" in capsys.readouterr().err


def test_churn_commands_hide_client_connection_warnings_unless_verbose() -> None:
    import argparse
    import logging

    from zkcoord.cli.logs import quiet_client_logs

    loggers = [logging.getLogger(n) for n in ("kafka", "kazoo")]
    saved = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.NOTSET)
        quiet_client_logs(argparse.Namespace(verbose=1))
        assert [lg.level for lg in loggers] == [logging.NOTSET, logging.NOTSET]
        quiet_client_logs(argparse.Namespace(verbose=0))
        assert [lg.level for lg in loggers] == [logging.CRITICAL, logging.CRITICAL]
    finally:
        for lg, level in zip(loggers, saved, strict=True):
            lg.setLevel(level)
