"""What a listener asks of a connection before it serves it: TLS from PEM files (with Kafka's `ssl.client.auth`,
the principal of an SSL listener's connection is its client certificate's subject), and on SASL listeners a
per-connection authenticator that carries SaslHandshake (17) + SaslAuthenticate (36) through PLAIN or SCRAM.

Guarantees: on a SASL listener nothing but ApiVersions, SaslHandshake and SaslAuthenticate is served before the
login succeeds (anything else closes the connection, as Kafka's authenticator does); a failed login is answered
with SASL_AUTHENTICATION_FAILED (58) and the connection closed `connection.failed.authentication.delay.ms` later
(also when the user's stored SCRAM credential cannot be read: malformed, or ZooKeeper unavailable);
an unsupported mechanism gets UNSUPPORTED_SASL_MECHANISM (33) with the enabled list. States and transitions are
a table, checked on every step.
"""

from __future__ import annotations

import enum
import logging
import secrets
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.errors import ConfigError, ErrorCode, ZkcoordError
from zkcoord.ratelog import RateLimitedLog
from zkcoord.security.acl import Session
from zkcoord.security.sasl import ANONYMOUS, PLAIN, SaslFailure, plain_authenticate, principal
from zkcoord.security.scram import HASHES, ScramCredential, ScramError, ScramServer
from zkcoord.security.x500 import CertificateParseError, ssl_principal
from zkcoord.server import kafka_protocol as kp

log = logging.getLogger(__name__)
# Events any client can repeat at will (failed logins, a user's unusable stored credential): few lines, all counted.
_say = RateLimitedLog(log, burst=10, window_s=60.0)

# (user, mechanism) -> the stored credential, or None for an unknown user (read from /config/users/<user>).
ScramLookup = Callable[[str, str], Awaitable[ScramCredential | None]]


# Kafka's `ssl.client.auth` values, and what the TLS server asks of the client for each.
CLIENT_AUTH: dict[str, ssl.VerifyMode] = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,  # asked for; a client without one connects as User:ANONYMOUS
    "none": ssl.CERT_NONE,
}


def tls_context(
    certfile: Path, keyfile: Path | None = None, cafile: Path | None = None, client_auth: str = "none"
) -> ssl.SSLContext:
    """A server TLS context from PEM files (Kafka's `ssl.keystore.type=PEM`: the certificate chain, its key) and
    `ssl.client.auth` (`required`/`requested`, a certificate signed by a CA of `cafile`, the truststore)."""
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}, not {client_auth!r}")
    if client_auth != "none" and cafile is None:
        raise ConfigError(
            f"ssl.client.auth={client_auth} checks client certificates against the CAs of "
            "--ssl.truststore.location PEM: give it"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(certfile), str(keyfile) if keyfile is not None else None)
        if cafile is not None:
            ctx.load_verify_locations(str(cafile))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS: cannot load {certfile}/{keyfile}/{cafile}: {exc}") from None
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx


@dataclass(frozen=True)
class SaslConfig:
    """A SASL listener's settings, with Kafka's names: `sasl.enabled.mechanisms`, the PLAIN users of the JAAS
    `KafkaServer` section (`user_<name>="<password>"`), where SCRAM credentials come from, and
    `connection.failed.authentication.delay.ms`."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    scram_lookup: ScramLookup | None = None
    failed_authentication_delay_ms: int = 100

    def __post_init__(self) -> None:
        if PLAIN in self.mechanisms and not self.plain_users:
            raise ConfigError("sasl.enabled.mechanisms has PLAIN but no users: give --sasl-jaas-config FILE")
        if any(m in HASHES for m in self.mechanisms) and self.scram_lookup is None:
            raise ConfigError("SCRAM mechanisms read credentials from ZooKeeper /config/users: give --zk")
        if self.failed_authentication_delay_ms < 0:
            raise ConfigError("connection.failed.authentication.delay.ms must be >= 0")


class AuthState(enum.Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"  # waiting for (the next) SaslAuthenticate
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


VALID_PREVIOUS: dict[AuthState, frozenset[AuthState]] = {
    AuthState.AUTHENTICATE: frozenset({AuthState.HANDSHAKE, AuthState.AUTHENTICATE}),
    AuthState.AUTHENTICATED: frozenset({AuthState.AUTHENTICATE}),
    AuthState.FAILED: frozenset({AuthState.HANDSHAKE, AuthState.AUTHENTICATE}),
}


@dataclass(frozen=True, slots=True)
class Step:
    """One authentication step's outcome: the answer (None: none), and whether to close after it (after
    `close_delay_s`, Kafka's delay for failed logins)."""

    reply: bytes | None
    close: bool = False
    close_delay_s: float = 0.0


class SaslAuthenticator:
    """The login of one connection on a SASL listener; `principal` is Kafka's (`User:alice`) once done."""

    def __init__(self, config: SaslConfig, peer: str) -> None:
        self.config = config
        self.peer = peer
        self.state = AuthState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is AuthState.AUTHENTICATED

    def _to(self, state: AuthState) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise AssertionError(f"authentication state {self.state.value} -> {state.value} is not allowed")
        self.state = state

    def _fail(self, req: kp.RequestFrame, message: str) -> Step:
        self._to(AuthState.FAILED)
        _say.log(
            logging.INFO,
            "failed_login",
            "connection %s: SASL %s authentication failed: %s",
            self.peer,
            self.mechanism,
            message,
        )
        reply = kp.sasl_authenticate_response(req, ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        return Step(reply, close=True, close_delay_s=self.config.failed_authentication_delay_ms / 1000)

    async def step(self, req: kp.RequestFrame) -> Step:
        """Answer one request received before the login completed (ApiVersions is the wire's own)."""
        if req.api_key == kp.SASL_HANDSHAKE and self.state is AuthState.HANDSHAKE:
            mechanism = kp.sasl_handshake_mechanism(req)
            enabled = self.config.mechanisms
            if (
                req.api_version == 0
            ):  # the raw-token flow would follow; every client here uses SaslAuthenticate
                log.info("connection %s: SaslHandshake v0 (raw SASL tokens) is not supported", self.peer)
                self._to(AuthState.FAILED)
                return Step(
                    kp.sasl_handshake_response(req, ErrorCode.UNSUPPORTED_VERSION, enabled), close=True
                )
            if mechanism not in enabled:
                log.info("connection %s: SASL mechanism %r is not enabled", self.peer, mechanism)
                self._to(AuthState.FAILED)
                reply = kp.sasl_handshake_response(req, ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled)
                return Step(reply, close=True)
            self.mechanism = mechanism
            self._to(AuthState.AUTHENTICATE)
            return Step(kp.sasl_handshake_response(req, ErrorCode.NONE, enabled))
        if req.api_key == kp.SASL_AUTHENTICATE and self.state is AuthState.AUTHENTICATE:
            token = kp.sasl_auth_bytes(req)
            if self.mechanism == PLAIN:
                try:
                    user = plain_authenticate(token, dict(self.config.plain_users))
                except SaslFailure as exc:
                    return self._fail(req, str(exc))
                return self._done(req, user, b"")
            return await self._scram_step(req, token)
        # Kafka: any other request before authentication is an illegal SASL state; the connection is closed.
        log.info(
            "connection %s: %s before SASL authentication completed (state %s), closing",
            self.peer,
            kp.API_NAMES.get(req.api_key, req.api_key),
            self.state.value,
        )
        if self.state is not AuthState.FAILED:
            self._to(AuthState.FAILED)
        return Step(None, close=True)

    async def _scram_step(self, req: kp.RequestFrame, token: bytes) -> Step:
        assert self.mechanism is not None and self.config.scram_lookup is not None
        try:
            if self._scram is None:
                self._scram = ScramServer(self.mechanism)
                first = self._scram.client_first(token)
                cred = await self._credential(first.username, self.mechanism)
                server_first = self._scram.server_first(cred, secrets.token_urlsafe(24))
                self._to(AuthState.AUTHENTICATE)
                return Step(kp.sasl_authenticate_response(req, ErrorCode.NONE, None, server_first))
            server_final = self._scram.client_final(token)
        except ScramError as exc:
            return self._fail(req, f"Authentication failed during authentication due to {exc}")
        user = self._scram.username
        assert user is not None
        return self._done(req, user, server_final)

    async def _credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The user's stored credential; None (the login then fails at the proof with SASL_AUTHENTICATION_FAILED,
        exactly as for an unknown user) when it cannot be read: a malformed `/config/users/<user>` znode, any
        parse failure, ZooKeeper unavailable. Fail closed, reported rate-limited."""
        assert self.config.scram_lookup is not None
        try:
            return await self.config.scram_lookup(user, mechanism)
        except Exception as exc:
            _say.log(
                logging.WARNING,
                "scram_credential",
                "connection %s: SCRAM %s credential of user %r unusable, the login fails: %s",
                self.peer,
                mechanism,
                user[:64],
                str(exc)[:300]
                if isinstance(exc, ZkcoordError)
                else f"{type(exc).__name__}: {str(exc)[:200]}",
            )
            return None

    def _done(self, req: kp.RequestFrame, user: str, token: bytes) -> Step:
        self._to(AuthState.AUTHENTICATED)
        self.principal = principal(user)
        log.info("connection %s: authenticated as %s with %s", self.peer, self.principal, self.mechanism)
        return Step(kp.sasl_authenticate_response(req, ErrorCode.NONE, None, token))


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener requires: TLS (a server context) and/or SASL (its config); neither is PLAINTEXT."""

    tls: ssl.SSLContext | None = None
    sasl: SaslConfig | None = None

    @property
    def protocol(self) -> str:
        """Kafka's security protocol name for what this listener requires."""
        if self.sasl is not None:
            return "SASL_SSL" if self.tls is not None else "SASL_PLAINTEXT"
        return "SSL" if self.tls is not None else "PLAINTEXT"

    def authenticator(self, peer: str) -> SaslAuthenticator | None:
        return SaslAuthenticator(self.sasl, peer) if self.sasl is not None else None

    def session(self, ssl_object: ssl.SSLObject | None, host: str, peer: str) -> Session | None:
        """Who a new connection is once its TLS handshake is done: on an SSL listener Kafka's principal for the
        client certificate (`User:<subject DN>`, `User:ANONYMOUS` without one); on a SASL listener anonymous
        until the login names it (Kafka takes the principal from SASL there, whatever the certificate). None
        when the certificate's subject cannot be read: the connection is closed rather than let in anonymous."""
        if self.sasl is not None or self.tls is None or ssl_object is None:
            return Session(host=host)
        try:
            name = ssl_principal(ssl_object.getpeercert(binary_form=True))
        except CertificateParseError as exc:
            log.warning("connection %s: client certificate subject unreadable (%s), closing", peer, exc)
            return None
        log.debug("connection %s: TLS principal %s", peer, name)
        return Session(name, host)


PLAINTEXT_SECURITY = ListenerSecurity()
ANONYMOUS_PRINCIPAL = ANONYMOUS
