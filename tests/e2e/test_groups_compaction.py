"""kill -9 of a standalone node at random moments while it compacts its group-records: no acknowledged commit is
lost, the log stays bounded by the live set, and the node restarts on it (real `zkcoord serve`, kafka-python
commits). The deterministic crash points of compaction are covered in-process (tests/unit/storage)."""

from __future__ import annotations

import os
import random
import shutil
import threading
from pathlib import Path

import pytest
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.conftest import FAST_GROUP_FLAGS, ServerProcess
from zkcoord.group.model import replay_all
from zkcoord.records.offsets import decode_record
from zkcoord.storage import FileRecordStore
from zkcoord.storage.file_store import COMPACTING, SWAP
from zkcoord.testing import wait_for

pytestmark = pytest.mark.e2e

PARTITIONS = 300  # a commit of every partition is ~25 KB of records: a compaction every few commits
KILLS = 6  # every other one at a random moment, the others as soon as a compaction output appears ...
MAX_KILLS = 12  # ... and more of those until one landed inside a compaction (it may finish before the kill)
GROUP = "compacted"
TOPIC = "wide"


class CommitLoop:
    """Commits growing offsets of every partition as fast as the node answers; `acked[p]` is the last offset
    acknowledged for partition p, `attempted` the highest offset sent."""

    def __init__(self, node: ServerProcess) -> None:
        self.tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        self.consumer = KafkaConsumer(
            bootstrap_servers=node.bootstrap, group_id=GROUP, enable_auto_commit=False, retry_backoff_ms=20
        )
        self.acked: dict[int, int] = {}
        self.attempted = 0
        self.commits = 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.halt.is_set():
            n += 1
            self.attempted = n * 1000 + PARTITIONS
            offsets = {tp: OffsetAndMetadata(n * 1000 + tp.partition, "", -1) for tp in self.tps}
            try:
                self.consumer.commit(offsets)
            except Exception:
                continue  # not acknowledged (the node is down): retry with the next offsets
            for tp, om in offsets.items():
                self.acked[tp.partition] = om.offset
            self.commits += 1


def compacting(records_dir: Path) -> bool:
    """Is a compaction's output on disk now (between its first write and its final rename)?"""
    return any(name.endswith((COMPACTING, SWAP)) for name in os.listdir(records_dir))


def recovered_offsets(records_dir: Path, scratch: Path) -> tuple[dict[int, int], bool]:
    """What a restart recovers from a copy of the killed node's log (finishing or discarding an interrupted
    compaction exactly as the node's own open does), and whether the kill landed inside a compaction."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(records_dir, scratch)
    mid_compaction = any(p.suffix in (SWAP, COMPACTING) for p in scratch.iterdir())
    store = FileRecordStore(scratch, compact_min_bytes=0)
    view = replay_all([decode_record(k, v) for k, v in store.load()])
    store.close()
    offsets = view.offsets.get(GROUP, {})
    return {p: v.offset for (t, p), v in offsets.items() if t == TOPIC}, mid_compaction


def test_kill9_during_compaction_loses_no_acknowledged_commit(tmp_path: Path) -> None:
    rng = random.Random(20261127)
    node = ServerProcess(tmp_path / "data", (*FAST_GROUP_FLAGS, "--group.records.compact.min.bytes=60000"))
    node.start()
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    records_dir = tmp_path / "data" / "group-records"
    loop = CommitLoop(node)
    loop.thread.start()
    landed_mid_compaction = 0
    try:
        kill = 0
        while kill < KILLS or (landed_mid_compaction == 0 and kill < MAX_KILLS):
            kill += 1
            target = loop.commits + rng.randint(4, 30)
            wait_for(lambda target=target: loop.commits >= target, 60, f"{target} acknowledged commits")
            if kill % 2 == 0 or kill > KILLS:
                wait_for(lambda: compacting(records_dir), 60, "a compaction under way", 0)
            node.kill9()
            acked_at_kill = dict(loop.acked)
            recovered, mid = recovered_offsets(records_dir, tmp_path / f"copy-{kill}")
            landed_mid_compaction += mid
            lost = {
                p: (acked, recovered.get(p))
                for p, acked in acked_at_kill.items()
                if recovered.get(p, -1) < acked
            }
            assert not lost, f"kill {kill}: acknowledged commits lost: {dict(list(lost.items())[:5])}"
            node.start()  # same port, same data dir: the node's own recovery
        wait_for(lambda: loop.commits >= target + 5, 60, "commits after the last restart")
    finally:
        loop.halt.set()
        loop.thread.join(60)
        loop.consumer.close(autocommit=False)
    assert not loop.thread.is_alive()
    compactions = sum("compacted" in line for line in node.output)
    fetched = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        after = {p: fetched.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    finally:
        fetched.close()
        node.stop()
    for p in range(PARTITIONS):
        offset = after[p]
        assert offset is not None and loop.acked[p] <= offset <= loop.attempted and offset % 1000 == p
    # the log holds about the live set, not the history of every commit
    history_bytes = loop.commits * PARTITIONS * 60
    log_bytes = sum(f.stat().st_size for f in records_dir.iterdir() if f.suffix in (".seg", SWAP))
    assert compactions >= 1 and log_bytes < history_bytes / 3, (compactions, log_bytes, history_bytes)
    assert landed_mid_compaction >= 1, f"none of {kill} kills landed inside a compaction"
    print(f"{kill} kills, {landed_mid_compaction} inside a compaction; {loop.commits} commits")
