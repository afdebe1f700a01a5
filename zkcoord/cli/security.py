"""`zkcoord security`: Kafka security data in ZooKeeper, as Kafka's tools make it (`add-scram-user` stores a
SCRAM credential in `/config/users/<user>` exactly as `kafka-configs.sh --add-config 'SCRAM-SHA-256=[...]'`;
`add-acl` adds ACLs to `/kafka-acl/<Type>/<name>` as `kafka-acls.sh --authorizer-properties zookeeper.connect=...
--add` does)."""

from __future__ import annotations

import argparse
import os
import sys

from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import ConfigError
from zkcoord.security.acl import (
    CLUSTER,
    SUPPORTED_OPERATIONS,
    Acl,
    Operation,
    Permission,
    Resource,
    ResourceType,
)
from zkcoord.security.scram import DEFAULT_ITERATIONS, HASHES, ScramCredential
from zkcoord.zk.kafka_acls import add_acls, resource_path
from zkcoord.zk.kafka_credentials import user_path, write_scram
from zkcoord.zk.session import connect


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "security",
        help="Kafka security data in ZooKeeper: SCRAM users",
        description=__doc__,
        epilog=examples(
            "zkcoord security add-scram-user --zk 127.0.0.1:2181 --user alice --password-file pw.txt",
            "zkcoord security add-scram-user --help   # mechanisms, iterations, ACLs",
        ),
    )
    cmds = parser.add_subparsers(dest="security_command", metavar="SUBCOMMAND", required=True)
    add = cmds.add_parser(
        "add-scram-user",
        help="store a SCRAM credential in /config/users/USER (Kafka's format)",
        description="Store (or replace) USER's SCRAM credential for each --mechanism in /config/users/USER, "
        "keeping its other mechanisms, and announce the change under /config/changes as Kafka's tools do.",
        epilog=examples(
            "zkcoord security add-scram-user --zk 127.0.0.1:2181 --user alice --password-file alice.pw",
            "ZKCOORD_SCRAM_PASSWORD=s3cret zkcoord security add-scram-user --zk h:2181 --user bob "
            "--mechanism SCRAM-SHA-512",
        ),
    )
    add.add_argument(
        "--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)"
    )
    add.add_argument("--user", required=True, help="the SASL user name")
    add.add_argument(
        "--password-file",
        metavar="FILE",
        help="file whose first line is the password (default: the ZKCOORD_SCRAM_PASSWORD environment variable)",
    )
    add.add_argument(
        "--mechanism",
        action="append",
        choices=sorted(HASHES),
        help="SCRAM mechanism; repeat for several (default: both)",
    )
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="PBKDF2 iterations (>= 4096)")
    add_zk_security(add)
    add.set_defaults(func=add_scram_user)
    _register_add_acl(cmds)


def _register_add_acl(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acl = cmds.add_parser(
        "add-acl",
        help="add ACLs to /kafka-acl/<Topic|Group|Cluster|TransactionalId>/NAME (Kafka's format, kafka-acls.sh's options)",
        description="Add an ACL for each principal x operation x host to the resource's ACL set in ZooKeeper "
        "(keeping the ACLs already there) and announce it under /kafka-acl-changes, as kafka-acls.sh does.",
        epilog=examples(
            "zkcoord security add-acl --zk h:2181 --allow-principal User:alice --operation Read --group payments",
            "zkcoord security add-acl --zk h:2181 --allow-principal User:alice --operation Write --topic '*'",
            "zkcoord security add-acl --zk h:2181 --deny-principal User:mallory --operation All --cluster",
            "zkcoord security add-acl --zk h:2181 --allow-principal User:app --operation Write --transactional-id tx1",
        ),
    )
    acl.add_argument(
        "--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)"
    )
    target = acl.add_mutually_exclusive_group(required=True)
    target.add_argument("--topic", help="the topic (or '*', every topic)")
    target.add_argument("--group", help="the consumer group (or '*', every group)")
    target.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
    target.add_argument(
        "--transactional-id", help="the transactional id (or '*', every one): Write and Describe, as Kafka"
    )
    acl.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME", help="repeatable")
    acl.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME", help="repeatable")
    acl.add_argument(
        "--operation",
        action="append",
        required=True,
        choices=[o.value for o in Operation],
        help="repeatable: Read, Write, Create, Delete, Alter, Describe, ..., All",
    )
    acl.add_argument("--host", default="*", help="the client address the ACL applies to (default '*', any)")
    add_zk_security(acl)
    acl.set_defaults(func=add_acl)


def add_acl(args: argparse.Namespace) -> int:
    if args.cluster:
        resource = CLUSTER
    elif args.topic is not None:
        resource = Resource(ResourceType.TOPIC, args.topic)
    elif args.transactional_id is not None:
        resource = Resource(ResourceType.TRANSACTIONAL_ID, args.transactional_id)
    else:
        resource = Resource(ResourceType.GROUP, args.group)
    path = resource_path(resource)  # validates the name before connecting
    supported = SUPPORTED_OPERATIONS[resource.type]
    unsupported = [
        op for op in args.operation if op != Operation.ALL.value and Operation(op) not in supported
    ]
    if unsupported:  # as kafka-acls.sh refuses them: such an ACL could never allow anything
        names = ",".join([o.value for o in supported] + [Operation.ALL.value])
        raise ConfigError(
            f"ResourceType {resource.type.value} only supports operations {names}, not {','.join(unsupported)}"
        )
    entries = [(p, Permission.ALLOW) for p in args.allow_principal] + [
        (p, Permission.DENY) for p in args.deny_principal
    ]
    if not entries:
        raise ConfigError("no principal: give --allow-principal and/or --deny-principal User:NAME")
    for principal, _ in entries:
        if ":" not in principal:
            raise ConfigError(f"{principal!r} is not a principal: write User:{principal}")
    acls = [
        Acl(principal, permission, Operation(op), args.host)
        for principal, permission in entries
        for op in args.operation
    ]
    client = connect(args.zk, auth=zk_auth(args))
    try:
        stored = add_acls(client, resource, acls)
    finally:
        client.stop()
        client.close()
    print(f"{path}: {len(stored)} ACLs", file=sys.stdout)
    for a in stored:
        print(f"  {a.principal} {a.permission.value} {a.operation.value} from {a.host}", file=sys.stdout)
    return 0


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"--password-file {args.password_file}: {exc.strerror}") from None
    else:
        password = os.environ.get("ZKCOORD_SCRAM_PASSWORD", "")
    if not password:
        raise ConfigError("no password: give --password-file FILE or set ZKCOORD_SCRAM_PASSWORD")
    return password


def add_scram_user(args: argparse.Namespace) -> int:
    password = _password(args)
    user_path(args.user)  # validates the name before connecting
    mechanisms = args.mechanism or sorted(HASHES)
    client = connect(args.zk, auth=zk_auth(args))
    try:
        for mechanism in mechanisms:
            cred = ScramCredential.from_password(mechanism, password, os.urandom(32), args.iterations)
            write_scram(client, args.user, mechanism, cred)
            print(f"{user_path(args.user)}: {mechanism} credential stored", file=sys.stdout)
    finally:
        client.stop()
        client.close()
    return 0
