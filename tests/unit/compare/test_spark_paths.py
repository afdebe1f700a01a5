"""Job paths as the executors see them: local paths become absolute file:// URIs (spaces kept as they are, as
Hadoop reads them), URIs pass through, and the driver-side filesystem of each form is the right one."""

from __future__ import annotations

from pathlib import Path

from migration.spark import filesystem, has_scheme, is_local_master, job_uri


def test_local_paths_become_absolute_file_uris(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert job_uri("out dir/x") == f"file://{tmp_path}/out dir/x"
    assert job_uri(tmp_path / "a") == f"file://{tmp_path}/a"
    for uri in ("hdfs://nn:8020/t", "s3a://bucket/t", "file:///x/y", "gs://b/p"):
        assert job_uri(uri) == uri


def test_scheme_detection_and_local_masters() -> None:
    assert has_scheme("s3a://b/k") and has_scheme("file:///x") and not has_scheme("/tmp/a://b")
    assert not has_scheme("relative/dir")
    assert is_local_master(None) and is_local_master("local[2]") and is_local_master("local")
    assert not is_local_master("spark://127.0.0.1:7077") and not is_local_master("sc://h:15002")


def test_driver_side_filesystem_writes_where_the_executors_do(tmp_path: Path) -> None:
    target = tmp_path / "with space"
    target.mkdir()
    fs, inner = filesystem(job_uri(target))
    with fs.open_output_stream(f"{inner}/summary.md") as fh:
        fh.write(b"ok")
    assert (target / "summary.md").read_bytes() == b"ok"
