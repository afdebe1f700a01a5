"""Kafka's ACL decision as a table, and the `/kafka-acl` JSON both ways."""

from __future__ import annotations

import json

import pytest

from zkcoord.errors import ConfigError
from zkcoord.security.acl import (
    CLUSTER,
    Acl,
    AuthorizerConfig,
    Operation,
    Permission,
    Resource,
    ResourceType,
    Session,
    authorize,
    authorize_any,
    encode_acls,
    parse_acls,
)

ALLOW, DENY = Permission.ALLOW, Permission.DENY
R, W, D, DESC, ALL = Operation.READ, Operation.WRITE, Operation.DELETE, Operation.DESCRIBE, Operation.ALL
G = Resource(ResourceType.GROUP, "g")
T = Resource(ResourceType.TOPIC, "t")
ANY_GROUP = Resource(ResourceType.GROUP, "*")
ALICE = Session("User:alice", "10.0.0.1")
BOB = Session("User:bob", "10.0.0.2")
STRICT = AuthorizerConfig()
OPEN = AuthorizerConfig(allow_everyone_if_no_acl_found=True)

# (why, table, config, session, operation, resource, expected)
CASES = [
    ("no ACL anywhere, default config: denied", {}, STRICT, ALICE, R, G, False),
    ("no ACL, allow.everyone.if.no.acl.found", {}, OPEN, ALICE, R, G, True),
    ("ACLs exist but not for bob: the open flag does not apply", {G: (Acl("User:alice", ALLOW, R),)}, OPEN,
     BOB, R, G, False),
    ("allow on the literal name", {G: (Acl("User:alice", ALLOW, R),)}, STRICT, ALICE, R, G, True),
    ("allow Read does not allow Delete", {G: (Acl("User:alice", ALLOW, R),)}, STRICT, ALICE, D, G, False),
    ("Read implies Describe", {G: (Acl("User:alice", ALLOW, R),)}, STRICT, ALICE, DESC, G, True),
    ("Write implies Describe", {T: (Acl("User:alice", ALLOW, W),)}, STRICT, ALICE, DESC, T, True),
    ("Delete implies Describe", {G: (Acl("User:alice", ALLOW, D),)}, STRICT, ALICE, DESC, G, True),
    ("Alter implies Describe", {T: (Acl("User:alice", ALLOW, Operation.ALTER),)}, STRICT, ALICE, DESC, T, True),
    ("Describe does not imply Read", {G: (Acl("User:alice", ALLOW, DESC),)}, STRICT, ALICE, R, G, False),
    ("All allows anything", {G: (Acl("User:alice", ALLOW, ALL),)}, STRICT, ALICE, D, G, True),
    ("wildcard resource name", {ANY_GROUP: (Acl("User:alice", ALLOW, R),)}, STRICT, ALICE, R, G, True),
    ("wildcard principal", {G: (Acl("User:*", ALLOW, R),)}, STRICT, BOB, R, G, True),
    ("host must match", {G: (Acl("User:alice", ALLOW, R, "10.0.0.9"),)}, STRICT, ALICE, R, G, False),
    ("exact host", {G: (Acl("User:alice", ALLOW, R, "10.0.0.1"),)}, STRICT, ALICE, R, G, True),
    ("deny wins over allow", {G: (Acl("User:alice", ALLOW, R), Acl("User:alice", DENY, R))}, STRICT, ALICE, R,
     G, False),
    ("deny on * wins over allow on the name",
     {G: (Acl("User:alice", ALLOW, R),), ANY_GROUP: (Acl("User:*", DENY, ALL),)}, STRICT, ALICE, R, G, False),
    ("deny Read does not deny Describe (deny matches the exact operation)",
     {G: (Acl("User:alice", ALLOW, DESC), Acl("User:alice", DENY, R))}, STRICT, ALICE, DESC, G, True),
    ("another resource's ACL does not count", {T: (Acl("User:alice", ALLOW, R),)}, STRICT, ALICE, R, G, False),
    ("the type is part of the resource",
     {Resource(ResourceType.TOPIC, "g"): (Acl("User:alice", ALLOW, R),)}, STRICT, ALICE, R, G, False),
    ("super user without ACLs", {G: (Acl("User:alice", DENY, ALL),)},
     AuthorizerConfig(super_users=frozenset({"User:alice"})), ALICE, R, G, True),
    ("cluster create", {CLUSTER: (Acl("User:alice", ALLOW, Operation.CREATE),)}, STRICT, ALICE,
     Operation.CREATE, CLUSTER, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("table", "config", "session", "operation", "resource", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decision(
    table: dict[Resource, tuple[Acl, ...]],
    config: AuthorizerConfig,
    session: Session,
    operation: Operation,
    resource: Resource,
    expected: bool,
) -> None:
    assert authorize(table, config, session, operation, resource) is expected


def test_kafka_json_round_trips_and_is_canonical() -> None:
    kafka = (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",'
        b'"host":"*"},{"principal":"User:bob","permissionType":"Deny","operation":"All","host":"10.0.0.2"}]}'
    )
    acls = parse_acls(kafka)
    assert acls == (Acl("User:alice", ALLOW, R), Acl("User:bob", DENY, ALL, "10.0.0.2"))
    assert json.loads(encode_acls(reversed(acls + acls))) == json.loads(kafka)
    assert parse_acls(b"") == ()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{", "not JSON"),
        (b'{"version":1}', "acls"),
        (b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read"}]}', "TYPE"),
        (
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read"}]}',
            "Maybe",
        ),
        (b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Eat"}]}', "Eat"),
        (b'{"version":1,"acls":[7]}', "not an object"),
    ],
)
def test_malformed_acl_json_names_the_problem(data: bytes, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_acls(data)


def test_super_users_parse_kafka_list() -> None:
    assert AuthorizerConfig.parse_super_users("User:admin; User:ops;") == {"User:admin", "User:ops"}
    with pytest.raises(ConfigError, match="admin"):
        AuthorizerConfig.parse_super_users("admin")


def test_authorize_any_is_write_on_some_topic() -> None:
    topics = {
        T: (Acl("User:alice", ALLOW, W),),
        Resource(ResourceType.TOPIC, "u"): (Acl("User:bob", DENY, W),),
    }
    assert authorize_any(topics, STRICT, ALICE, W, ResourceType.TOPIC)
    assert not authorize_any(topics, STRICT, BOB, W, ResourceType.TOPIC)
    assert not authorize_any(topics, STRICT, ALICE, W, ResourceType.GROUP)  # no group ACLs, strict config
    assert authorize_any(topics, OPEN, ALICE, W, ResourceType.GROUP)
    assert authorize_any(
        {}, AuthorizerConfig(super_users=frozenset({"User:bob"})), BOB, W, ResourceType.TOPIC
    )
