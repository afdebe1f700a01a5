"""The ZooKeeper security flags every `--zk`-taking command shares (Kafka's JAAS `Client` section,
`zookeeper.sasl.clientconfig`, digest credentials, `zookeeper.set.acl`), added by one call and read into one
validated `ZkAuth` (the flags themselves live in zkcoord.zk.auth_flags, so child processes take them too)."""

from __future__ import annotations

import argparse

from zkcoord.zk.auth import ZkAuth
from zkcoord.zk.auth_flags import ZkSecurityFlags, add_arguments


def add_zk_security(parser: argparse.ArgumentParser) -> None:
    """Add --zk-jaas-config, --zk-sasl-clientconfig, --zk-digest and --zk-set-acl to `parser`."""
    add_arguments(parser)


def zk_flags(args: argparse.Namespace) -> ZkSecurityFlags:
    """The flags of `add_zk_security` as given, to read (`load()`) or hand to a child process (`argv()`)."""
    return ZkSecurityFlags.from_args(args)


def zk_auth(args: argparse.Namespace) -> ZkAuth:
    """The ZkAuth the flags of `add_zk_security` describe; ConfigError naming the flag when they do not fit."""
    return zk_flags(args).load()
