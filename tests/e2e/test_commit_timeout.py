"""offsets.commit.timeout.ms on a `serve --zk` node: a commit whose records ZooKeeper cannot store in time (its
server stopped with SIGSTOP, a real stall, not a fault in the client) is answered REQUEST_TIMED_OUT after the
timeout, not after a ZooKeeper session; once ZooKeeper answers again commits succeed. The test runs its own
ZooKeeper, as stopping the shared one would stall every other test."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from e2e.wire_calls import read_exactly
from zkcoord.errors import ErrorCode
from zkcoord.local.node import FAST_GROUP_FLAGS, NodeProcess
from zkcoord.local.zookeeper import ZooKeeper
from zkcoord.testing import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

TIMEOUT_MS = 1000


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeper]:
    zk = ZooKeeper.start(1, base_dir=tmp_path / "zk")
    try:
        yield zk
    finally:
        process = zk.nodes[0].process
        if process is not None:
            os.killpg(process.pid, signal.SIGCONT)  # never leave it stopped
        zk.stop()


def _commit(port: int, group: str, topic: str, offset: int) -> tuple[int, float]:
    """(error code, seconds) of one OffsetCommit v2 (a standalone commit: generation -1, no member)."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(
        version=2,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[
            T(
                name=topic,
                partitions=[
                    T.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata=""
                    )
                ],
            )
        ],
    )
    req.with_header(correlation_id=3, client_id="commit-timeout")
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(bytes(req.encode(header=True, framed=True)))
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        frame = read_exactly(sock, size)
    resp: Any = OffsetCommitResponse.decode(frame, version=2, header=True)
    return int(resp.topics[0].partitions[0].error_code), time.monotonic() - started


def test_a_commit_zookeeper_cannot_store_in_time_gets_request_timed_out(
    own_zookeeper: ZooKeeper, tmp_path: Path
) -> None:
    node = NodeProcess(
        tmp_path / "node",
        ("--zk", own_zookeeper.hosts, "--node-id", "1", "--offsets.topic.num.partitions=1",
         f"--offsets.commit.timeout.ms={TIMEOUT_MS}", "--zookeeper.session.timeout.ms=30000", *FAST_GROUP_FLAGS),
    )  # fmt: skip
    with node:
        producer = KafkaProducer(bootstrap_servers=node.bootstrap)
        try:
            producer.send("t", b"x", partition=0).get(30)
        finally:
            producer.close()
        wait_for(lambda: _commit(node.port, "g", "t", 1)[0] == ErrorCode.NONE, 30, "the coordinator loaded")
        process = own_zookeeper.nodes[0].process
        assert process is not None
        os.killpg(process.pid, signal.SIGSTOP)
        try:
            error, took = _commit(node.port, "g", "t", 2)
        finally:
            os.killpg(process.pid, signal.SIGCONT)
        assert error == ErrorCode.REQUEST_TIMED_OUT
        assert (
            TIMEOUT_MS / 1000 <= took < TIMEOUT_MS / 1000 + 5
        )  # the timeout, not a ZooKeeper session (30 s)
        wait_for(lambda: _commit(node.port, "g", "t", 3)[0] == ErrorCode.NONE, 30, "commits again")
