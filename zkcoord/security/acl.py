"""Kafka's ACL model without I/O: resources, operations, ACL entries in the JSON of `/kafka-acl/<Type>/<name>`,
and the decision of `SimpleAclAuthorizer`/`AclAuthorizer` (`authorize`) as one pure function.

Guarantees: a znode's data (any bytes: size and nesting bounded) either parses into typed ACLs or raises a
ConfigError naming what is wrong; the decision is Kafka's: a super user is always allowed; with no ACL on the
resource (literal name or `*`) the answer is `allow.everyone.if.no.acl.found`; a matching Deny wins over any
Allow; Read, Write, Delete and Alter imply Describe, AlterConfigs implies DescribeConfigs; `All` matches every
operation, `User:*` every principal and host `*` every host.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zkcoord.errors import ConfigError
from zkcoord.security.stored_json import brief, load_stored_json

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name in Kafka


class ResourceType(enum.Enum):
    """The resource types zkcoord serves (Kafka's names, which are also the `/kafka-acl` child names)."""

    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    TRANSACTIONAL_ID = (
        "TransactionalId"  # checked although zkcoord has no transactions (FindCoordinator, ...)
    )


class Operation(enum.Enum):
    """Kafka's `AclOperation`, with its JSON names."""

    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"


# Kafka's `AclOperation` codes: the bit each operation sets in an "authorized operations" field (KIP-430).
OPERATION_CODE: dict[Operation, int] = {
    Operation.ALL: 2,
    Operation.READ: 3,
    Operation.WRITE: 4,
    Operation.CREATE: 5,
    Operation.DELETE: 6,
    Operation.ALTER: 7,
    Operation.DESCRIBE: 8,
    Operation.CLUSTER_ACTION: 9,
    Operation.DESCRIBE_CONFIGS: 10,
    Operation.ALTER_CONFIGS: 11,
    Operation.IDEMPOTENT_WRITE: 12,
}

# The operations each resource type has (Kafka 2.8's `AclEntry.supportedOperations`), sorted by code.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.WRITE, Operation.DESCRIBE),
}


class Permission(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"


# An Allow ACL on any of these operations also allows the key (SimpleAclAuthorizer.authorize's `allowOps`).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class Resource:
    type: ResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.type.value}:{self.name}"


CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


@dataclass(frozen=True, slots=True)
class Acl:
    """One entry of a resource's ACL list (Kafka's `Acl`: principal, permission type, host, operation)."""

    principal: str
    permission: Permission
    operation: Operation
    host: str = WILDCARD

    def to_json(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "permissionType": self.permission.value,
            "operation": self.operation.value,
            "host": self.host,
        }


@dataclass(frozen=True, slots=True)
class Session:
    """Who sent a request: Kafka's principal (`User:alice`, `User:ANONYMOUS`) and the client's address."""

    principal: str = "User:ANONYMOUS"
    host: str = ""


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    """The authorizer's settings, with Kafka's names: `super.users` (principals, `;`-separated in Kafka) and
    `allow.everyone.if.no.acl.found`."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @staticmethod
    def parse_super_users(text: str) -> frozenset[str]:
        users = frozenset(u.strip() for u in text.split(";") if u.strip())
        for user in users:
            if ":" not in user:
                raise ConfigError(f"super.users: {user!r} is not a principal (User:NAME)")
        return users


def _enum(cls: type[enum.Enum], value: object, what: str) -> enum.Enum:
    for member in cls:
        if member.value == value:
            return member
    raise ConfigError(f"{what} {brief(value)} is not one of {', '.join(str(m.value) for m in cls)}")


def parse_acl(entry: Mapping[str, object]) -> Acl:
    """One JSON entry `{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}`."""
    principal = entry.get("principal")
    host = entry.get("host", WILDCARD)
    if not isinstance(principal, str) or ":" not in principal:
        raise ConfigError(f"principal {brief(principal)} is not TYPE:NAME")
    if not isinstance(host, str) or not host:
        raise ConfigError(f"host {brief(host)} is not a host or '*'")
    permission = _enum(Permission, entry.get("permissionType"), "permissionType")
    operation = _enum(Operation, entry.get("operation"), "operation")
    assert isinstance(permission, Permission) and isinstance(operation, Operation)
    return Acl(principal, permission, operation, host)


def parse_acls(data: bytes) -> tuple[Acl, ...]:
    """A `/kafka-acl/<Type>/<name>` znode's data (Kafka's `{"version":1,"acls":[...]}`); empty data: no ACLs.
    Any bytes: the ACLs, or a ConfigError (bounded size and depth, see `load_stored_json`)."""
    if not data:
        return ()
    doc = load_stored_json(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("acls"), list):
        raise ConfigError('not Kafka\'s ACL JSON: no "acls" list')
    acls: list[Acl] = []
    for i, entry in enumerate(doc["acls"]):
        if not isinstance(entry, dict):
            raise ConfigError(f"ACL entry {i} is {brief(entry)}, not an object")
        acls.append(parse_acl(entry))
    return tuple(acls)


def encode_acls(acls: Iterable[Acl]) -> bytes:
    """Kafka's JSON for a resource's ACL set (sorted, duplicates dropped, so equal sets give equal bytes)."""
    unique = sorted(set(acls), key=lambda a: (a.principal, a.permission.value, a.operation.value, a.host))
    doc = {"version": 1, "acls": [a.to_json() for a in unique]}
    return json.dumps(doc, separators=(",", ":")).encode()


def _matches(acl: Acl, session: Session, operations: frozenset[Operation]) -> bool:
    return (
        acl.principal in (session.principal, WILDCARD_PRINCIPAL)
        and acl.host in (session.host, WILDCARD)
        and (acl.operation is Operation.ALL or acl.operation in operations)
    )


AclTable = Mapping[Resource, tuple[Acl, ...]]


def authorize(
    table: AclTable, config: AuthorizerConfig, session: Session, operation: Operation, resource: Resource
) -> bool:
    """Kafka's decision for `session` doing `operation` on `resource`, given every resource's ACLs."""
    if session.principal in config.super_users:
        return True
    acls = table.get(resource, ()) + table.get(Resource(resource.type, WILDCARD), ())
    if not acls:
        return config.allow_everyone_if_no_acl_found
    exact = frozenset({operation})
    for acl in acls:
        if acl.permission is Permission.DENY and _matches(acl, session, exact):
            return False
    allowed_by = _IMPLIED_BY.get(operation, exact)
    return any(acl.permission is Permission.ALLOW and _matches(acl, session, allowed_by) for acl in acls)


def authorize_any(
    table: AclTable, config: AuthorizerConfig, session: Session, operation: Operation, rtype: ResourceType
) -> bool:
    """Whether `session` may do `operation` on some resource of `rtype` (Kafka's `authorizeByResourceType`,
    KIP-679: an idempotent producer needs Write on any topic, or IdempotentWrite on the cluster)."""
    if session.principal in config.super_users:
        return True
    resources = sorted((r for r in table if r.type is rtype), key=lambda r: r.name)
    if not resources:
        return config.allow_everyone_if_no_acl_found
    return any(authorize(table, config, session, operation, r) for r in resources)


def authorized_operations(
    table: AclTable, config: AuthorizerConfig, session: Session, resource: Resource
) -> int:
    """Kafka's "authorized operations" bit field (KIP-430, `AuthHelper.authorizedOperations`): bit `code` set for
    each operation of the resource's type that `session` may do on it."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource.type]:
        if authorize(table, config, session, op, resource):
            bits |= 1 << OPERATION_CODE[op]
    return bits


def all_operations(rtype: ResourceType) -> int:
    """The bit field without an authorizer: every operation of the type (Kafka answers the same)."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[rtype]:
        bits |= 1 << OPERATION_CODE[op]
    return bits
