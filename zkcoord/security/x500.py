"""Kafka's principal for a TLS client certificate, without I/O: the certificate's subject read from its DER
bytes and printed as Java's `X500Principal.getName()` prints it (RFC 2253), which Kafka's
`DefaultKafkaPrincipalBuilder` with the DEFAULT `ssl.principal.mapping.rules` makes `User:<DN>`.

Guarantees: the DN is Java's, character for character: RDNs most specific first (the reverse of the
certificate's ASN.1 order), the values of a multi-valued RDN joined with '+' in their encoded order, only
RFC 2253's keywords (CN, C, L, ST, O, OU, STREET, DC, UID) named, any other attribute as its dotted OID with the
DER value in lower-case hex (`1.2.840.113549.1.9.1=#1611...`); in string values each of , = + < > # ; " \\ is
backslash-escaped, NUL is `\\00`, and leading and trailing spaces (and CRs) are escaped one by one. A certificate
that does not parse raises CertificateParseError; no certificate is `User:ANONYMOUS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zkcoord.security.sasl import ANONYMOUS

# Java's AVAKeyword table, the entries it marks RFC 2253 compliant (sun.security.x509.AVA).
RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java prints as text (AVA.isDerString, non-canonical): the rest are printed as hex.
_UTF8, _PRINTABLE, _T61, _IA5, _GENERAL, _BMP = 0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E
_STRING_TAGS = frozenset({_UTF8, _PRINTABLE, _T61, _IA5, _GENERAL, _BMP})
_ESCAPED = frozenset(',=+<>#;"\\')  # Java escapes '=' and any '#' too, beyond RFC 2253's list
_SEQUENCE, _SET, _OID, _VERSION = 0x30, 0x31, 0x06, 0xA0


class CertificateParseError(ValueError):
    """The certificate's DER does not hold a subject zkcoord can read."""


@dataclass(frozen=True, slots=True)
class Attribute:
    """One AttributeTypeAndValue: its type as a dotted OID, and its value's DER tag and content bytes."""

    oid: str
    tag: int
    content: bytes

    def der(self) -> bytes:
        """The value's whole DER encoding (what Java prints in hex for a non-keyword type)."""
        return bytes([self.tag]) + _der_length(len(self.content)) + self.content


Rdn = tuple[Attribute, ...]


def escape_value(text: str) -> str:
    """A string value as Java's AVA.toRFC2253String escapes it."""
    chars: list[str] = []
    for c in text:
        if c in _ESCAPED:
            chars.append("\\" + c)
        elif c == "\x00":
            chars.append("\\00")
        else:
            chars.append(c)
    joined = "".join(chars)
    # Java escapes each leading and trailing space or CR, counted after the escaping above.
    lead = len(joined) - len(joined.lstrip(" \r"))
    trail = len(joined.rstrip(" \r"))
    if lead == len(joined):
        return "".join("\\" + c for c in joined)
    return (
        "".join("\\" + c for c in joined[:lead])
        + joined[lead:trail]
        + "".join("\\" + c for c in joined[trail:])
    )


def _attribute_string(attr: Attribute) -> str:
    keyword = RFC2253_KEYWORDS.get(attr.oid)
    if keyword is None or attr.tag not in _STRING_TAGS:
        return f"{keyword or attr.oid}=#{attr.der().hex()}"
    encoding = "utf-16-be" if attr.tag == _BMP else "utf-8"
    return f"{keyword}={escape_value(attr.content.decode(encoding, errors='replace'))}"


def rfc2253(rdns: Sequence[Rdn]) -> str:
    """The DN of `rdns` (in the certificate's ASN.1 order, least specific first) as X500Principal.getName()."""
    return ",".join("+".join(_attribute_string(a) for a in rdn) for rdn in reversed(rdns))


def ssl_principal(certificate_der: bytes | None) -> str:
    """Kafka's principal for a TLS connection: `User:<subject DN>`, or `User:ANONYMOUS` without a certificate
    (DefaultKafkaPrincipalBuilder, SslPrincipalMapper's DEFAULT rule keeps the DN as it is)."""
    if not certificate_der:
        return ANONYMOUS
    return f"User:{rfc2253(certificate_subject(certificate_der))}"


# --- DER reading: only what a certificate's subject needs --------------------------------------------------


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _read(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at `pos`, within `end`."""
    if pos + 2 > end:
        raise CertificateParseError(f"truncated DER element at byte {pos}")
    tag, first = data[pos], data[pos + 1]
    if tag & 0x1F == 0x1F:
        raise CertificateParseError(f"high-tag-number DER element at byte {pos}")
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or pos + count > end:
            raise CertificateParseError(f"bad DER length at byte {pos - 1}")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > end:
        raise CertificateParseError(f"DER element at byte {pos} runs past its container")
    return tag, pos, pos + length


def _expect(data: bytes, pos: int, end: int, tag: int, what: str) -> tuple[int, int]:
    got, start, stop = _read(data, pos, end)
    if got != tag:
        raise CertificateParseError(f"{what}: expected DER tag 0x{tag:02x}, got 0x{got:02x}")
    return start, stop


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateParseError("empty OBJECT IDENTIFIER")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if content[-1] & 0x80:
        raise CertificateParseError("truncated OBJECT IDENTIFIER")
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(a) for a in head + arcs[1:])


def _name(data: bytes, start: int, end: int) -> tuple[Rdn, ...]:
    rdns: list[Rdn] = []
    pos = start
    while pos < end:
        set_start, set_end = _expect(data, pos, end, _SET, "RelativeDistinguishedName")
        attrs: list[Attribute] = []
        apos = set_start
        while apos < set_end:
            seq_start, seq_end = _expect(data, apos, set_end, _SEQUENCE, "AttributeTypeAndValue")
            oid_start, oid_end = _expect(data, seq_start, seq_end, _OID, "attribute type")
            tag, value_start, value_end = _read(data, oid_end, seq_end)
            attrs.append(Attribute(_oid(data[oid_start:oid_end]), tag, data[value_start:value_end]))
            apos = seq_end
        if not attrs:
            raise CertificateParseError("empty RelativeDistinguishedName")
        rdns.append(tuple(attrs))
        pos = set_end
    return tuple(rdns)


def certificate_subject(certificate_der: bytes) -> tuple[Rdn, ...]:
    """The subject of a DER X.509 certificate, its RDNs in ASN.1 order (least specific first)."""
    data = certificate_der
    cert_start, cert_end = _expect(data, 0, len(data), _SEQUENCE, "Certificate")
    tbs_start, tbs_end = _expect(data, cert_start, cert_end, _SEQUENCE, "TBSCertificate")
    pos = tbs_start
    tag, _, stop = _read(data, pos, tbs_end)
    if tag == _VERSION:  # [0] EXPLICIT version, absent in v1 certificates
        pos = stop
    # serialNumber, signature, issuer, validity, then the subject
    for _ in range(4):
        _, _, pos = _read(data, pos, tbs_end)
    subject_start, subject_end = _expect(data, pos, tbs_end, _SEQUENCE, "subject Name")
    return _name(data, subject_start, subject_end)
