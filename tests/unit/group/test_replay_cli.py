"""`zkcoord replay DIR` rebuilds groups and offsets from a log without modifying it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zkcoord.cli import main
from zkcoord.records.offsets import encode_record
from zkcoord.storage import FileRecordStore
from zkcoord.storage.file_store import frame

from .driver import Driver


def write_log(directory: Path) -> tuple[str, str]:
    d = Driver()
    a, b = d.stable_group(2)
    d.commit({("t", 1): 99}, generation=1, member_id=a, metadata="hi")
    d.commit({("s", 0): 3}, group="simple")
    with FileRecordStore(directory) as store:
        store.append([encode_record(r) for r in d.records])
    return a, b


def test_replay_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_log(tmp_path)
    seg = FileRecordStore(tmp_path).segments()[0]
    with open(seg, "ab") as f:
        f.write(frame(b"torn", b"tail")[:7])
    size = seg.stat().st_size
    assert main(["replay", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seg.stat().st_size == size  # read-only: the torn tail is reported, not truncated
    assert out["torn_tail_bytes"] == 7
    g, simple = out["groups"]
    assert (g["group"], g["state"], g["generation"], g["protocol"], g["leader"]) == (
        "g",
        "Stable",
        1,
        "range",
        a,
    )
    assert [m["member_id"] for m in g["members"]] == [a, b]
    assert g["offsets"] == [
        {
            "topic": "t",
            "partition": 1,
            "offset": 99,
            "leader_epoch": -1,
            "metadata": "hi",
            "commit_timestamp": 1_000_000,
            "expire_timestamp": -1,
        }
    ]
    assert (simple["state"], simple["protocol_type"], simple["offsets"][0]["offset"]) == ("Empty", None, 3)


def test_replay_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = write_log(tmp_path)
    assert main(["replay", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert f"group g: Stable generation=1 protocol=consumer/range leader={a}" in text
    assert "offset t-1 = 99" in text


def test_replay_missing_directory_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_replay_refuses_a_damaged_log_with_the_report_serve_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from zkcoord.storage import CorruptLog

    write_log(tmp_path)
    seg = FileRecordStore(tmp_path).segments()[0]
    data = bytearray(seg.read_bytes())
    data[20] ^= 0x04  # inside the first record: every other record follows it
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptLog) as refused:
        FileRecordStore(tmp_path)  # what a node's start does
    assert main(["replay", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(refused.value) in err and f"{seg} at byte 0: CRC mismatch" in err
    assert seg.read_bytes() == bytes(data)  # read-only

    assert main(["replay", str(tmp_path), "--repair", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "repair: " in captured.err and f"{seg.name}.damaged-0-" in captured.err
    assert [g["group"] for g in out["groups"]] == ["g", "simple"]
    assert main(["replay", str(tmp_path), "--repair"]) == 0  # idempotent: nothing left to cut
    assert "no damage found, nothing changed" in capsys.readouterr().out


def test_replay_shows_consumer_protocol_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from .consumer_world import T1, World

    w = World()
    w.hb("a", 0)
    w.hb("b", 0)
    w.hb("a", 1, {T1: {0, 1, 2, 3}})  # a must give two partitions up: pending revocation
    with FileRecordStore(tmp_path) as store:
        store.append([encode_record(r) for r in w.records])
    assert main(["replay", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["groups"] == []
    (g,) = out["consumer_groups"]
    assert (g["group"], g["state"], g["group_epoch"], g["assignment_epoch"]) == ("g", "Reconciling", 2, 2)
    a, b = g["members"]
    assert (a["member_id"], a["member_epoch"], a["state"]) == ("a", 1, "UNREVOKED_PARTITIONS")
    assert sorted(a["assigned"]["t1"] + a["pending_revocation"]["t1"]) == [0, 1, 2, 3]
    assert (b["member_id"], b["state"], b["assigned"]) == ("b", "UNRELEASED_PARTITIONS", {})
    assert main(["replay", str(tmp_path)]) == 0
    assert "consumer group g: Reconciling group_epoch=2" in capsys.readouterr().out
