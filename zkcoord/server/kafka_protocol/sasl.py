"""SASL on the wire: SaslHandshake (17) and SaslAuthenticate (36), read and answered for the listener's login
(`zkcoord.server.listener_security`). Their windows are Kafka 2.8's (`zkcoord.api_keys.SERVED`); a v0 handshake's
raw-token flow (tokens without a Kafka header) is not served: the listener answers it UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from zkcoord.server.kafka_protocol.frames import RequestFrame, encode


def sasl_handshake_mechanism(req: RequestFrame) -> str:
    return str(req.body.mechanism)


def sasl_handshake_response(req: RequestFrame, error_code: int, mechanisms: Sequence[str]) -> bytes:
    return encode(
        req,
        SaslHandshakeResponse(version=req.api_version, error_code=error_code, mechanisms=list(mechanisms)),
    )


def sasl_auth_bytes(req: RequestFrame) -> bytes:
    return bytes(req.body.auth_bytes)


def sasl_authenticate_response(
    req: RequestFrame, error_code: int, error_message: str | None, auth_bytes: bytes = b""
) -> bytes:
    resp = SaslAuthenticateResponse(
        version=req.api_version,
        error_code=error_code,
        error_message=error_message,
        auth_bytes=auth_bytes,
        session_lifetime_ms=0,  # no re-authentication required (KIP-368 off)
    )
    return encode(req, resp)
