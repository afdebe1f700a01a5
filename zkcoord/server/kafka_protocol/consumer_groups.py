"""The consumer rebalance protocol (KIP-848) on the wire: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
(69). kafka-python has no classes for them: the codec is hand-written in `zkcoord.server.consumer_protocol`, and
these functions frame it like any other API (the codec table decodes the requests).
"""

from __future__ import annotations

import struct
from typing import Any

from zkcoord.api_keys import ApiKey
from zkcoord.group import consumer_messages as gcm
from zkcoord.server import consumer_protocol, fastpath
from zkcoord.server.kafka_protocol.frames import RequestFrame, frame_response

CONSUMER_GROUP_HEARTBEAT = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
CONSUMER_GROUP_DESCRIBE = int(ApiKey.CONSUMER_GROUP_DESCRIBE)


def consumer_group_request(req: RequestFrame, client_host: str = "") -> Any:
    """The zkcoord value of a ConsumerGroupHeartbeat/Describe frame; the heartbeat gets the header's client id and
    the connection's host."""
    b = req.body
    if req.api_key == CONSUMER_GROUP_HEARTBEAT:
        host = client_host or (req.session.host if req.session is not None else "")
        # Every field named (not dataclasses.replace, which looks the fields up on each call): once per heartbeat.
        return gcm.ConsumerGroupHeartbeatRequest(
            b.api_version, b.group_id, b.member_id, b.member_epoch, b.instance_id, b.rack_id,
            b.rebalance_timeout_ms, b.subscribed_topic_names, b.subscribed_topic_regex, b.server_assignor,
            b.topic_partitions, req.client_id or "", host,
        )  # fmt: skip
    return b


def consumer_group_response(req: RequestFrame, resp: Any) -> bytes:
    if req.api_key == CONSUMER_GROUP_HEARTBEAT:
        packed = fastpath.consumer_heartbeat_response(req.api_version, req.correlation_id, resp)
        if packed is not None:
            return packed
        body = consumer_protocol.encode_heartbeat_response(resp, req.api_version)
    else:
        body = consumer_protocol.encode_describe_response(resp, req.api_version)
    return frame_response(req.api_key, req.api_version, req.correlation_id, body)


def encode_consumer_group_request(correlation_id: int, client_id: str | None, value: Any) -> bytes:
    """A framed ConsumerGroupHeartbeat/Describe request (request header v2) for tests, benchmarks and the fuzzer."""
    if isinstance(value, gcm.ConsumerGroupHeartbeatRequest):
        key, body = CONSUMER_GROUP_HEARTBEAT, consumer_protocol.encode_heartbeat_request(value)
    else:
        key, body = CONSUMER_GROUP_DESCRIBE, consumer_protocol.encode_describe_request(value)
    cid = (
        b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    )
    head = struct.pack(">hhi", key, value.api_version, correlation_id) + cid + b"\x00"
    return struct.pack(">i", len(head) + len(body)) + head + body


def decode_consumer_group_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation_id, response value) of a ConsumerGroupHeartbeat/Describe response frame without its size
    prefix (tests): the inverse of `consumer_group_response`."""
    correlation_id = struct.unpack_from(">i", frame, 0)[0]
    return correlation_id, consumer_protocol.decode_response(api_key, api_version, frame[5:])
