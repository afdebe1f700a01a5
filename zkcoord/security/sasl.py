"""The SASL side of Kafka's listeners without I/O: security protocols and `--listeners` entries with Kafka's
names, `sasl.enabled.mechanisms`, the PLAIN exchange (RFC 4616) against users of a JAAS `KafkaServer` section,
and Kafka's principal names (`User:<name>`, `User:ANONYMOUS`).

Guarantees: a listener string either parses into typed listeners (unique names and ports) or raises a
ConfigError naming the entry; a PLAIN password is compared in constant time and an unknown user fails exactly
like a wrong password.
"""

from __future__ import annotations

import enum
import hmac
from dataclasses import dataclass

from zkcoord.errors import ConfigError, ErrorCode, ZkcoordError
from zkcoord.security.scram import HASHES

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *sorted(HASHES))  # what zkcoord can serve
ANONYMOUS = "User:ANONYMOUS"


class SecurityProtocol(enum.Enum):
    """Kafka's `SecurityProtocol`: whether a listener wraps TLS and whether it requires SASL."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    """One entry of `listeners`: NAME://host:port, the name being a security protocol (no listener map)."""

    protocol: SecurityProtocol
    host: str
    port: int

    @property
    def name(self) -> str:
        return self.protocol.value

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str) -> tuple[Listener, ...]:
    """`PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093` (an empty host is 127.0.0.1 here, a safe default)."""
    out: list[Listener] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, address = entry.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ConfigError(f"listeners: {entry!r} is not NAME://HOST:PORT")
        try:
            protocol = SecurityProtocol(name.upper())
        except ValueError:
            names = ", ".join(p.value for p in SecurityProtocol)
            raise ConfigError(
                f"listeners: {name!r} is not a security protocol ({names}); listener.security.protocol.map "
                "is not supported, so a listener is named by its protocol"
            ) from None
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        out.append(Listener(protocol, host or "127.0.0.1", int(port)))
    if not out:
        raise ConfigError("listeners: no listener given")
    listed = [lst.name for lst in out]
    if len(set(listed)) != len(listed):
        raise ConfigError(f"listeners: a listener name appears twice ({', '.join(listed)})")
    ports = [lst.port for lst in out if lst.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError("listeners: two listeners on one port")
    return tuple(out)


def parse_mechanisms(text: str) -> tuple[str, ...]:
    """`sasl.enabled.mechanisms`: comma separated, each one zkcoord serves (GSSAPI and OAUTHBEARER are not)."""
    mechs = tuple(m.strip().upper() for m in text.split(",") if m.strip())
    if not mechs:
        raise ConfigError("sasl.enabled.mechanisms: empty")
    for m in mechs:
        if m not in MECHANISMS:
            raise ConfigError(
                f"sasl.enabled.mechanisms: {m} is not supported (supported: {', '.join(MECHANISMS)})"
            )
    return tuple(dict.fromkeys(mechs))


class SaslFailure(ZkcoordError):
    """Authentication failed; the message is what the client is told (never which part was wrong)."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


def plain_authenticate(message: bytes, users: dict[str, str]) -> str:
    """The user of a PLAIN message `[authzid] NUL authcid NUL passwd` whose password `users` holds; else
    SaslFailure. As Kafka's PlainSaslServer, an authorization id must be empty or equal to the user."""
    parts = message.split(b"\x00")
    if len(parts) != 3:
        raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
    if not user or not password:
        raise SaslFailure("Authentication failed: username or password not specified")
    if authzid and authzid != user:
        raise SaslFailure(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    expected = users.get(user)
    # Compare against something even for an unknown user, so timing does not tell users apart.
    ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
    if expected is None or not ok:
        raise SaslFailure("Authentication failed: Invalid username or password")
    return user


def principal(user: str) -> str:
    """Kafka's default principal for a SASL login (KafkaPrincipal USER_TYPE)."""
    return f"User:{user}"
