"""`ssl.client.auth` on a TLS listener, with real TLS handshakes in memory (ssl.MemoryBIO, no sockets): the
principal of an SSL listener's connection is its client certificate's subject, `User:ANONYMOUS` without one
(requested), a client without a certificate fails the handshake (required), none asks for none; a SASL_SSL
listener leaves the principal to the login; bad settings are refused before anything binds."""

from __future__ import annotations

import contextlib
import ssl
import subprocess
from pathlib import Path

import pytest

from zkcoord.cli import main
from zkcoord.security.sasl import PLAIN
from zkcoord.server.listener_security import ListenerSecurity, SaslConfig, tls_context


def _openssl(d: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=30)


def _ec_key(d: Path, name: str) -> None:
    _openssl(
        d, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", f"{name}.key"
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (O=Acme\\, Inc., CN=alice), all EC."""
    d = tmp_path_factory.mktemp("pki")
    _ec_key(d, "ca")
    _openssl(d, "req", "-x509", "-key", "ca.key", "-days", "1", "-subj", "/CN=test-ca", "-out", "ca.pem")
    for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/C=US/O=Acme, Inc./CN=alice")):
        _ec_key(d, name)
        _openssl(d, "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr")
        _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "1", "-out", f"{name}.pem")  # fmt: skip
    return d


def _handshake(server_ctx: ssl.SSLContext, pki: Path, with_cert: bool) -> ssl.SSLObject:
    """Run a TLS handshake in memory; returns the server side's SSLObject (raises ssl.SSLError on refusal)."""
    client_ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    client_ctx.check_hostname = False
    if with_cert:
        client_ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for side, obj in (("client", client), ("server", server)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server checks the client's certificate in its last flight; let the client read any
            # alert it sent, as a client's first read would.
            with contextlib.suppress(ssl.SSLWantReadError):
                client.read(1)
            return server
    raise AssertionError("the handshake did not finish")


def _ctx(pki: Path, client_auth: str) -> ssl.SSLContext:
    ca = pki / "ca.pem" if client_auth != "none" else None
    return tls_context(pki / "server.pem", pki / "server.key", ca, client_auth)


def test_required_names_the_principal_after_the_certificate_subject(pki: Path) -> None:
    security = ListenerSecurity(ctx := _ctx(pki, "required"))
    server = _handshake(ctx, pki, with_cert=True)
    session = security.session(server, "127.0.0.1", "127.0.0.1:1")
    assert session is not None
    assert session.principal == "User:CN=alice,O=Acme\\, Inc.,C=US"
    assert session.host == "127.0.0.1"


def test_required_refuses_a_client_without_a_certificate(pki: Path) -> None:
    with pytest.raises(ssl.SSLError):
        _handshake(_ctx(pki, "required"), pki, with_cert=False)


def test_requested_lets_a_client_without_a_certificate_in_as_anonymous(pki: Path) -> None:
    security = ListenerSecurity(ctx := _ctx(pki, "requested"))
    anonymous = security.session(_handshake(ctx, pki, with_cert=False), "h", "p")
    named = security.session(_handshake(ctx, pki, with_cert=True), "h", "p")
    assert anonymous is not None and anonymous.principal == "User:ANONYMOUS"
    assert named is not None and named.principal == "User:CN=alice,O=Acme\\, Inc.,C=US"


def test_none_asks_for_no_certificate(pki: Path) -> None:
    security = ListenerSecurity(ctx := _ctx(pki, "none"))
    server = _handshake(ctx, pki, with_cert=True)
    assert server.getpeercert(binary_form=True) is None
    session = security.session(server, "h", "p")
    assert session is not None and session.principal == "User:ANONYMOUS"


def test_on_sasl_ssl_the_certificate_names_no_principal(pki: Path) -> None:
    sasl = SaslConfig((PLAIN,), {"alice": "pw"})
    security = ListenerSecurity(ctx := _ctx(pki, "required"), sasl)
    session = security.session(_handshake(ctx, pki, with_cert=True), "h", "p")
    assert session is not None and session.principal == "User:ANONYMOUS"  # until the SASL login names it


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--ssl.client.auth", "required"], "checks client certificates against the CAs of --ssl.truststore"),
        (["--ssl.truststore.location", "CA"], "give --ssl.client.auth required or requested"),
        (
            [
                "--ssl.client.auth",
                "required",
                "--ssl.truststore.location",
                "CA",
                "--ssl.principal.mapping.rules",
                "RULE:^CN=(.*?),.*$/$1/",
            ],
            "only DEFAULT is supported",
        ),
    ],
)
def test_bad_client_auth_settings_are_refused_before_anything_binds(
    pki: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    flags = [str(pki / "ca.pem") if f == "CA" else f for f in flags]
    argv = ["serve", "--data-dir", str(tmp_path / "d"), "--listeners", "SSL://127.0.0.1:0",
            "--ssl.keystore.location", str(pki / "server.pem"), "--ssl.key.location", str(pki / "server.key"),
            *flags]  # fmt: skip
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
