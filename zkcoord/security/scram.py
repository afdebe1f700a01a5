"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka uses them: the key derivations, the credential
string Kafka stores in `/config/users/<user>` (`salt=..,stored_key=..,server_key=..,iterations=N`), and the
server side of one exchange as a sans-IO state machine, with salt and nonce handed in by the caller.

Guarantees: a client proof is accepted only if it hashes to the stored key (constant-time comparison); every
message that does not fit the grammar or the state is a `ScramError` naming what was wrong, and an oversized one
(message, user name, nonce, extensions) is refused on its length before any per-character work; credentials made
here and by Kafka's `kafka-configs.sh --add-config 'SCRAM-SHA-256=[password=...]'` are interchangeable.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
from dataclasses import dataclass, field

from zkcoord.errors import ConfigError, ErrorCode, ZkcoordError

# Kafka's ScramMechanism: the hash and the smallest iteration count it accepts for each mechanism.
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 1 << 20  # bound the work one stored credential can make the server do per login

# Bounds on what an unauthenticated client may send, checked by length before any per-field work (Kafka bounds
# only the frame, sasl.server.max.receive.size; real clients send a few hundred bytes): a whole client message,
# the user name (as sent, escaped), the client nonce (kafka-python and librdkafka send 32 characters, Java 26),
# the combined nonce of client-final (librdkafka 2.0 repeats its own nonce in front), and the extensions.
MAX_MESSAGE_BYTES = 8192
MAX_USERNAME_BYTES = 1024
MAX_NONCE_CHARS = 1024
MAX_EXTENSIONS = 16


class ScramError(ZkcoordError):
    """A SCRAM exchange that fails: a malformed message, a message out of turn, or wrong credentials."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


def hash_name(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ConfigError(f"{mechanism!r} is not a SCRAM mechanism ({', '.join(sorted(HASHES))})") from None


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (PBKDF2 with HMAC; SASLprep is not applied, as in Kafka)."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps for one user and mechanism: never the password, only the keys derived from it."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, salt: bytes, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramCredential:
        if iterations < MIN_ITERATIONS:
            raise ConfigError(f"{mechanism} needs at least {MIN_ITERATIONS} iterations, got {iterations}")
        name = hash_name(mechanism)
        salted = salted_password(mechanism, password, salt, iterations)
        client_key = _hmac(name, salted, b"Client Key")
        stored = hashlib.new(name, client_key).digest()
        server = _hmac(name, salted, b"Server Key")
        return cls(salt, stored, server, iterations)

    def to_kafka(self) -> str:
        """Kafka's `ScramCredentialUtils.credentialToString` form."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        """Parse Kafka's stored form; ConfigError naming what is wrong (never echoing the keys)."""
        props: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ConfigError(f"SCRAM credential: {token[:20]!r} is not key=value")
            props[key] = value
        wanted = {"salt", "stored_key", "server_key", "iterations"}
        if set(props) != wanted:
            raise ConfigError(
                f"SCRAM credential: wants exactly {', '.join(sorted(wanted))}, has {', '.join(sorted(props))}"
            )
        try:
            salt, stored, server = (
                base64.b64decode(props[k], validate=True) for k in ("salt", "stored_key", "server_key")
            )
            iterations = int(props["iterations"])
        except (binascii.Error, ValueError) as exc:
            raise ConfigError(f"SCRAM credential: {exc}") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ConfigError(
                f"SCRAM credential: iterations {iterations} outside {MIN_ITERATIONS}..{MAX_ITERATIONS}"
            )
        return cls(salt, stored, server, iterations)


def _attributes(message: str, what: str, at_most: int) -> list[tuple[str, str]]:
    count = message.count(",") + 1  # counted in C before anything is split
    if count > at_most:
        raise ScramError(
            f"SCRAM {what}: {count} attributes, at most {at_most} (extensions <= {MAX_EXTENSIONS})"
        )
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"SCRAM {what}: attribute {part[:20]!r} is not a=value")
        out.append((part[0], part[2:]))
    return out


def _sasl_name(value: str) -> str:
    """RFC 5802 saslname: ',' and '=' travel as '=2C' and '=3D'; any other '=' is malformed."""
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ScramError("SCRAM client-first: user name has an invalid '=' escape")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramState(enum.Enum):
    RECEIVE_CLIENT_FIRST = "receive-client-first"
    RECEIVE_CLIENT_FINAL = "receive-client-final"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ClientFirst:
    username: str
    nonce: str
    gs2_header: str
    bare: str  # client-first-message-bare, part of the AuthMessage
    extensions: tuple[tuple[str, str], ...]


def _check_size(message: bytes, what: str) -> str:
    """The message as text, once its length is known to be within MAX_MESSAGE_BYTES (checked before decoding)."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError(f"SCRAM {what}: message of {len(message)} bytes, at most {MAX_MESSAGE_BYTES}")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"SCRAM {what}: not UTF-8") from None


def _valid_nonce(nonce: str) -> bool:
    """RFC 5802 `printable`: %x21-2B / %x2D-7E (no ',', which cannot be here after the split), checked by str
    methods in C rather than a Python loop per character."""
    return bool(nonce) and nonce.isascii() and nonce.isprintable() and " " not in nonce


def parse_client_first(message: bytes) -> ClientFirst:
    """`n,[a=authzid],n=user,r=nonce[,ext...]`; channel binding ('p=') is refused, as Kafka does. Sizes are
    bounded (MAX_MESSAGE_BYTES, MAX_USERNAME_BYTES, MAX_NONCE_CHARS, MAX_EXTENSIONS) before any per-field work."""
    text = _check_size(message, "client-first")
    flag, sep1, rest = text.partition(",")
    authzid, sep2, bare = rest.partition(",")
    if not (sep1 and sep2):
        raise ScramError("SCRAM client-first: missing the GS2 header")
    if flag not in ("n", "y"):
        raise ScramError(f"SCRAM client-first: channel binding flag {flag[:5]!r} is not supported")
    attrs = _attributes(bare, "client-first", 2 + MAX_EXTENSIONS)
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
        raise ScramError("SCRAM client-first: wants n=user,r=nonce")
    sent_name, nonce = attrs[0][1], attrs[1][1]
    if len(sent_name.encode("utf-8")) > MAX_USERNAME_BYTES:
        raise ScramError(f"SCRAM client-first: user name longer than {MAX_USERNAME_BYTES} bytes")
    if len(nonce) > MAX_NONCE_CHARS:
        raise ScramError(f"SCRAM client-first: nonce of {len(nonce)} characters, at most {MAX_NONCE_CHARS}")
    username = _sasl_name(sent_name)
    if authzid and authzid != f"a={sent_name}":
        raise ScramError("SCRAM client-first: authorization id differs from the user name")
    if not username:
        raise ScramError("SCRAM client-first: empty user name")
    if not _valid_nonce(nonce):
        raise ScramError("SCRAM client-first: nonce is empty or not printable ASCII")
    return ClientFirst(username, nonce, f"{flag},{authzid},", bare, tuple(attrs[2:]))


class ScramServer:
    """One server-side exchange. `client_first()` names the user; the caller looks the credential up and gives
    it, with a fresh server nonce, to `server_first()`; `client_final()` checks the proof and answers `v=...`."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._hash = hash_name(mechanism)
        self.state = ScramState.RECEIVE_CLIENT_FIRST
        self._first: ClientFirst | None = None
        self._credential: ScramCredential | None = None
        self._server_first = ""
        self._nonce = ""

    @property
    def username(self) -> str | None:
        return self._first.username if self._first is not None else None

    def _expect(self, state: ScramState) -> None:
        if self.state is not state:
            was, self.state = self.state, ScramState.FAILED
            raise ScramError(f"SCRAM message out of turn (state {was.value}, wanted {state.value})")

    def client_first(self, message: bytes) -> ClientFirst:
        self._expect(ScramState.RECEIVE_CLIENT_FIRST)
        try:
            self._first = parse_client_first(message)
        except ScramError:
            self.state = ScramState.FAILED
            raise
        return self._first

    def server_first(self, credential: ScramCredential | None, server_nonce: str) -> bytes:
        """The server-first message. With no credential (unknown user) the exchange still answers, with the
        given nonce and a salt of the same shape, and fails at the proof: an unknown user looks like a wrong
        password, as RFC 5802 §9 advises."""
        self._expect(ScramState.RECEIVE_CLIENT_FIRST)
        assert self._first is not None, "client_first() comes first"
        self._credential = credential
        cred = credential or ScramCredential(server_nonce.encode()[:16], b"", b"", DEFAULT_ITERATIONS)
        self._nonce = self._first.nonce + server_nonce
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={cred.iterations}"
        self.state = ScramState.RECEIVE_CLIENT_FINAL
        return self._server_first.encode()

    def client_final(self, message: bytes) -> bytes:
        """The server-final message (`v=signature`) when the proof holds; ScramError otherwise."""
        self._expect(ScramState.RECEIVE_CLIENT_FINAL)
        self.state = ScramState.FAILED  # until the proof is shown to hold
        assert self._first is not None
        text = _check_size(message, "client-final")
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final: no proof")
        attrs = dict(_attributes(without_proof, "client-final", 2 + MAX_EXTENSIONS))
        if len(attrs.get("r", "")) > 2 * MAX_NONCE_CHARS + len(self._nonce):
            raise ScramError("SCRAM client-final: nonce longer than a client nonce before the combined one")
        if attrs.get("c") != base64.b64encode(self._first.gs2_header.encode()).decode():
            raise ScramError("SCRAM client-final: channel binding does not match the GS2 header")
        # Kafka's ScramSaslServer accepts a nonce that ends with the server's (not only an equal one), and
        # librdkafka 2.0 relies on it: it sends its own nonce in front of the combined one. The proof is over the
        # message as sent, so this admits no login without the password.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("SCRAM client-final: nonce does not match")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except binascii.Error:
            raise ScramError("SCRAM client-final: proof is not base64") from None
        cred = self._credential
        auth_message = f"{self._first.bare},{self._server_first},{without_proof}".encode()
        if cred is None or len(proof) != len(cred.stored_key):
            raise ScramError(f"invalid credentials with SASL mechanism {self.mechanism}")
        signature = _hmac(self._hash, cred.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise ScramError(f"invalid credentials with SASL mechanism {self.mechanism}")
        self.state = ScramState.COMPLETE
        server_signature = _hmac(self._hash, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


def client_proof(mechanism: str, password: str, salt: bytes, iterations: int, auth_message: bytes) -> bytes:
    """The ClientProof a client sends (tests and the RFC 7677 example use it to check the server side)."""
    name = hash_name(mechanism)
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(name, salted, b"Client Key")
    stored = hashlib.new(name, client_key).digest()
    return bytes(a ^ b for a, b in zip(client_key, _hmac(name, stored, auth_message), strict=True))
