"""The TLS principal: a certificate's subject printed as Java's X500Principal.getName() (RFC 2253) prints it,
Kafka's `User:<DN>` with the DEFAULT mapping rule, `User:ANONYMOUS` without a certificate."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from zkcoord.security.x500 import (
    Attribute,
    CertificateParseError,
    certificate_subject,
    escape_value,
    rfc2253,
    ssl_principal,
)

CN, ORG, OU, C, DC, EMAIL = (
    "2.5.4.3",
    "2.5.4.10",
    "2.5.4.11",
    "2.5.4.6",
    "0.9.2342.19200300.100.1.25",
    ("1.2.840.113549.1.9.1"),
)
UTF8, PRINTABLE, IA5, OCTETS, BMP = 0x0C, 0x13, 0x16, 0x04, 0x1E


def _a(oid: str, text: str, tag: int = UTF8) -> Attribute:
    return Attribute(oid, tag, text.encode("utf-16-be" if tag == BMP else "utf-8"))


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        ("plain value", "plain value"),
        ("Acme, Inc.", "Acme\\, Inc."),
        ("a+b", "a\\+b"),
        ('say "hi"', 'say \\"hi\\"'),
        ("back\\slash", "back\\\\slash"),
        ("<tag>", "\\<tag\\>"),
        ("semi;colon", "semi\\;colon"),
        ("a=b", "a\\=b"),  # Java escapes '=' too
        ("#leading", "\\#leading"),
        ("mid#hash", "mid\\#hash"),  # and every '#', not only a leading one
        (" leading", "\\ leading"),
        ("  two leading", "\\ \\ two leading"),
        ("trailing ", "trailing\\ "),
        ("trailing two  ", "trailing two\\ \\ "),
        ("in the middle", "in the middle"),
        ("   ", "\\ \\ \\ "),
        ("nul\x00byte", "nul\\00byte"),
        ("ünïcödé", "ünïcödé"),
        ("", ""),
    ],
)
def test_values_are_escaped_as_java_prints_them(value: str, printed: str) -> None:
    assert escape_value(value) == printed


def test_rdns_are_printed_most_specific_first() -> None:
    # ASN.1 order as in the certificate: C, O, OU, CN.
    rdns = ((_a(C, "US", PRINTABLE),), (_a(ORG, "Acme, Inc."),), (_a(OU, "ops"),), (_a(CN, "alice"),))
    assert rfc2253(rdns) == "CN=alice,OU=ops,O=Acme\\, Inc.,C=US"


def test_a_multi_valued_rdn_keeps_its_encoded_order_joined_with_plus() -> None:
    rdns = ((_a(DC, "org", IA5),), (_a(OU, "ops"), _a(CN, "alice")))
    assert rfc2253(rdns) == "OU=ops+CN=alice,DC=org"


def test_a_type_without_an_rfc2253_keyword_is_its_oid_with_the_der_value_in_hex() -> None:
    # Java names only CN, C, L, ST, O, OU, STREET, DC, UID; emailAddress is printed as OID=#<DER hex>.
    rdns = ((_a(EMAIL, "a@b.c", IA5),), (_a(CN, "alice"),))
    assert rfc2253(rdns) == "CN=alice,1.2.840.113549.1.9.1=#16056140622e63"


def test_a_keyword_type_with_a_non_string_value_is_printed_in_hex() -> None:
    assert rfc2253(((Attribute(CN, OCTETS, b"\x01\xff"),),)) == "CN=#040201ff"


def test_a_bmp_string_is_decoded_as_utf16() -> None:
    assert rfc2253(((_a(CN, "bmp, name", BMP),),)) == "CN=bmp\\, name"


def test_no_certificate_is_anonymous() -> None:
    assert ssl_principal(None) == "User:ANONYMOUS"
    assert ssl_principal(b"") == "User:ANONYMOUS"


@pytest.mark.parametrize(
    "der", [b"\x30", b"\x04\x00", b"\x30\x05\x30\x03\x02\x01\x01", b"\x30\x84\xff\xff\xff\xff"]
)
def test_a_certificate_that_does_not_parse_is_an_error(der: bytes) -> None:
    with pytest.raises(CertificateParseError):
        certificate_subject(der)


def test_a_real_certificate_made_by_openssl(tmp_path: Path) -> None:
    """The subject read from an openssl-made certificate, cross-checked against the stdlib's decoding."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-multivalue-rdn", "-subj",
         "/DC=org/DC=example/O=Acme, Inc./OU=ops+CN=alice/emailAddress=a@example.org",
         "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem")],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    der = ssl.PEM_cert_to_DER_cert((tmp_path / "c.pem").read_text())
    subject = certificate_subject(der)
    decoded = ssl._ssl._test_decode_cert(str(tmp_path / "c.pem"))["subject"]  # type: ignore[attr-defined]
    assert [[a.content.decode() for a in rdn] for rdn in subject] == [[v for _, v in rdn] for rdn in decoded]
    email_hex = bytes([0x16, 13]).hex() + b"a@example.org".hex()
    assert ssl_principal(der) == (
        f"User:1.2.840.113549.1.9.1=#{email_hex},OU=ops+CN=alice,O=Acme\\, Inc.,DC=example,DC=org"
    )
