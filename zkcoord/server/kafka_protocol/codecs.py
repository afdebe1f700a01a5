"""The adapter's codec table: for every API in `zkcoord.api_keys.SERVED`, the kafka-python request/response classes
(or the hand-written decoder of `zkcoord.server.consumer_protocol`), and per accepted (api key, version) the compiled
decoder, the flexible flags and the prescan plan, resolved once at import from that one table (nothing is added later).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from kafka.protocol import admin, consumer, metadata, producer, sasl

from zkcoord.api_keys import SERVED, ApiKey
from zkcoord.server import consumer_protocol, prescan

# kafka-python's (request, response) classes of each served API it has classes for.
CLASSES: Final[Mapping[int, tuple[Any, Any]]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (producer.ProduceRequest, producer.ProduceResponse),
        ApiKey.FETCH: (consumer.FetchRequest, consumer.FetchResponse),
        ApiKey.LIST_OFFSETS: (consumer.ListOffsetsRequest, consumer.ListOffsetsResponse),
        ApiKey.METADATA: (metadata.MetadataRequest, metadata.MetadataResponse),
        ApiKey.OFFSET_COMMIT: (consumer.OffsetCommitRequest, consumer.OffsetCommitResponse),
        ApiKey.OFFSET_FETCH: (consumer.OffsetFetchRequest, consumer.OffsetFetchResponse),
        ApiKey.FIND_COORDINATOR: (metadata.FindCoordinatorRequest, metadata.FindCoordinatorResponse),
        ApiKey.JOIN_GROUP: (consumer.JoinGroupRequest, consumer.JoinGroupResponse),
        ApiKey.HEARTBEAT: (consumer.HeartbeatRequest, consumer.HeartbeatResponse),
        ApiKey.LEAVE_GROUP: (consumer.LeaveGroupRequest, consumer.LeaveGroupResponse),
        ApiKey.SYNC_GROUP: (consumer.SyncGroupRequest, consumer.SyncGroupResponse),
        ApiKey.DESCRIBE_GROUPS: (admin.DescribeGroupsRequest, admin.DescribeGroupsResponse),
        ApiKey.LIST_GROUPS: (admin.ListGroupsRequest, admin.ListGroupsResponse),
        ApiKey.SASL_HANDSHAKE: (sasl.SaslHandshakeRequest, sasl.SaslHandshakeResponse),
        ApiKey.API_VERSIONS: (metadata.ApiVersionsRequest, metadata.ApiVersionsResponse),
        ApiKey.CREATE_TOPICS: (admin.CreateTopicsRequest, admin.CreateTopicsResponse),
        ApiKey.DELETE_TOPICS: (admin.DeleteTopicsRequest, admin.DeleteTopicsResponse),
        ApiKey.INIT_PRODUCER_ID: (producer.InitProducerIdRequest, producer.InitProducerIdResponse),
        ApiKey.SASL_AUTHENTICATE: (sasl.SaslAuthenticateRequest, sasl.SaslAuthenticateResponse),
        ApiKey.DELETE_GROUPS: (admin.DeleteGroupsRequest, admin.DeleteGroupsResponse),
    }
)

# The advertised and accepted windows by plain key, as the wire layer reads them.
ADVERTISED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {int(k): w.advertised for k, w in SERVED.items()}
)
ACCEPTED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {int(k): w.accepted for k, w in SERVED.items()}
)


@dataclass(frozen=True, slots=True)
class Codec:
    request_cls: Any  # None: a hand-written codec
    response_cls: Any
    decode: Callable[[memoryview, int], tuple[Any, int]]
    flexible: bool
    response_flexible: bool
    plan: prescan.Plan | None  # None: a hand-written codec that bounds itself


def _generic(key: ApiKey, version: int) -> Codec:
    req_cls, resp_cls = CLASSES[key]
    flexible = bool(req_cls.flexible_version_q(version))
    dec = req_cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=req_cls)
    # ApiVersions answers always carry response header v0 (KIP-511), even at flexible versions.
    resp_flexible = bool(resp_cls.flexible_version_q(version)) and key != ApiKey.API_VERSIONS
    return Codec(req_cls, resp_cls, dec, flexible, resp_flexible, prescan.Plan(req_cls, version, flexible))


def _hand_written(key: ApiKey, version: int) -> Codec:
    decode = consumer_protocol.DECODERS[key]

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        return decode(buf, pos, version), len(buf)

    return Codec(None, None, dec, True, True, None)  # every version of the KIP-848 APIs is flexible


def _build() -> dict[tuple[int, int], Codec]:
    codecs: dict[tuple[int, int], Codec] = {}
    for key, windows in SERVED.items():
        lo, hi = windows.accepted
        if key in CLASSES:
            hi = min(hi, CLASSES[key][0].max_version)
            make = _generic
        elif key in consumer_protocol.DECODERS:
            make = _hand_written
        else:
            continue  # no codec: tests/unit/test_api_table.py names the API
        for version in range(lo, hi + 1):
            # Keyed by the plain int a frame carries: a tuple holding the enum member would compare slower.
            codecs[(int(key), version)] = make(key, version)
    return codecs


# A plain dict: read on every request.
CODECS: Final[dict[tuple[int, int], Codec]] = _build()
