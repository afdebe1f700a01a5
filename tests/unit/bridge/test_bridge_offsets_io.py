"""Offset files: the ExportZkOffsets line format exactly, JSON lines, Parquet; validation with precise
line numbers before anything is written; batched, journaled, resumable import."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migration.offsets_io import (
    ImportFailed,
    JournalMismatch,
    OffsetFileError,
    OffsetRecord,
    import_offsets,
    plan_batches,
    read_offsets_file,
    write_offsets_file,
)

RECORDS = [
    OffsetRecord("group1", "topic1", 0, 286894308),
    OffsetRecord("group1", "topic1", 1, 0),
    OffsetRecord("g:colon", "t", 10, 5),
]


def test_zk_format_is_exportzkoffsets_lines(tmp_path: Path) -> None:
    path = tmp_path / "offsets.txt"
    assert write_offsets_file(RECORDS, path) == 3
    assert path.read_text() == (
        "/consumers/g:colon/offsets/t/10:5\n"
        "/consumers/group1/offsets/topic1/0:286894308\n"
        "/consumers/group1/offsets/topic1/1:0\n"
    )
    assert read_offsets_file(path) == sorted(RECORDS)


@pytest.mark.parametrize("name", ["o.txt", "o.jsonl", "o.parquet"])
def test_every_format_round_trips(tmp_path: Path, name: str) -> None:
    write_offsets_file(RECORDS, tmp_path / name)
    assert read_offsets_file(tmp_path / name) == sorted(RECORDS)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("/consumers/g/offsets/t/0:1\nnonsense\n", 2, "expected '<znode path>:<offset>'"),
        ("/consumers/g/owners/t/0:1\n", 1, "is not an offsets path"),
        ("/consumers/g/offsets/t/x:1\n", 1, "is not an offsets path"),
        ("/consumers/g/offsets/t/0:-1\n", 1, "offset '-1' is not a non-negative decimal integer"),
        ("/consumers/g/offsets/t/0:12abc\n", 1, "is not a non-negative decimal integer"),
        ("/consumers/g/offsets/t/0:1\n\n/consumers/g/offsets/t/1:1\n", 2, "empty line before the end"),
        (
            "/consumers/g/offsets/t/0:1\n/consumers/g/offsets/t/0:2\n",
            2,
            "given twice with different offsets (1 on line 1",
        ),
        ("/consumers/g/offsets/t/0:99999999999999999999\n", 1, "is not a non-negative decimal"),
    ],
)
def test_bad_zk_lines_are_named_precisely(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(OffsetFileError) as info:
        read_offsets_file(path)
    assert info.value.line == line
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_trailing_blank_lines_and_exact_duplicates_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.txt"
    path.write_text("/consumers/g/offsets/t/0:1\n/consumers/g/offsets/t/0:1\n\n\n")
    assert read_offsets_file(path) == [OffsetRecord("g", "t", 0, 1)]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('{"group":"g","topic":"t","partition":0,"offset":1}\n{"group":"g"\n', 2, "not JSON"),
        ('{"group":"g","topic":"t","offset":1}\n', 1, "missing field(s) partition"),
        ('{"group":"g","topic":"t","partition":0,"offset":"1"}\n', 1, "offset must be an int"),
        (
            '{"group":"g","topic":"t","partition":-1,"offset":1}\n',
            1,
            "invalid partition -1: must be in 0..2147483647",
        ),
        (
            '{"group":"a/b","topic":"t","partition":0,"offset":1}\n',
            1,
            "invalid group 'a/b': must not contain '/'",
        ),
        (
            '{"group":"g","topic":"t t","partition":0,"offset":1}\n',
            1,
            "invalid topic 't t': illegal characters",
        ),
        ("[1]\n", 1, "expected a JSON object"),
    ],
)
def test_bad_json_lines(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(OffsetFileError) as info:
        read_offsets_file(path)
    assert info.value.line == line and reason in info.value.reason


def test_bad_parquet_names_the_row(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"group": ["g", "g"], "topic": ["t", "t"], "partition": [0, 1], "offset": [5, -3]}),
        tmp_path / "b.parquet",
    )
    with pytest.raises(OffsetFileError, match=r"b.parquet:2: offset must be an int in \[0, 2\^63\), not -3"):
        read_offsets_file(tmp_path / "b.parquet")
    pq.write_table(pa.table({"group": ["g"]}), tmp_path / "c.parquet")
    with pytest.raises(OffsetFileError, match="missing column"):
        read_offsets_file(tmp_path / "c.parquet")


# Legal znode names (zkcoord.legacy.paths refuses '.' and '..' as a path element).
names = st.text("abcxyz-._", min_size=1, max_size=6).filter(lambda n: n not in (".", ".."))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.builds(OffsetRecord, names, names, st.integers(0, 999), st.integers(0, 2**63 - 1)), max_size=20
    )
)
def test_zk_format_round_trips_any_valid_records(
    tmp_path_factory: pytest.TempPathFactory, records: list[OffsetRecord]
) -> None:
    unique = {(r.group, r.topic, r.partition): r for r in records}
    path = tmp_path_factory.mktemp("rt") / "o.txt"
    write_offsets_file(unique.values(), path)
    assert read_offsets_file(path) == sorted(unique.values())


@given(
    st.lists(
        st.builds(OffsetRecord, st.sampled_from("abc"), names, st.integers(0, 50), st.integers(0, 9)),
        max_size=40,
    ),
    st.integers(1, 7),
)
def test_batches_cover_everything_once_and_never_mix_groups(records: list[OffsetRecord], size: int) -> None:
    batches = plan_batches(records, size)
    assert [r for b in batches for r in b] == sorted(records)
    assert all(1 <= len(b) <= size and len({r.group for r in b}) == 1 for b in batches)


class MemoryTarget:
    name = "zookeeper"

    def __init__(self, fail_on_call: int | None = None, never_regress: bool = False) -> None:
        self.data: dict[tuple[str, str, int], int] = {}
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.never_regress = never_regress

    def write(self, group: str, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], str]:
        self.calls += 1
        if self.calls == self.fail_on_call:
            return {next(iter(offsets)): "ConnectionLoss"}
        for (topic, partition), offset in offsets.items():
            self.data[(group, topic, partition)] = offset
        return {}


def test_interrupted_import_resumes_from_the_journal(tmp_path: Path) -> None:
    records = [OffsetRecord(g, "t", p, p * 10) for g in ("a", "b") for p in range(10)]
    journal = tmp_path / "state" / "import.journal"
    first = MemoryTarget(fail_on_call=3)
    with pytest.raises(
        ImportFailed, match=r"batch 3/6 \(group a, 2 offsets\) failed .* re-run the same import to resume"
    ):
        import_offsets(records, first, journal, batch_size=4)
    assert len(first.data) == 8  # two batches written before the failure
    second = MemoryTarget()
    report = import_offsets(records, second, journal, batch_size=4)
    assert report.resumed_batches == 2 and report.written_batches == 4
    assert len(second.data) == 12 and ("a", "t", 0) not in second.data  # first batches not rewritten
    assert {**first.data, **second.data} == {(r.group, r.topic, r.partition): r.offset for r in records}
    again = import_offsets(records, MemoryTarget(), journal, batch_size=4)
    assert again.written_batches == 0 and again.resumed_batches == 6


def test_journal_for_another_input_is_refused(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    import_offsets([OffsetRecord("g", "t", 0, 1)], MemoryTarget(), journal)
    with pytest.raises(JournalMismatch, match="digest"):
        import_offsets([OffsetRecord("g", "t", 0, 2)], MemoryTarget(), journal)
    with pytest.raises(JournalMismatch, match="never_regress"):
        import_offsets([OffsetRecord("g", "t", 0, 1)], MemoryTarget(never_regress=True), journal)


def test_torn_last_journal_line_is_ignored(tmp_path: Path) -> None:
    records = [OffsetRecord("g", "t", p, 1) for p in range(4)]
    journal = tmp_path / "j"
    target = MemoryTarget(fail_on_call=2)
    with pytest.raises(ImportFailed):
        import_offsets(records, target, journal, batch_size=2)
    with open(journal, "a") as out:
        out.write('{"kind": "batch", "ind')
    report = import_offsets(records, MemoryTarget(), journal, batch_size=2)
    assert report.resumed_batches == 1 and report.written_batches == 1
    assert journal.read_text().endswith('"kind": "done", "written_batches": 1}\n')
    assert import_offsets(records, MemoryTarget(), journal, batch_size=2).resumed_batches == 2
