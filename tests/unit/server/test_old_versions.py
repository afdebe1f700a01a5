"""Old API versions on a single node (no ZooKeeper), over real sockets: v0 offsets go to the coordinator as
documented in wire-server.md, ApiVersions advertises the served windows, and old Produce/Fetch/ListOffsets answer
every partition (records converted, or the partition's own error), unsupported versions get Kafka's answer."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from zkcoord.errors import ErrorCode
from zkcoord.group.config import GroupConfig
from zkcoord.records.batch import CRC_START, GZIP, LZ4, build_batch
from zkcoord.records.crc32c import crc32c
from zkcoord.records.message_set import LegacyMessage, decode_message_set, encode_message_set
from zkcoord.server import kafka_protocol as kp
from zkcoord.server import old_formats
from zkcoord.server.app import Node
from zkcoord.server.broker import ServerConfig

TOPIC = "old-versions"


class _Server:
    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node = Node(
            ServerConfig(port=0, data_dir=data_dir), GroupConfig(group_initial_rebalance_delay_ms=0)
        )
        asyncio.run_coroutine_threadsafe(self.node.start(), self.loop).result(60)
        assert self.node.wire is not None
        self.port = self.node.wire.port

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.node.close(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        frame = kp.encode_request(api_key, version, 11, "old", **fields)
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as sock:
            sock.sendall(frame)
            size = struct.unpack(">i", _read(sock, 4))[0]
            corr, resp = kp.decode_response(api_key, version, _read(sock, size))
        assert corr == 11
        return resp


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "closed"
        buf += chunk
    return buf


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    s = _Server(tmp_path_factory.mktemp("old-versions"))
    try:
        # Metadata v0 auto-creates the topic (v0 always may) and answers it as old clients read it
        meta = s.call(kp.METADATA, 0, topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)])
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [(TOPIC, 0, 1)]
        yield s
    finally:
        s.close()


def _produce(server: _Server, version: int, records: bytes) -> tuple[int, int]:
    resp = server.call(
        kp.PRODUCE,
        version,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
                ],
            )
        ],
    )
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_v0_offsets_on_a_single_node_are_the_coordinators(server: _Server) -> None:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    topics = [T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=42, committed_metadata="m")])]
    resp = server.call(kp.OFFSET_COMMIT, 0, group_id="single", topics=topics)
    assert resp.topics[0].partitions[0].error_code == 0
    for version in (0, 1, 5):
        fetched = server.call(
            kp.OFFSET_FETCH,
            version,
            group_id="single",
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
        )
        p = fetched.topics[0].partitions[0]
        assert (p.committed_offset, p.error_code) == (42, 0), version


def test_api_versions_advertise_the_old_versions_served(server: _Server) -> None:
    resp = server.call(kp.API_VERSIONS, 0)
    table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert table[kp.PRODUCE][0] == 0 and table[kp.FETCH][0] == 0 and table[kp.LIST_OFFSETS][0] == 0
    assert table[kp.OFFSET_COMMIT][0] == 0 and table[kp.METADATA][0] == 0


def test_old_produce_and_fetch_versions_round_trip_every_partition_answered(server: _Server) -> None:
    msgs = [LegacyMessage(0, b"k%d" % i, b"v%d" % i, 1_700_000_000_000 + i) for i in range(3)]
    base = _produce(server, 2, encode_message_set(msgs, magic=1, codec=GZIP))
    assert base[0] == 0
    assert _produce(server, 0, encode_message_set(msgs[:1], magic=0))[1] == base[1] + 3
    listed = server.call(
        kp.LIST_OFFSETS,
        0,
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, timestamp=-1, max_num_offsets=1
                    )
                ],
            )
        ],
    )
    assert listed.topics[0].partitions[0].old_style_offsets == [base[1] + 4]
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        FP = FetchRequest.FetchTopic.FetchPartition
        parts = [
            FP(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
            for p, o in ((0, base[1] + 1), (5, 0), (0, 10_000))
        ]
        resp = server.call(
            kp.FETCH,
            version,
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=parts)],
        )
        answers = [
            (p.partition_index, p.error_code, bytes(p.records or b"")) for p in resp.responses[0].partitions
        ]
        assert [(i, e) for i, e, _ in answers] == [
            (0, 0),
            (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (0, ErrorCode.OFFSET_OUT_OF_RANGE),
        ]
        got = decode_message_set(answers[0][2])
        assert [(m.offset - base[1], m.key, m.magic) for m in got] == [
            (1, b"k1", magic),
            (2, b"k2", magic),
            (3, b"k0", magic),
        ]
        if magic == 1:
            assert [m.timestamp for m in got[:2]] == [1_700_000_000_001, 1_700_000_000_002]


def test_unsupported_version_gets_kafkas_answer(server: _Server) -> None:
    """A Fetch above the accepted window: UNSUPPORTED_VERSION in a body the client can read, never empty."""
    frame = bytearray(kp.encode_request(kp.FETCH, 4, 12, "old", replica_id=-1, max_wait_ms=0, min_bytes=0,
                                        max_bytes=1, isolation_level=0, topics=[]))  # fmt: skip
    struct.pack_into(">h", frame, 6, 13)  # rewrite the header's version to 13
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.sendall(bytes(frame))
        size = struct.unpack(">i", _read(sock, 4))[0]
        body = _read(sock, size)
    assert struct.unpack_from(">i", body, 0)[0] == 12
    assert ErrorCode.UNSUPPORTED_VERSION.to_bytes(2, "big") in body


def test_a_stored_batch_that_cannot_be_converted_is_the_partitions_error() -> None:
    """A stored batch whose records do not decompress (here: plain records under the lz4 flag): an old Fetch gets
    UNSUPPORTED_FOR_MESSAGE_FORMAT for that partition, never an empty answer without an error."""
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">h", batch, CRC_START, 3)  # attributes: lz4
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[CRC_START:])))
    data, error = old_formats.fetch_records(0, "t-0", bytes(batch), 0, 1 << 20, 1 << 20)
    assert (data, error) == (b"", ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
    assert old_formats.fetch_records(4, "t-0", bytes(batch), 0, 1 << 20, 1 << 20) == (bytes(batch), 0)


def test_a_stored_lz4_batch_is_converted_down_for_old_fetches() -> None:
    batch = build_batch([(b"k0", b"v0"), (None, b"v1")], base_offset=5, base_timestamp=1000, compression=LZ4)
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        data, error = old_formats.fetch_records(version, "t-0", batch, 6, 1 << 20, 1 << 20)
        assert error == ErrorCode.NONE
        got = decode_message_set(data)
        assert [(m.offset, m.key, m.value, m.magic) for m in got] == [(6, None, b"v1", magic)]
