"""A damaged byte in the middle of a standalone node's group-records: `serve` refuses to start and names the
damage, `zkcoord replay` exits non-zero with the same report, `--repair` cuts out only the damaged record, and the
restarted node answers every other acknowledged commit (real `zkcoord serve`, kafka-python commits and fetches)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.conftest import FAST_GROUP_FLAGS, ServerProcess
from zkcoord.local.node import NodeUnavailable
from zkcoord.records.offsets import OffsetCommitKey, decode_record
from zkcoord.storage.file_store import scan_segment, segment_files

pytestmark = pytest.mark.e2e

GROUPS = [f"g{i}" for i in range(8)]
TOPIC = "t"


def commit_all(node: ServerProcess) -> dict[tuple[str, int], int]:
    """TOPIC created with 3 partitions (a commit to a partition the node lacks is refused, as Kafka refuses it),
    then each group commits partitions 0..2 of it once (simple-consumer commits); returns what was acknowledged."""
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 1)])
    finally:
        admin.close()
    acked = {}
    for n, group in enumerate(GROUPS):
        consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            offsets = {TopicPartition(TOPIC, p): OffsetAndMetadata(100 * n + p, "", -1) for p in range(3)}
            consumer.commit(offsets)
        finally:
            consumer.close()
        acked.update({(group, tp.partition): om.offset for tp, om in offsets.items()})
    return acked


def fetch_all(node: ServerProcess) -> dict[tuple[str, int], int | None]:
    """OffsetFetch of every group's partitions (None: nothing committed)."""
    out: dict[tuple[str, int], int | None] = {}
    for group in GROUPS:
        consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            out.update({(group, p): consumer.committed(TopicPartition(TOPIC, p)) for p in range(3)})
        finally:
            consumer.close()
    return out


def replay(directory: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkcoord", "replay", str(directory), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_flipped_byte_mid_log_is_refused_reported_and_repaired(tmp_path: Path) -> None:
    node = ServerProcess(tmp_path / "data", FAST_GROUP_FLAGS)
    node.start()
    try:
        acked = commit_all(node)
    finally:
        node.stop()
    records_dir = tmp_path / "data" / "group-records"
    (segment,) = segment_files(records_dir)
    data = bytearray(segment.read_bytes())
    scanned = scan_segment(bytes(data))
    # The offset record of g3's partition 1: records of later groups follow it.
    index = next(
        i
        for i, (k, v) in enumerate(scanned.records)
        if decode_record(k, v)[0] == OffsetCommitKey("g3", TOPIC, 1)
    )
    start = scanned.ends[index - 1] if index else 0
    end = scanned.ends[index]
    data[(start + end) // 2] ^= 0x10
    segment.write_bytes(bytes(data))
    after = len(scanned.records) - index - 1

    with pytest.raises(NodeUnavailable) as refused:
        node.start()
    report = f"{segment} at byte {start}: CRC mismatch; {end - start} damaged bytes"
    assert report in str(refused.value)
    assert f"followed by {after} valid records" in str(refused.value)
    assert segment.read_bytes() == bytes(data), "a refused start changed the log"

    read_only = replay(records_dir)
    assert read_only.returncode == 2
    assert report in read_only.stderr and f"followed by {after} valid records" in read_only.stderr
    assert segment.read_bytes() == bytes(data)

    repaired = replay(records_dir, "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert f"moved bytes {start}..{end - 1} (CRC mismatch)" in repaired.stdout
    assert (records_dir / f"{segment.name}.damaged-{start}-{end}").read_bytes() == bytes(data[start:end])

    node.start()
    try:
        fetched = fetch_all(node)
    finally:
        node.stop()
    # Every acknowledged commit but the damaged record's (g3 never committed partition 1 again)
    assert fetched == {**acked, ("g3", 1): None}
