"""A SCRAM login whose stored credential cannot be read (a malformed znode, any parse failure, ZooKeeper down)
fails with SASL_AUTHENTICATION_FAILED like a wrong password, never a silent close, and is logged rate-limited."""

from __future__ import annotations

import asyncio
import logging

import pytest

from zkcoord.errors import MalformedZnode
from zkcoord.security.scram import ScramCredential
from zkcoord.server import kafka_protocol as kp
from zkcoord.server.listener_security import SaslAuthenticator, SaslConfig


def _request(key: int, corr: int, **fields: object) -> kp.RequestFrame:
    return kp.decode_request(kp.encode_request(key, 1, corr, "c", **fields)[4:])


async def _login(lookup_error: BaseException) -> bytes | None:
    async def lookup(_user: str, _mechanism: str) -> ScramCredential | None:
        raise lookup_error

    auth = SaslAuthenticator(SaslConfig(("SCRAM-SHA-256",), scram_lookup=lookup), "peer:1")
    assert (await auth.step(_request(kp.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256"))).reply
    first = await auth.step(_request(kp.SASL_AUTHENTICATE, 2, auth_bytes=b"n,,n=mallory,r=abcdef"))
    assert first.reply is not None and not first.close  # answered like an unknown user: the proof will fail
    server_first = kp.decode_response(kp.SASL_AUTHENTICATE, 1, first.reply[4:])[1].auth_bytes
    nonce = server_first.split(b",")[0]  # r=<client nonce><server nonce>
    final = await auth.step(_request(kp.SASL_AUTHENTICATE, 3, auth_bytes=b"c=biws," + nonce + b",p=AAAA"))
    assert final.close and not auth.authenticated
    return final.reply


@pytest.mark.parametrize(
    "error",
    [
        MalformedZnode(
            "/config/users/mallory", "not Kafka's entity config JSON: nested deeper than 16 levels"
        ),
        RecursionError("maximum recursion depth exceeded"),
        ConnectionError("ZooKeeper unavailable"),
    ],
    ids=["malformed", "recursion", "zookeeper-down"],
)
def test_an_unreadable_credential_fails_the_login_with_error_58(error: BaseException) -> None:
    reply = asyncio.run(_login(error))
    assert reply is not None
    _corr, resp = kp.decode_response(kp.SASL_AUTHENTICATE, 1, reply[4:])  # after the size prefix
    assert (
        resp.error_code == 58
        and "invalid credentials with SASL mechanism SCRAM-SHA-256" in resp.error_message
    )


def test_repeated_unreadable_credentials_are_logged_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    async def many() -> None:
        for _ in range(50):
            await _login(MalformedZnode("/config/users/mallory", "not JSON"))

    with caplog.at_level(logging.INFO, logger="zkcoord.server.listener_security"):
        asyncio.run(many())
    unusable = [r for r in caplog.records if "credential of user 'mallory' unusable" in r.getMessage()]
    assert 1 <= len(unusable) <= 10, len(unusable)
    assert len(caplog.records) <= 22  # failed logins too: 10 lines a minute per kind, then one summary line
