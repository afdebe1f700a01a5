"""Listener strings, enabled mechanisms and the PLAIN exchange."""

from __future__ import annotations

import pytest

from zkcoord.errors import ConfigError, ErrorCode
from zkcoord.security.sasl import (
    Listener,
    SaslFailure,
    SecurityProtocol,
    parse_listeners,
    parse_mechanisms,
    plain_authenticate,
)


def test_listeners_with_kafka_names() -> None:
    got = parse_listeners("PLAINTEXT://127.0.0.1:9092, SASL_SSL://:9093,ssl://[::1]:0")
    assert got == (
        Listener(SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092),
        Listener(SecurityProtocol.SASL_SSL, "127.0.0.1", 9093),
        Listener(SecurityProtocol.SSL, "::1", 0),
    )
    assert [(x.protocol.tls, x.protocol.sasl) for x in got] == [(False, False), (True, True), (True, False)]
    assert str(got[1]) == "SASL_SSL://127.0.0.1:9093"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("CLIENT://h:1", "not a security protocol"),
        ("PLAINTEXT://h", "NAME://HOST:PORT"),
        ("PLAINTEXT://h:1,PLAINTEXT://h:2", "twice"),
        ("PLAINTEXT://h:1,SSL://h:1", "one port"),
        ("", "no listener"),
    ],
)
def test_bad_listeners(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_listeners(text)


def test_mechanisms() -> None:
    assert parse_mechanisms("plain, SCRAM-SHA-512,PLAIN") == ("PLAIN", "SCRAM-SHA-512")
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        parse_mechanisms("GSSAPI")


USERS = {"alice": "alice-secret", "bob": "b"}


def test_plain() -> None:
    assert plain_authenticate(b"\x00alice\x00alice-secret", USERS) == "alice"
    assert plain_authenticate(b"alice\x00alice\x00alice-secret", USERS) == "alice"
    for bad in (
        b"\x00alice\x00wrong",
        b"\x00carol\x00alice-secret",
        b"bob\x00alice\x00alice-secret",
        b"a\x00b",
        b"\x00\x00",
    ):
        with pytest.raises(SaslFailure) as info:
            plain_authenticate(bad, USERS)
        assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # an unknown user and a wrong password are told the same
    msgs = set()
    for m in (b"\x00x\x00y", b"\x00bob\x00y"):
        with pytest.raises(SaslFailure) as info:
            plain_authenticate(m, USERS)
        msgs.add(str(info.value))
    assert msgs == {"Authentication failed: Invalid username or password"}
