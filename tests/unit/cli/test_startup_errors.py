"""The obvious first mistakes give one precise line and exit status 2, no traceback: a ZooKeeper connect string
nothing answers at, a port already taken (`zk start`, `serve`)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkcoord.cli import main
from zkcoord.local.zookeeper import free_port


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something listens on."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def test_a_zookeeper_that_does_not_answer_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    zk = f"127.0.0.1:{free_port()}"  # nothing listens: kazoo retries until --zk-timeout
    assert main(["legacy", "list", "--zk", zk, "--zk-timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        f"zkcoord: error: cannot connect to ZooKeeper at {zk}: no answer within 1 s (connection time-out); check the connect string"
        in err
    )
    assert "Traceback" not in err


def test_zk_start_on_a_port_in_use_says_so_before_starting_anything(
    taken_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a server already there answered the readiness check, "ZooKeeper ready" was printed, then
    # "node(s) [1] exited; see their logs" with the logs in a removed temporary directory.
    assert main(["zk", "start", "--port", str(taken_port)]) == 2
    captured = capsys.readouterr()
    assert f"zkcoord: error: port {taken_port} is in use (Address already in use)" in captured.err
    assert "ready" not in captured.out


def test_serve_on_a_port_in_use_says_so(
    taken_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--listen", f"127.0.0.1:{taken_port}", "--data-dir", str(tmp_path / "n")]) == 2
    err = capsys.readouterr().err
    assert f"('127.0.0.1', {taken_port}): address already in use: another process listens there" in err


def test_a_reader_that_goes_away_is_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`zkcoord ... | head`: head exits, the next write fails with EPIPE (a real pipe whose read end is closed)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    with open(
        write_end, "w", buffering=1
    ) as stdout:  # line-buffered, as a terminal; a pipe fills the same way
        monkeypatch.setattr(sys, "stdout", stdout)
        assert main(["replay", str(tmp_path)]) == 1  # before: BrokenPipeError raised out of main
