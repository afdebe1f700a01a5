"""How the proxy connects to a real broker: the security of `--command-config FILE` (Kafka's client properties,
read by zkcoord.security.client_config) turned into a TLS client context and a SASL login (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) done by the proxy itself on each upstream connection, once its client has logged in to the proxy,
before any other client frame than an ApiVersions is forwarded on it.

Guarantees: a property the proxy cannot honour is a ConfigError naming it (and the file) before anything binds;
the login is a sans-IO exchange over Kafka's SaslHandshake v1 + SaslAuthenticate v1 frames, every answer read
with a size bound, and a broker's refusal is an `UpstreamLoginFailed` carrying the broker's error code and message
(the client's connection is then closed, nothing of it forwarded); a SCRAM server signature that does not verify
fails the login (the proxy never talks to a broker that cannot prove it knows the credential); the iteration count
a broker asks for is bounded, so a hostile broker cannot make the proxy spin.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.security.client_config import read_command_config
from zkcoord.security.scram import HASHES, hash_name, salted_password

SASL_MECHANISMS = ("PLAIN", *sorted(HASHES))
# Kafka's ScramMechanism bounds: a broker asking for fewer iterations is refused (as Kafka's client does), and
# more than its maximum would only cost the proxy CPU on every connection.
SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS = 4096, 16384
MAX_LOGIN_ANSWER_BYTES = 64 * 1024  # a SaslHandshake/SaslAuthenticate answer is a few hundred bytes
CLIENT_ID = b"zkcoord-proxy"

_SIZE = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_HANDSHAKE, _AUTHENTICATE = 17, 36


class UpstreamLoginFailed(ZkcoordError):
    """The broker refused the proxy's login (or answered something that is not a login answer)."""

    def __init__(self, message: str, error_code: int = -1) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class UpstreamSecurity:
    """`security.protocol` toward the brokers, with its TLS context and SASL credentials (PLAINTEXT: neither)."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)
    check_hostname: bool = True
    _salted: dict[tuple[bytes, int], bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None

    async def connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """An upstream connection to host:port, TLS-wrapped and logged in as this config says."""
        reader, writer = await self.open(host, port)
        await self.login(reader, writer)
        return reader, writer

    async def open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """An upstream connection to host:port, TLS-wrapped as this config says, not logged in yet (a broker
        answers ApiVersions before the login)."""
        if self.tls is not None:
            server_name = host if self.check_hostname else None
            return await asyncio.open_connection(host, port, ssl=self.tls, server_hostname=server_name)
        return await asyncio.open_connection(host, port)

    async def login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The proxy's own SASL login on an opened connection (nothing without SASL); the connection is closed
        when it fails."""
        if self.mechanism is not None:
            try:
                await self._login(reader, writer)
            except BaseException:
                writer.close()
                raise

    async def _login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.mechanism is not None
        writer.write(handshake_request(1, self.mechanism))
        code, enabled = parse_handshake_answer(await _answer(reader, 1))
        if code != 0:
            raise UpstreamLoginFailed(
                f"SaslHandshake {self.mechanism}: error {code}, the broker enables {', '.join(enabled) or 'none'}",
                code,
            )
        if self.mechanism == "PLAIN":
            token = b"\0" + self.username.encode() + b"\0" + self.password.encode()
            writer.write(authenticate_request(2, token))
            parse_authenticate_answer(await _answer(reader, 2))
            return
        client = ScramClient(self.mechanism, self.username, self.password, self._salted)
        writer.write(authenticate_request(2, client.first()))
        server_first = parse_authenticate_answer(await _answer(reader, 2))
        writer.write(authenticate_request(3, client.final(server_first)))
        client.verify(parse_authenticate_answer(await _answer(reader, 3)))


PLAINTEXT = UpstreamSecurity()


def upstream_security(path: str | None) -> UpstreamSecurity:
    """The upstream security of a `--command-config` file (PLAINTEXT without one). What the file may hold is
    zkcoord.security.client_config's (an unknown key is refused there); here what the proxy cannot use is refused:
    a SASL mechanism other than PLAIN/SCRAM, TLS files that do not load."""
    if not path:
        return PLAINTEXT
    return from_kafka_python(read_command_config(path), f"--command-config {path}")


def from_kafka_python(kw: Mapping[str, Any], source: str) -> UpstreamSecurity:
    protocol = str(kw.get("security_protocol", "PLAINTEXT"))
    sasl = protocol.startswith("SASL_")
    tls = protocol in ("SSL", "SASL_SSL")
    mechanism: str | None = None
    if sasl:
        mechanism = str(kw.get("sasl_mechanism", "GSSAPI"))  # Kafka's default mechanism
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"{source}: sasl.mechanism={mechanism}: the proxy logs in with {', '.join(SASL_MECHANISMS)} only"
            )
    else:
        for key, prop in (("sasl_mechanism", "sasl.mechanism"), ("sasl_plain_username", "sasl.jaas.config")):
            if key in kw:
                raise ConfigError(f"{source}: {prop} is set but security.protocol={protocol} has no SASL")
    context: ssl.SSLContext | None = None
    check_hostname = bool(kw.get("ssl_check_hostname", True))
    if tls:
        context = _client_context(kw, source, check_hostname)
    else:
        for key, prop in (
            ("ssl_cafile", "ssl.truststore.location"),
            ("ssl_certfile", "ssl.keystore.location"),
        ):
            if key in kw:
                raise ConfigError(f"{source}: {prop} is set but security.protocol={protocol} has no TLS")
    return UpstreamSecurity(
        protocol,
        context,
        mechanism,
        str(kw.get("sasl_plain_username", "")),
        str(kw.get("sasl_plain_password", "")),
        check_hostname,
    )


def _client_context(kw: Mapping[str, Any], source: str, check_hostname: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = check_hostname
    cafile = kw.get("ssl_cafile")
    if cafile is not None:
        try:
            ctx.load_verify_locations(cafile=str(cafile))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{source}: ssl.truststore.location={cafile}: cannot load PEM CAs: {exc}"
            ) from None
    certfile = kw.get("ssl_certfile")
    if certfile is not None:
        try:
            ctx.load_cert_chain(str(certfile), kw.get("ssl_keyfile"), kw.get("ssl_password"))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{source}: ssl.keystore.location={certfile}: cannot load the PEM certificate and key: {exc}"
            ) from None
    elif "ssl_keyfile" in kw:
        raise ConfigError(f"{source}: ssl.key.location is set without ssl.keystore.location")
    return ctx


# -- the frames of the login (Kafka's SaslHandshake v1, SaslAuthenticate v1: neither is flexible) ---------------


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    head = _REQ_HEAD.pack(api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return _SIZE.pack(len(head) + len(body)) + head + body


def handshake_request(correlation_id: int, mechanism: str) -> bytes:
    name = mechanism.encode()
    return _request(_HANDSHAKE, 1, correlation_id, struct.pack(">h", len(name)) + name)


def authenticate_request(correlation_id: int, token: bytes) -> bytes:
    return _request(_AUTHENTICATE, 1, correlation_id, _SIZE.pack(len(token)) + token)


async def _answer(reader: asyncio.StreamReader, correlation_id: int) -> memoryview:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if not 4 <= size <= MAX_LOGIN_ANSWER_BYTES:
        raise UpstreamLoginFailed(f"login answer of {size} bytes, expected 4..{MAX_LOGIN_ANSWER_BYTES}")
    frame = memoryview(await reader.readexactly(size))
    (corr,) = _SIZE.unpack_from(frame)
    if corr != correlation_id:
        raise UpstreamLoginFailed(f"login answer for correlation id {corr}, expected {correlation_id}")
    return frame[4:]


class _Body:
    """A bounds-checked reader of an answer body: any overrun is an UpstreamLoginFailed, never an IndexError."""

    def __init__(self, buf: memoryview, what: str) -> None:
        self.buf, self.pos, self.what = buf, 0, what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise UpstreamLoginFailed(f"{self.what} answer truncated at byte {self.pos}")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(_SIZE.unpack(self.take(4))[0])

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")


def parse_handshake_answer(body: memoryview) -> tuple[int, list[str]]:
    r = _Body(body, "SaslHandshake")
    code = r.int16()
    count = r.int32()
    if count > 64:
        raise UpstreamLoginFailed(f"SaslHandshake answer lists {count} mechanisms")
    return code, [r.string() or "" for _ in range(max(count, 0))]


def parse_authenticate_answer(body: memoryview) -> bytes:
    """The server's token of a SaslAuthenticate v1 answer; its error (code and message) as UpstreamLoginFailed."""
    r = _Body(body, "SaslAuthenticate")
    code = r.int16()
    message = r.string()
    n = r.int32()
    token = r.take(n) if n > 0 else b""
    if code != 0:
        raise UpstreamLoginFailed(f"SaslAuthenticate: error {code}: {message}", code)
    return token


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """The client side of one SCRAM exchange (RFC 5802, no channel binding, as Kafka's clients): `first()`,
    `final(server_first)`, `verify(server_final)`. `salted` caches Hi(password, salt, i) per (salt, i): a broker
    keeps one salt per user, so each connection after the first skips the PBKDF2 work."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        salted: dict[tuple[bytes, int], bytes] | None = None,
    ) -> None:
        self.mechanism, self.username, self.password = mechanism, username, password
        self.hash = hash_name(mechanism)
        self.nonce = secrets.token_urlsafe(24)
        self._salted = salted if salted is not None else {}
        self._bare = f"n={_escape(username)},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            attrs = dict(a.split("=", 1) for a in server_first.decode("ascii").split(","))
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"], validate=True), int(attrs["i"])
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            raise UpstreamLoginFailed(f"SCRAM server-first unreadable: {exc!r}") from None
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise UpstreamLoginFailed("SCRAM server-first: the nonce does not extend the proxy's")
        if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
            raise UpstreamLoginFailed(
                f"SCRAM server-first: {iterations} iterations, the proxy accepts "
                f"{SCRAM_MIN_ITERATIONS}..{SCRAM_MAX_ITERATIONS}"
            )
        key = (salt, iterations)
        salted = self._salted.get(key)
        if salted is None:
            salted = salted_password(self.mechanism, self.password, salt, iterations)
            if len(self._salted) >= 16:  # one entry per (broker user, salt): a handful
                self._salted.clear()
            self._salted[key] = salted
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{server_first.decode('ascii')},{without_proof}".encode()
        client_key = _hmac(self.hash, salted, b"Client Key")
        stored = hashlib.new(self.hash, client_key).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, _hmac(self.hash, stored, auth_message), strict=True))
        self._server_signature = _hmac(self.hash, _hmac(self.hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        if not self._server_signature:
            raise UpstreamLoginFailed("SCRAM server-final before the client-final was sent")
        text = server_final.decode("ascii", "replace")
        if text.startswith("e="):
            raise UpstreamLoginFailed(f"SCRAM server-final: {text[2:200]}")
        try:
            signature = base64.b64decode(text[2:], validate=True) if text.startswith("v=") else b""
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise UpstreamLoginFailed("SCRAM server-final: the broker's signature does not verify")
