"""A raw Kafka wire client for the consumer-protocol (KIP-848) tests: one socket, ConsumerGroupHeartbeat/Describe
and Metadata frames through the server's own codec, each answer checked for its correlation id."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.protocol.metadata import MetadataRequest as KMetadata

from e2e.wire_calls import read_exactly
from zkcoord.group.consumer_messages import ConsumerGroupDescribeRequest as Describe
from zkcoord.group.consumer_messages import ConsumerGroupHeartbeatRequest as Hb
from zkcoord.server import kafka_protocol as kp


class Wire:
    """One client connection speaking raw frames: request in, the answer with the same correlation id out."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def roundtrip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        body = read_exactly(self.sock, struct.unpack(">i", read_exactly(self.sock, 4))[0])
        assert struct.unpack_from(">i", body)[0] == self.correlation
        return body

    def next_id(self) -> int:
        self.correlation += 1
        return self.correlation

    def heartbeat(self, req: Hb) -> Any:
        body = self.roundtrip(kp.encode_consumer_group_request(self.next_id(), "scenario", req))
        return kp.decode_consumer_group_response(68, req.api_version, body)[1]

    def describe(self, group: str) -> Any:
        body = self.roundtrip(
            kp.encode_consumer_group_request(self.next_id(), "scenario", Describe(0, (group,)))
        )
        return kp.decode_consumer_group_response(69, 0, body)[1].groups[0]

    def topic_ids(self, *names: str) -> dict[str, str]:
        topics = [KMetadata.MetadataRequestTopic(topic_id=None, name=n) for n in names]
        frame = kp.encode_request(kp.METADATA, 12, self.next_id(), "scenario", topics=topics,
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip
        meta = kp.decode_response(kp.METADATA, 12, self.roundtrip(frame))[1]
        assert all(t.error_code == 0 for t in meta.topics)
        return {t.name: t.topic_id.hex for t in meta.topics}
