"""The ZooKeeper security flags every `--zk`-taking command shares (Kafka's JAAS `Client` section,
`zookeeper.sasl.clientconfig`, digest credentials, `zookeeper.set.acl`), added by one call and read into one
validated `ZkAuth`."""

from __future__ import annotations

import argparse

from zkcoord.errors import ConfigError
from zkcoord.zk.auth import DEFAULT_CLIENT_SECTION, NO_AUTH, Credentials, ZkAuth


def add_zk_security(parser: argparse.ArgumentParser) -> None:
    """Add --zk-jaas-config, --zk-sasl-clientconfig, --zk-digest and --zk-set-acl to `parser`."""
    group = parser.add_argument_group("ZooKeeper security (docs/security.md)")
    group.add_argument(
        "--zk-jaas-config",
        metavar="FILE",
        help="JAAS login file whose Client section (DigestLoginModule username/password) logs in to ZooKeeper "
        "with SASL DIGEST-MD5, as Kafka's -Djava.security.auth.login.config",
    )
    group.add_argument(
        "--zk-sasl-clientconfig",
        default=DEFAULT_CLIENT_SECTION,
        metavar="SECTION",
        help=f"the JAAS section to log in with (Kafka's zookeeper.sasl.clientconfig; default {DEFAULT_CLIENT_SECTION})",
    )
    group.add_argument(
        "--zk-digest",
        metavar="USER:PASSWORD",
        help="also authenticate with ZooKeeper's digest scheme (addauth digest USER:PASSWORD)",
    )
    group.add_argument(
        "--zk-set-acl",
        action="store_true",
        help="Kafka's zookeeper.set.acl: znodes created get creator-only write and world read (/consumers "
        "stays open, credentials unreadable) instead of world-writable ACLs",
    )


def zk_auth(args: argparse.Namespace) -> ZkAuth:
    """The ZkAuth the flags of `add_zk_security` describe; ConfigError naming the flag when they do not fit."""
    digest = Credentials.parse(args.zk_digest) if getattr(args, "zk_digest", None) else None
    set_acl = bool(getattr(args, "zk_set_acl", False))
    path = getattr(args, "zk_jaas_config", None)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"--zk-jaas-config {path}: {exc.strerror}") from None
        return ZkAuth.from_jaas(
            text, source=path, section=args.zk_sasl_clientconfig, digest=digest, set_acl=set_acl
        )
    if digest is None and not set_acl:
        return NO_AUTH
    return ZkAuth(digest=digest, set_acl=set_acl, source="--zk-digest" if digest else "")
