"""Who a zkcoord ZooKeeper client is: the JAAS login file of Kafka's era parsed without I/O into one typed,
validated `ZkAuth` (SASL DIGEST-MD5 and/or digest credentials, and Kafka's `zookeeper.set.acl`); a malformed
file is refused with an error naming its line and section.

Pure: no kazoo, no files opened here (`ZkAuth.from_jaas` takes the text; the command line reads the file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from zkcoord.errors import ConfigError

# Kafka's `zookeeper.sasl.clientconfig` default: the JAAS section the ZooKeeper client logs in with.
DEFAULT_CLIENT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KERBEROS_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})


class JaasError(ConfigError):
    """A JAAS login file that does not parse, or whose section cannot log in to ZooKeeper."""

    def __init__(self, source: str, line: int | None, section: str | None, reason: str) -> None:
        where = source + (f" line {line}" if line is not None else "")
        if section is not None:
            where += f" (section {section})"
        super().__init__(f"{where}: {reason}")
        self.source = source
        self.line = line
        self.section = section
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One entry of a JAAS section: `class flag key="value" ...;`."""

    class_name: str
    flag: str
    options: tuple[tuple[str, str], ...]
    line: int

    def option(self, key: str) -> str | None:
        for k, v in self.options:
            if k == key:
                return v
        return None


# Tokens as Java's ConfigFile reads them (a StreamTokenizer): words, "quoted strings" with backslash
# escapes, the punctuation { } ; =, and // or /* */ comments.
_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\f]+)|(?P<nl>\n)|(?P<c1>//[^\n]*)|(?P<c2>/\*.*?\*/)|(?P<str>"(?:[^"\\\n]|\\.)*")"""
    r"""|(?P<word>[A-Za-z0-9_$.*\-]+)|(?P<punct>[{};=])""",
    re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _tokens(text: str, source: str) -> list[tuple[str, str, int]]:
    """(kind, text, line) for every token: kind is 'word', 'str' or the punctuation itself."""
    out: list[tuple[str, str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            if ch == '"':
                raise JaasError(source, line, None, "unterminated quoted string")
            if text.startswith("/*", pos):
                raise JaasError(source, line, None, "unterminated /* comment")
            raise JaasError(source, line, None, f"unexpected character {ch!r}")
        kind = m.lastgroup
        tok = m.group()
        if kind == "str":
            out.append(("str", _ESCAPE.sub(r"\1", tok[1:-1]), line))
        elif kind == "word":
            out.append(("word", tok, line))
        elif kind == "punct":
            out.append((tok, tok, line))
        line += tok.count("\n")
        pos = m.end()
    return out


def parse_jaas(text: str, source: str = "JAAS file") -> dict[str, tuple[LoginModule, ...]]:
    """Every section of a JAAS login file: `Name { module flag key="value"...; ... };`.

    Raises JaasError naming the line (and the section, once inside one) of the first thing that does not fit.
    """
    toks = _tokens(text, source)
    sections: dict[str, tuple[LoginModule, ...]] = {}
    i = 0

    def describe(j: int) -> str:
        return f"{toks[j][1]!r}" if j < len(toks) else "the end of the file"

    def line_of(j: int) -> int:
        return toks[j][2] if j < len(toks) else (toks[-1][2] if toks else 1)

    def expect(j: int, kind: str, section: str | None, what: str) -> None:
        if j >= len(toks) or toks[j][0] != kind:
            raise JaasError(source, line_of(j), section, f"expected {what}, got {describe(j)}")

    while i < len(toks):
        expect(i, "word", None, "a section name")
        name, name_line = toks[i][1], toks[i][2]
        if name in sections:
            raise JaasError(source, name_line, name, "section defined twice")
        expect(i + 1, "{", name, "'{' after the section name")
        i += 2
        entries: list[LoginModule] = []
        while i < len(toks) and toks[i][0] != "}":
            expect(i, "word", name, "a login module class name")
            cls, cls_line = toks[i][1], toks[i][2]
            expect(i + 1, "word", name, f"a control flag ({', '.join(sorted(CONTROL_FLAGS))}) after {cls}")
            flag = toks[i + 1][1]
            if flag.lower() not in CONTROL_FLAGS:
                raise JaasError(
                    source, toks[i + 1][2], name,
                    f"control flag {flag!r} is not one of {', '.join(sorted(CONTROL_FLAGS))}",
                )  # fmt: skip
            i += 2
            options: list[tuple[str, str]] = []
            while i < len(toks) and toks[i][0] != ";":
                expect(i, "word", name, "an option name or ';' ending the login module entry")
                key = toks[i][1]
                expect(i + 1, "=", name, f"'=' after option {key!r}")
                if i + 2 >= len(toks) or toks[i + 2][0] not in ("str", "word"):
                    raise JaasError(
                        source,
                        line_of(i + 2),
                        name,
                        f"expected a value for option {key!r}, got {describe(i + 2)}",
                    )
                if any(k == key for k, _ in options):
                    raise JaasError(source, toks[i][2], name, f"option {key!r} given twice")
                options.append((key, toks[i + 2][1]))
                i += 3
            expect(i, ";", name, "';' ending the login module entry")
            i += 1
            entries.append(LoginModule(cls, flag.lower(), tuple(options), cls_line))
        expect(i, "}", name, "'}' closing the section")
        expect(i + 1, ";", name, "';' after the closing '}'")
        i += 2
        sections[name] = tuple(entries)
    return sections


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user name and password (the password never shown in a repr or a log)."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.username:
            raise ConfigError("a ZooKeeper user name must not be empty")
        if ":" in self.username:
            raise ConfigError(f"a ZooKeeper user name cannot contain ':' (got {self.username!r})")

    @classmethod
    def parse(cls, user_colon_password: str) -> Credentials:
        """'user:password' (the form ZooKeeper's `addauth digest` takes)."""
        user, sep, password = user_colon_password.partition(":")
        if not sep:
            raise ConfigError("digest credentials are 'user:password'")
        return cls(user, password)


@dataclass(frozen=True, slots=True)
class ZkAuth:
    """How a ZooKeeper client proves who it is, and whether what it creates is locked to that identity.

    `sasl`: SASL DIGEST-MD5 login (the JAAS `Client` section of Kafka's era); `digest`: ZooKeeper's own digest
    scheme (`addauth digest user:password`); `set_acl`: Kafka's `zookeeper.set.acl`, every znode created gets
    Kafka's ACLs instead of world-writable ones. Either identity (or both) may be given; `set_acl` needs one.
    """

    sasl: Credentials | None = None
    digest: Credentials | None = None
    set_acl: bool = False
    source: str = ""  # where the settings came from, for error messages ("JAAS file x.conf section Client")

    def __post_init__(self) -> None:
        if self.set_acl and not self.authenticated:
            raise ConfigError(
                "zookeeper.set.acl (--zk-set-acl) needs an identity to lock the znodes to: give "
                "--zk-jaas-config FILE or --zk-digest USER:PASSWORD"
            )

    @property
    def authenticated(self) -> bool:
        return self.sasl is not None or self.digest is not None

    @property
    def principals(self) -> tuple[str, ...]:
        """The ids the server gives this client's session, as ACLs name them ('sasl:alice', 'digest:bob')."""
        out = []
        if self.sasl is not None:
            out.append(f"sasl:{self.sasl.username}")
        if self.digest is not None:
            out.append(f"digest:{self.digest.username}")
        return tuple(out)

    def describe(self) -> str:
        who = ", ".join(self.principals) or "no credentials (unauthenticated)"
        return f"{who} from {self.source}" if self.source else who

    @classmethod
    def from_jaas(
        cls,
        text: str,
        *,
        source: str = "JAAS file",
        section: str = DEFAULT_CLIENT_SECTION,
        digest: Credentials | None = None,
        set_acl: bool = False,
    ) -> ZkAuth:
        """The credentials of `section` (Kafka's `zookeeper.sasl.clientconfig`) of a JAAS login file."""
        sections = parse_jaas(text, source)
        if section not in sections:
            found = ", ".join(sorted(sections)) or "none"
            raise JaasError(source, None, section, f"no section {section!r} (sections found: {found})")
        entries = sections[section]
        if not entries:
            raise JaasError(source, None, section, "the section has no login module")
        entry = entries[0]
        if entry.class_name == KERBEROS_LOGIN_MODULE:
            raise JaasError(
                source, entry.line, section,
                "Kerberos (GSSAPI) login is not supported by zkcoord; use DigestLoginModule (SASL DIGEST-MD5)",
            )  # fmt: skip
        if entry.class_name != DIGEST_LOGIN_MODULE:
            raise JaasError(
                source, entry.line, section, f"login module {entry.class_name} is not {DIGEST_LOGIN_MODULE}"
            )
        if len(entries) > 1:
            raise JaasError(source, entries[1].line, section, "more than one login module in the section")
        username, password = entry.option("username"), entry.option("password")
        for key, value in (("username", username), ("password", password)):
            if value is None:
                raise JaasError(
                    source, entry.line, section, f'DigestLoginModule needs the option {key}="..."'
                )
        assert username is not None and password is not None
        if not username:
            raise JaasError(source, entry.line, section, "username is empty")
        try:
            sasl = Credentials(username, password)
        except ConfigError as e:
            raise JaasError(source, entry.line, section, str(e)) from None
        return cls(
            sasl=sasl,
            digest=digest,
            set_acl=set_acl,
            source=f"{source} section {section}",
        )


NO_AUTH = ZkAuth()
