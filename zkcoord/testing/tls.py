"""PEM files for tests of TLS listeners: a throw-away CA and a server certificate for 127.0.0.1 signed by it,
made with the `openssl` command line (a Debian package of the test environment)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(d: Path) -> tuple[Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it, in `d`; returns (ca.pem, keystore.pem), the
    keystore holding the certificate and its key (Kafka's ssl.keystore.type=PEM)."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=zkcoord-test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
             "-out", "server.csr", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "server.pem", cwd=d)  # fmt: skip
    keystore = d / "keystore.pem"
    keystore.write_text((d / "server.pem").read_text() + (d / "server.key").read_text())
    return d / "ca.pem", keystore
