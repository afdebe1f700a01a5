"""The JAAS parser and ZkAuth: valid files of Kafka's era give the right credentials, and every malformed file
is refused with a JaasError naming its line (and section), never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.errors import ConfigError
from zkcoord.zk.acl import KAFKA_SECURE, OPEN, permission_names
from zkcoord.zk.auth import Credentials, JaasError, ZkAuth, parse_jaas

KAFKA_JAAS = """// the broker's JAAS file, as Kafka's docs show it
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret";
};
/* ZooKeeper client login */
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="kafka \\"quoted\\" secret";
};
"""


def test_kafka_broker_jaas_file_gives_the_client_section_credentials() -> None:
    auth = ZkAuth.from_jaas(KAFKA_JAAS, source="kafka_server_jaas.conf")
    assert auth.sasl == Credentials("kafka", 'kafka "quoted" secret')
    assert auth.principals == ("sasl:kafka",)
    assert "secret" not in repr(auth)  # passwords stay out of logs
    assert auth.source == "kafka_server_jaas.conf section Client"


def test_the_section_name_is_zookeeper_sasl_clientconfig() -> None:
    text = KAFKA_JAAS.replace("Client {", "ZkClient {")
    with pytest.raises(JaasError, match=r"no section 'Client' \(sections found: KafkaServer, ZkClient\)"):
        ZkAuth.from_jaas(text, source="f.conf")
    assert ZkAuth.from_jaas(text, section="ZkClient").sasl == Credentials("kafka", 'kafka "quoted" secret')


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('Client {\n  x.Y required\n  username="a"\n', 3, "expected ';' ending the login module entry"),
        ("Client {\n  x.Y maybe;\n};", 2, "control flag 'maybe' is not one of"),
        ("Client {\n  x.Y required username=;\n};", 2, "expected a value for option 'username'"),
        ('Client {\n  x.Y required\n  username "a";\n};', 3, "expected '=' after option 'username'"),
        ("Client {\n  x.Y required;\n}", 3, "expected ';' after the closing '}'"),
        ('Client {\n  x.Y required password="unterminated;\n};', 2, "unterminated quoted string"),
        ("\n\nClient {\n};\nClient {\n};", 5, "section defined twice"),
        ('Client {\n  x.Y required a="1" a="2";\n};', 2, "option 'a' given twice"),
    ],
)
def test_malformed_files_name_line_and_section(text: str, line: int, message: str) -> None:
    with pytest.raises(JaasError) as info:
        parse_jaas(text, "jaas.conf")
    assert info.value.line == line
    assert message in str(info.value)
    assert str(info.value).startswith(f"jaas.conf line {line}")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;", "Kerberos (GSSAPI)"),
        ("org.apache.kafka.common.security.plain.PlainLoginModule required;", "is not org.apache.zookeeper"),
        (
            'org.apache.zookeeper.server.auth.DigestLoginModule required username="u";',
            "needs the option password",
        ),
        ('org.apache.zookeeper.server.auth.DigestLoginModule required username="a:b" password="p";', "':'"),
        ("", "has no login module"),
    ],
)
def test_a_client_section_that_cannot_log_in_is_refused(body: str, message: str) -> None:
    with pytest.raises(JaasError, match="section Client") as info:
        ZkAuth.from_jaas(f"Client {{\n  {body}\n}};\n", source="c.conf")
    assert message in str(info.value)


def test_set_acl_needs_an_identity_and_digest_parses() -> None:
    with pytest.raises(ConfigError, match="--zk-set-acl"):
        ZkAuth(set_acl=True)
    auth = ZkAuth(digest=Credentials.parse("bob:pw:with:colons"), set_acl=True)
    assert auth.digest == Credentials("bob", "pw:with:colons")
    assert auth.principals == ("digest:bob",)
    with pytest.raises(ConfigError, match="user:password"):
        Credentials.parse("no-colon")


def test_kafka_default_acls() -> None:
    """ZkData.defaultAcls: open without set.acl; /consumers itself open; sensitive roots without world read."""
    assert [(a.id.scheme, permission_names(a.perms)) for a in OPEN.acls_for("/brokers/ids/1")] == [
        ("world", "READ|WRITE|CREATE|DELETE|ADMIN")
    ]
    assert [(a.id.scheme, a.id.id) for a in KAFKA_SECURE.acls_for("/consumers")] == [("world", "anyone")]
    secure = KAFKA_SECURE.acls_for("/consumers/g/offsets/t/0")
    assert [(a.id.scheme, permission_names(a.perms)) for a in secure] == [
        ("auth", "READ|WRITE|CREATE|DELETE|ADMIN"),
        ("world", "READ"),
    ]
    assert [a.id.scheme for a in KAFKA_SECURE.acls_for("/config/users/alice")] == ["auth"]


# --- fuzzing --------------------------------------------------------------------------------------------------

names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,12}", fullmatch=True)
values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=12)


@st.composite
def jaas_files(draw: st.DrawFn) -> tuple[str, dict[str, list[tuple[str, dict[str, str]]]]]:
    sections: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for name in draw(st.lists(names, unique=True, max_size=3)):
        entries = []
        for _ in range(draw(st.integers(0, 2))):
            opts = draw(st.dictionaries(names, values, max_size=3))
            entries.append((draw(names), opts))
        sections[name] = entries
    out = []
    for name, entries in sections.items():
        out.append(f"{name} {{")
        for cls, opts in entries:
            quoted = " ".join(f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                              for k, v in opts.items())  # fmt: skip
            out.append(f"  {cls} required {quoted};")
        out.append("};")
    return "\n".join(out) + "\n", sections


@given(jaas_files())
def test_generated_files_parse_to_what_was_written(generated: tuple[str, dict]) -> None:  # type: ignore[type-arg]
    text, sections = generated
    parsed = parse_jaas(text)
    assert list(parsed) == list(sections)
    for name, entries in sections.items():
        assert [(e.class_name, dict(e.options)) for e in parsed[name]] == entries


@given(jaas_files(), st.data())
def test_any_damage_is_a_jaas_error_with_a_line_in_the_file(
    generated: tuple[str, dict], data: st.DataObject
) -> None:  # type: ignore[type-arg]
    text, _ = generated
    pos = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    junk = data.draw(st.sampled_from(["", "{", "}", ";", "=", '"', "/*", "@", "x"]))
    damaged = text[:pos] + junk + text[pos + cut :]
    try:
        parse_jaas(damaged, "fuzz.conf")
    except JaasError as e:
        assert e.line is not None and 1 <= e.line <= damaged.count("\n") + 1
        assert str(e).startswith(f"fuzz.conf line {e.line}")


@given(st.text(max_size=80))
def test_arbitrary_text_parses_or_is_a_jaas_error(text: str) -> None:
    try:
        parse_jaas(text, "any.conf")
    except JaasError as e:
        assert e.line is not None and e.line >= 1
