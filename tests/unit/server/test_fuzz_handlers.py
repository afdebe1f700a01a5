"""Property: random valid-but-extreme requests of every API and version, and hostile mutations of them, each get
an answer or a close (never silence on an open connection); the server stays up and stored data is unchanged.

One single-node server (partition logs + group coordinator) runs on a background event loop for the module;
examples talk to it over real sockets. Longer runs: `bash scripts/bench.sh fuzz` (benchmarks/bench_fuzz.py).
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.group.config import GroupConfig
from zkcoord.records.batch import build_batch
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig
from zkcoord.testing import wire_fuzz as wf

ANSWER_TIMEOUT_S = 20.0


class _Server:
    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        cfg = ServerConfig(port=0, data_dir=data_dir)
        self.node = Node(cfg, GroupConfig(group_initial_rebalance_delay_ms=0))
        self.call(self.node.start())
        assert self.node.wire is not None
        self.port = self.node.wire.port

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def close(self) -> None:
        self.call(self.node.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _exchange(port: int, frames: list[bytes], half_close: bool) -> list[int | None]:
    """Send the frames on one connection and read answers until one per frame or the server closes; the answers'
    correlation ids, then None if the server closed. Without `half_close` the server never sees EOF, so a
    request left unanswered on an open connection shows as a timeout (silence), not as a close."""
    got: list[int | None] = []
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(b"".join(frames))
        if half_close:
            sock.shutdown(socket.SHUT_WR)  # a frame whose size lies then ends at EOF, not the read timeout
        reader = sock.makefile("rb")
        while len(got) < len(frames):
            head = reader.read(4)
            if len(head) < 4:
                return [*got, None]
            body = reader.read(struct.unpack(">i", head)[0])
            got.append(struct.unpack_from(">i", body, 0)[0])
            if got[-1] == PROBE:
                break
    return got


def _snapshot(server: _Server) -> tuple[bytes, int]:
    logs = server.node.logs
    assert logs is not None
    plog = logs.get(wf.PROTECTED_TOPIC, 0)
    assert plog is not None
    return plog.read(0, 1 << 20), plog.next_offset


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    srv = _Server(tmp_path_factory.mktemp("fuzz-node"))
    try:
        logs = srv.node.logs
        assert logs is not None
        logs.create_topic(wf.PROTECTED_TOPIC, 1)
        P = kp._CLASSES[kp.PRODUCE][0]
        data = P.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(b"k", b"keep")] * 3))
        produce = kp.encode_request(
            kp.PRODUCE,
            7,
            1,
            "setup",
            transactional_id=None,
            acks=1,
            timeout_ms=1000,
            topic_data=[P.TopicProduceData(name=wf.PROTECTED_TOPIC, partition_data=[data])],
        )
        assert _exchange(srv.port, [produce], half_close=True) == [1]
        before = _snapshot(srv)
        assert before[1] == 3
        yield srv
        assert _snapshot(srv) == before, "a fuzzed request changed the protected topic"
        wire = srv.node.wire
        assert wire is not None and wire.errors["unexpected"] == 0  # nothing escaped the per-request guards
        hello = kp.encode_request(kp.API_VERSIONS, 0, 77, None)
        assert _exchange(srv.port, [hello], half_close=True) == [77]  # still serving
    finally:
        srv.close()


PROBE = 4343


@settings(max_examples=250)
@given(
    pair=st.sampled_from(wf.accepted_versions()),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    hostile=st.booleans(),
)
def test_every_request_is_answered_or_closed(
    server: _Server, pair: tuple[int, int], seed: int, hostile: bool
) -> None:
    rng = random.Random(seed)
    key, version = pair
    frame, body = wf.random_request(rng, key, version, 4242)
    probe = kp.encode_request(kp.API_VERSIONS, 0, PROBE, None)  # answered only after everything before it
    silent = key == kp.PRODUCE and body.acks == 0  # Kafka never answers acks=0
    if not hostile:
        got = _exchange(server.port, [frame, probe], half_close=False)
        # Answered in order, or closed (with a log line) where Kafka has no error to send; never silence.
        assert got in ([PROBE], [None]) if silent else got in ([4242, PROBE], [4242, None], [None])
        return
    bad = wf.mutate(rng, frame)
    allowed = {4242, PROBE, struct.unpack_from(">i", bad, 8)[0] if len(bad) >= 12 else 4242}
    got = _exchange(server.port, [bad, frame, probe], half_close=True)
    assert all(c is None or c in allowed for c in got)
