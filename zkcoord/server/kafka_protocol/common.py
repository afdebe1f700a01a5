"""Answers every API shares: ApiVersions (and its KIP-511 v0 fallback), whole-request error answers,
UNSUPPORTED_VERSION, and the request encoder / response decoder tests and benchmarks speak the wire with.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse

from zkcoord.api_keys import CONSUMER_GROUP_APIS, SERVED, ApiKey
from zkcoord.server import consumer_protocol
from zkcoord.server.kafka_protocol.codecs import ADVERTISED, CLASSES
from zkcoord.server.kafka_protocol.frames import (
    RESP_HEAD_FLEX,
    UNSUPPORTED_VERSION,
    RequestFrame,
    encode,
    frame_response,
    frame_v0,
    response_class,
)


def api_versions_response(req: RequestFrame, error_code: int = 0) -> bytes:
    cls = ApiVersionsResponse
    keys = [
        cls.ApiVersion(api_key=int(k), min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(ADVERTISED.items())
    ]
    resp = cls(version=req.api_version, error_code=error_code, api_keys=keys, throttle_time_ms=0)
    return encode(req, resp)


def api_versions_fallback(correlation_id: int) -> bytes:
    """KIP-511: an ApiVersions version this server does not know is answered in the v0 body encoding with
    UNSUPPORTED_VERSION and the one ApiVersions entry, so the client can retry with a version we support."""
    lo, hi = ADVERTISED[ApiKey.API_VERSIONS]
    cls = ApiVersionsResponse
    resp = cls(
        version=0,
        error_code=UNSUPPORTED_VERSION,
        api_keys=[cls.ApiVersion(api_key=int(ApiKey.API_VERSIONS), min_version=lo, max_version=hi)],
    )
    return frame_v0(correlation_id, resp.encode(version=0))


def error_response(req: RequestFrame, error_code: int) -> bytes | None:
    """A whole-request error answer for APIs whose response has a top-level error code; else None."""
    if req.api_key in CONSUMER_GROUP_APIS:
        body = consumer_protocol.error_body(req.api_key, req.api_version, error_code)
        return (
            None if body is None else frame_response(req.api_key, req.api_version, req.correlation_id, body)
        )
    cls = response_class(req)
    fields = cls._struct.fields
    if "error_code" not in fields or not fields["error_code"].for_version_q(req.api_version):
        return None
    resp = cls(version=req.api_version, error_code=error_code)
    return encode(req, resp)


def unsupported_version_response(api_key: int, api_version: int, correlation_id: int) -> bytes | None:
    """UNSUPPORTED_VERSION for a known API at a version the classes can still encode; else None (close)."""
    if api_key == consumer_protocol.CONSUMER_GROUP_HEARTBEAT and api_version >= 0:
        # Kafka answers with the highest version it knows; every version of this response is flexible.
        hi = SERVED[ApiKey.CONSUMER_GROUP_HEARTBEAT].accepted[1]
        body = consumer_protocol.error_body(api_key, hi, UNSUPPORTED_VERSION)
        assert body is not None
        return RESP_HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + body
    pair = CLASSES.get(api_key)
    if pair is None:
        return None
    resp_cls = pair[1]
    if not 0 <= api_version <= resp_cls.max_version:
        return None
    fields = resp_cls._struct.fields
    if "error_code" not in fields or not fields["error_code"].for_version_q(api_version):
        return None
    try:
        body = resp_cls(version=api_version, error_code=UNSUPPORTED_VERSION).encode(version=api_version)
    except Exception:
        return None
    flexible = bool(resp_cls.flexible_version_q(api_version))
    if flexible:
        return RESP_HEAD_FLEX.pack(len(body) + 5, correlation_id, 0) + bytes(body)
    return frame_v0(correlation_id, body)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, **fields: Any
) -> bytes:
    """A framed request (for tests and benchmarks that speak the wire protocol without a client library)."""
    req_cls = CLASSES[api_key][0]
    obj = req_cls(version=api_version, **fields)
    obj.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(obj.encode(header=True, framed=True))


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation_id, response object) for one response frame without its size prefix (tests, benchmarks)."""
    resp_cls = CLASSES[api_key][1]
    obj = resp_cls.decode(frame, version=api_version, header=True)
    return obj.header.correlation_id, obj


def bitfield(value: int) -> set[int] | None:
    """kafka-python encodes authorized-operations bitfields from a set of bit numbers; None = INT32_MIN (omitted)."""
    if value == -(2**31):
        return None
    return {bit for bit in range(32) if value >> bit & 1}
