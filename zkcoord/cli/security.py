"""`zkcoord security`: Kafka security data in ZooKeeper, as Kafka's tools make it (`add-scram-user` stores a
SCRAM credential in `/config/users/<user>` exactly as `kafka-configs.sh --add-config 'SCRAM-SHA-256=[...]'`)."""

from __future__ import annotations

import argparse
import os
import sys

from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import ConfigError
from zkcoord.security.scram import DEFAULT_ITERATIONS, HASHES, ScramCredential
from zkcoord.zk.kafka_credentials import user_path, write_scram
from zkcoord.zk.session import connect


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "security", help="Kafka security data in ZooKeeper: SCRAM users", description=__doc__
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
