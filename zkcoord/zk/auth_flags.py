"""The ZooKeeper security settings as command-line flags (Kafka's JAAS `Client` section,
`zookeeper.sasl.clientconfig`, digest credentials, `zookeeper.set.acl`): added to a parser, read into one validated
`ZkAuth` (the JAAS file is opened here), and written back as flags so a child process (a `serve` node, a comparison
member) logs in to ZooKeeper exactly as its parent does.

Lives below the command line so the application's child processes (migration.compare) take the same flags
without importing `zkcoord.cli`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from zkcoord.errors import ConfigError
from zkcoord.zk.auth import DEFAULT_CLIENT_SECTION, NO_AUTH, Credentials, ZkAuth

# The flags, in the order `argv()` writes them.
FLAGS = ("--zk-jaas-config", "--zk-sasl-clientconfig", "--zk-digest", "--zk-set-acl")


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


@dataclass(frozen=True, slots=True)
class ZkSecurityFlags:
    """The settings as given on a command line (the JAAS file by path, not yet read)."""

    jaas_config: str | None = None
    sasl_clientconfig: str = DEFAULT_CLIENT_SECTION
    digest: str | None = field(default=None, repr=False)
    set_acl: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ZkSecurityFlags:
        """The flags `add_arguments` added (absent ones, on a parser without them, are their defaults)."""
        return cls(
            jaas_config=getattr(args, "zk_jaas_config", None) or None,
            sasl_clientconfig=getattr(args, "zk_sasl_clientconfig", None) or DEFAULT_CLIENT_SECTION,
            digest=getattr(args, "zk_digest", None) or None,
            set_acl=bool(getattr(args, "zk_set_acl", False)),
        )

    @property
    def given(self) -> bool:
        return self.jaas_config is not None or self.digest is not None or self.set_acl

    def load(self) -> ZkAuth:
        """The ZkAuth these settings describe; ConfigError naming the flag when they do not fit."""
        digest = Credentials.parse(self.digest) if self.digest else None
        if self.jaas_config:
            try:
                with open(self.jaas_config, encoding="utf-8") as f:
                    text = f.read()
            except OSError as exc:
                raise ConfigError(f"--zk-jaas-config {self.jaas_config}: {exc.strerror}") from None
            return ZkAuth.from_jaas(
                text,
                source=self.jaas_config,
                section=self.sasl_clientconfig,
                digest=digest,
                set_acl=self.set_acl,
            )
        if digest is None and not self.set_acl:
            return NO_AUTH
        return ZkAuth(digest=digest, set_acl=self.set_acl, source="--zk-digest" if digest else "")

    def argv(self) -> tuple[str, ...]:
        """The flags that give a child process these settings (none when nothing was given)."""
        out: list[str] = []
        if self.jaas_config is not None:
            out += ["--zk-jaas-config", os.path.abspath(self.jaas_config)]  # the child may run elsewhere
            if self.sasl_clientconfig != DEFAULT_CLIENT_SECTION:
                out += ["--zk-sasl-clientconfig", self.sasl_clientconfig]
        if self.digest is not None:
            out += ["--zk-digest", self.digest]
        if self.set_acl:
            out.append("--zk-set-acl")
        return tuple(out)


NO_FLAGS = ZkSecurityFlags()
