"""`--command-config` on the commands that play against a given node (`compare run`, `demo`): refused without
--bootstrap, and a bad file refused naming the key, both before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcoord.cli import main

COMMANDS = (["compare", "run", "demo"], ["demo"])


@pytest.mark.parametrize("command", COMMANDS, ids=["compare-run", "demo"])
def test_refused_without_bootstrap(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\n")
    out = tmp_path / "out"
    assert main([*command, "--out", str(out), "--command-config", str(props), "--no-progress"]) == 2
    assert "--command-config is for a given node: it needs --bootstrap" in capsys.readouterr().err
    assert not out.exists()  # nothing played


@pytest.mark.parametrize("command", COMMANDS, ids=["compare-run", "demo"])
def test_a_bad_file_is_refused_naming_the_key(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanisms.typo=PLAIN\n")
    out = tmp_path / "out"
    argv = [*command, "--out", str(out), "--zk", "127.0.0.1:1", "--bootstrap", "127.0.0.1:1",
            "--command-config", str(props), "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    assert "sasl.mechanisms.typo" in capsys.readouterr().err
    assert not out.exists()
