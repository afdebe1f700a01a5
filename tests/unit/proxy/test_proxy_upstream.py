"""The proxy's side of the broker connection (zkcoord.proxy.upstream): `--command-config` read into what the
proxy can use, refused by property name otherwise (exit 2 from the CLI, nothing contacted); the SCRAM client
checked against zkcoord's own SCRAM server (the one `serve` logs clients in with) and against a broker that
cannot prove the credential; the login-answer readers fuzzed."""

from __future__ import annotations

import base64
import contextlib
import ssl
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.cli import main
from zkcoord.errors import ConfigError
from zkcoord.proxy.upstream import (
    PLAINTEXT,
    SCRAM_MAX_ITERATIONS,
    ScramClient,
    UpstreamLoginFailed,
    authenticate_request,
    handshake_request,
    parse_authenticate_answer,
    parse_handshake_answer,
    upstream_security,
)
from zkcoord.security.scram import ScramCredential, ScramError, ScramServer
from zkcoord.testing.tls import make_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_scram_client_logs_in_to_zkcoords_scram_server_and_checks_its_signature(mechanism: str) -> None:
    cred = ScramCredential.from_password(mechanism, "s3cret", b"salt-0123456789", 4096)
    salted: dict[tuple[bytes, int], bytes] = {}
    for _ in range(2):  # the second login reuses the salted password
        client, server = ScramClient(mechanism, "al,i=ce", "s3cret", salted), ScramServer(mechanism)
        first = server.client_first(client.first())
        assert first.username == "al,i=ce"  # escaped on the wire, as RFC 5802 says
        server_first = server.server_first(cred, "server-nonce")
        client.verify(server.client_final(client.final(server_first)))
    assert len(salted) == 1


def test_a_wrong_password_fails_at_the_server_and_a_forged_server_signature_at_the_client() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-256", "right", b"salt-0123456789", 4096)
    client, server = ScramClient("SCRAM-SHA-256", "bob", "wrong"), ScramServer("SCRAM-SHA-256")
    server.client_first(client.first())
    with pytest.raises(ScramError, match="invalid credentials"):
        server.client_final(client.final(server.server_first(cred, "n")))
    client, server = ScramClient("SCRAM-SHA-256", "bob", "right"), ScramServer("SCRAM-SHA-256")
    server.client_first(client.first())
    client.final(server.server_first(cred, "n"))
    forged = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(UpstreamLoginFailed, match="signature does not verify"):
        client.verify(forged)
    with pytest.raises(UpstreamLoginFailed, match="server-final: nope"):
        client.verify(b"e=nope")


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (b"r=other,s=AAAA,i=4096", "does not extend"),
        (b"r={nonce}x,s=AAAA,i=4095", "4095 iterations"),
        (b"r={nonce}x,s=AAAA,i=%d" % (SCRAM_MAX_ITERATIONS + 1), "iterations"),
        (b"r={nonce}x,s=!!,i=4096", "unreadable"),
        (b"garbage", "unreadable"),
    ],
)
def test_a_server_first_the_client_cannot_trust_is_refused(server_first: bytes, match: str) -> None:
    client = ScramClient("SCRAM-SHA-256", "bob", "pw")
    with pytest.raises(UpstreamLoginFailed, match=match):
        client.final(server_first.replace(b"{nonce}", client.nonce.encode()))


def test_login_frames_are_kafkas_saslhandshake_v1_and_saslauthenticate_v1() -> None:
    frame = handshake_request(1, "SCRAM-SHA-512")
    size, key, version, corr = struct.unpack_from(">ihhi", frame)
    assert (size, key, version, corr) == (len(frame) - 4, 17, 1, 1) and frame.endswith(
        b"\x00\x0dSCRAM-SHA-512"
    )
    frame = authenticate_request(2, b"tok")
    assert struct.unpack_from(">ihhi", frame)[1:] == (36, 1, 2) and frame.endswith(b"\x00\x00\x00\x03tok")
    ok = struct.pack(">hi", 0, 2) + b"\x00\x05PLAIN\x00\x0dSCRAM-SHA-256"
    assert parse_handshake_answer(memoryview(ok)) == (0, ["PLAIN", "SCRAM-SHA-256"])
    refused = struct.pack(">hh", 58, 6) + b"denied" + struct.pack(">i", -1) + struct.pack(">q", 0)
    with pytest.raises(UpstreamLoginFailed, match="error 58: denied") as info:
        parse_authenticate_answer(memoryview(refused))
    assert info.value.error_code == 58


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_login_answer_readers_raise_only_their_own_error_on_any_bytes(data: bytes) -> None:
    for read in (parse_handshake_answer, parse_authenticate_answer):
        with contextlib.suppress(UpstreamLoginFailed):
            read(memoryview(data))
    with pytest.raises(UpstreamLoginFailed):  # out of turn: nothing verifies before the client-final
        ScramClient("SCRAM-SHA-256", "u", "p").verify(data)
    client = ScramClient("SCRAM-SHA-256", "u", "p")
    with contextlib.suppress(UpstreamLoginFailed):
        client.final(data)
        with pytest.raises(UpstreamLoginFailed):  # random bytes are never the server's signature
            client.verify(data)


def test_no_file_is_plaintext_and_a_sasl_ssl_file_gives_a_verifying_context_and_credentials(
    tmp_path: Path,
) -> None:
    assert upstream_security(None) is PLAINTEXT and not PLAINTEXT.sasl
    ca, keystore = make_certificates(tmp_path)
    sec = upstream_security(_file(tmp_path, (
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="p" '
        'password="q";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\nssl.keystore.location={keystore}\n"
    )))  # fmt: skip
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "p",
        "q",
    )
    assert sec.tls is not None and sec.tls.verify_mode is ssl.CERT_REQUIRED and sec.tls.check_hostname
    assert "q" not in repr(sec)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n",
         "sasl.mechanism=GSSAPI: the proxy logs in with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 only"),
        ("security.protocol=SASL_PLAINTEXT\nsasl.username=a\nsasl.password=b\n", "sasl.mechanism=GSSAPI"),
        ("security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n",
         "ssl.truststore.location=/nonexistent/ca.pem: cannot load"),
        ("security.protocol=SSL\nssl.keystore.location=/nonexistent/k.pem\n", "ssl.keystore.location=/nonexistent"),
        ("security.protocol=PLAINTEXT\nsasl.mechanism=PLAIN\n", "sasl.mechanism is set but security.protocol=PLAINTEXT"),
        ("security.protocol=SASL_PLAINTEXT\nssl.truststore.location=/x\nsasl.mechanism=PLAIN\nsasl.username=a\n"
         "sasl.password=b\n", "ssl.truststore.location is set but security.protocol=SASL_PLAINTEXT has no TLS"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "needs sasl.jaas.config"),
        ("bootstrap.servers=x:1\n", "unknown client security property 'bootstrap.servers'"),
    ],
)  # fmt: skip
def test_a_file_the_proxy_cannot_use_is_refused_by_property(tmp_path: Path, text: str, match: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError, match=match) as info:
        upstream_security(path)
    assert path in str(info.value)


def test_the_cli_exits_2_naming_the_property_before_contacting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(
        tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.username=a\nsasl.password=b\n"
    )
    # 127.0.0.1:1: nothing listens there; the refusal comes before any ZooKeeper connection is tried
    code = main(["proxy", "--zk", "127.0.0.1:1", "--listen", "127.0.0.1:1", "--node-id", "9", "--data-dir",
                 str(tmp_path / "d"), "--command-config", path])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert f"--command-config {path}: sasl.mechanism=OAUTHBEARER" in err
    assert not (tmp_path / "d").exists()


def test_the_cli_takes_one_listener(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], certs: tuple[Path, Path]
) -> None:
    base = ["proxy", "--zk", "127.0.0.1:1", "--node-id", "9", "--data-dir", str(tmp_path / "d")]
    assert main(base) == 2
    assert (
        "give --listen HOST:PORT (PLAINTEXT) or --listeners PROTOCOL://HOST:PORT" in capsys.readouterr().err
    )
    assert main([*base, "--listen", "127.0.0.1:1", "--listeners", "SSL://127.0.0.1:2",
                 "--ssl.keystore.location", str(certs[1])]) == 2  # fmt: skip
    assert "zkcoord proxy serves one listener" in capsys.readouterr().err
