"""`zkcoord serve`'s listener flags with Kafka's names (`listeners`, `sasl.enabled.mechanisms`, the JAAS
`KafkaServer` section, `ssl.keystore.location` as PEM, `connection.failed.authentication.delay.ms`), TLS client
authentication (`ssl.client.auth`, `ssl.truststore.location` as PEM) and the authorizer's
(`authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`), read into each listener's validated
`ListenerSecurity` and the node's `RequestAuthorizer` before anything binds."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from zkcoord.errors import ConfigError
from zkcoord.security.acl import AuthorizerConfig
from zkcoord.security.sasl import PLAIN, Listener, SecurityProtocol, parse_listeners, parse_mechanisms
from zkcoord.security.scram import HASHES, ScramCredential
from zkcoord.server.authorization import RequestAuthorizer
from zkcoord.server.listener_security import CLIENT_AUTH, ListenerSecurity, SaslConfig, tls_context
from zkcoord.zk.auth import ZkAuth, parse_jaas
from zkcoord.zk.kafka_acls import AclCache
from zkcoord.zk.kafka_credentials import ScramCredentialStore

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Kafka's ZooKeeper-backed authorizers (1.x and 2.x names); zkcoord's is their model.
ACL_AUTHORIZERS = ("kafka.security.auth.SimpleAclAuthorizer", "kafka.security.authorizer.AclAuthorizer")


def add_listener_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kafka listeners and security (docs/security.md)")
    group.add_argument(
        "--listeners",
        metavar="LIST",
        help="Kafka's listeners: NAME://HOST:PORT,... with NAME one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL "
        "(--listen adds a PLAINTEXT one and is then the address the node registers)",
    )
    group.add_argument(
        "--sasl.enabled.mechanisms",
        dest="sasl_mechanisms",
        default="SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        metavar="LIST",
        help="SASL mechanisms of the SASL_* listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default: all three)",
    )
    group.add_argument(
        "--jaas-config",
        metavar="FILE",
        help='the broker\'s JAAS file: PLAIN users are the user_NAME="PASSWORD" options of its KafkaServer '
        "section (PlainLoginModule), as -Djava.security.auth.login.config",
    )
    group.add_argument(
        "--security-zk",
        metavar="CONNECT",
        help="ZooKeeper holding SCRAM credentials (/config/users) (default: --zk; a single node needs it for SCRAM)",
    )
    group.add_argument(
        "--ssl.keystore.location",
        dest="ssl_keystore",
        type=Path,
        metavar="PEM",
        help="PEM file with the server certificate chain and its private key (ssl.keystore.type=PEM), for SSL "
        "and SASL_SSL listeners",
    )
    group.add_argument(
        "--ssl.key.location",
        dest="ssl_key",
        type=Path,
        metavar="PEM",
        help="the private key, when it is not in the keystore file",
    )
    group.add_argument(
        "--ssl.truststore.location",
        dest="ssl_truststore",
        type=Path,
        metavar="PEM",
        help="PEM CA certificates (ssl.truststore.type=PEM) that client certificates must be signed by, with "
        "--ssl.client.auth required|requested",
    )
    group.add_argument(
        "--ssl.client.auth",
        dest="ssl_client_auth",
        choices=tuple(CLIENT_AUTH),
        default="none",
        help="Kafka's ssl.client.auth for SSL and SASL_SSL listeners: required (no certificate, no connection), "
        "requested (without one the client is User:ANONYMOUS) or none (default); on an SSL listener the "
        "principal is User:<the certificate's subject DN>, on SASL_SSL the SASL login's",
    )
    group.add_argument(
        "--ssl.principal.mapping.rules",
        dest="ssl_principal_mapping_rules",
        default="DEFAULT",
        metavar="RULES",
        help="only DEFAULT (the principal is the whole subject DN, as Kafka's default)",
    )
    group.add_argument(
        "--connection.failed.authentication.delay.ms",
        dest="failed_auth_delay_ms",
        type=int,
        default=100,
        metavar="MS",
        help="close a connection this long after answering its failed login (default 100)",
    )
    group.add_argument(
        "--authorizer.class.name",
        dest="authorizer",
        choices=ACL_AUTHORIZERS,
        default=None,
        help="authorize every request with Kafka's ACLs from ZooKeeper /kafka-acl (--zk or --security-zk) "
        "(default: none, every client may do everything)",
    )
    group.add_argument(
        "--super.users",
        dest="super_users",
        default="",
        metavar="LIST",
        help="principals allowed everything whatever the ACLs, ';'-separated: User:admin;User:ops",
    )
    group.add_argument(
        "--allow.everyone.if.no.acl.found",
        dest="allow_if_no_acl",
        choices=("true", "false"),
        default="false",
        help="allow a request on a resource that has no ACL at all (default false, as Kafka)",
    )


def plain_users(text: str, source: str) -> dict[str, str]:
    """`user_NAME="PASSWORD"` options of the KafkaServer section's PlainLoginModule (Kafka's
    PlainServerCallbackHandler)."""
    sections = parse_jaas(text, source)
    if "KafkaServer" not in sections:
        raise ConfigError(
            f"{source}: no KafkaServer section (found: {', '.join(sorted(sections)) or 'none'})"
        )
    users: dict[str, str] = {}
    for module in sections["KafkaServer"]:
        if module.class_name == PLAIN_LOGIN_MODULE:
            users.update({k[5:]: v for k, v in module.options if k.startswith("user_") and len(k) > 5})
    if not users:
        raise ConfigError(
            f'{source}: the KafkaServer section has no {PLAIN_LOGIN_MODULE} user_NAME="PASSWORD"'
        )
    return users


@dataclass
class ListenerSetup:
    """The primary listener (the node's advertised and registered address) and the further ones."""

    host: str
    port: int
    security: ListenerSecurity | None
    more: tuple[tuple[str, int, ListenerSecurity | None], ...]
    closers: list[Callable[[], None]] = field(default_factory=list)
    authorizer: RequestAuthorizer | None = None

    def close(self) -> None:
        for close in self.closers:
            close()


def listener_setup(args: argparse.Namespace, auth: ZkAuth) -> ListenerSetup:
    listeners: list[Listener] = []
    if args.listeners:
        listeners.extend(parse_listeners(args.listeners))
    if args.listen is not None or not listeners:
        host, port = args.listen or ("127.0.0.1", 9092)
        if any(x.protocol is SecurityProtocol.PLAINTEXT for x in listeners):
            raise ConfigError("--listen is a PLAINTEXT listener and --listeners has one already")
        listeners.insert(0, Listener(SecurityProtocol.PLAINTEXT, host, port))
    setup = ListenerSetup(listeners[0].host, listeners[0].port, None, ())
    tls = sasl = None
    if any(x.protocol.tls for x in listeners):
        if args.ssl_keystore is None:
            raise ConfigError("an SSL or SASL_SSL listener needs --ssl.keystore.location PEM")
        tls = tls_context(args.ssl_keystore, args.ssl_key, args.ssl_truststore, _client_auth(args))
    if any(x.protocol.sasl for x in listeners):
        sasl = _sasl_config(args, auth, setup)
    secured = [
        ListenerSecurity(tls if x.protocol.tls else None, sasl if x.protocol.sasl else None)
        if x.protocol is not SecurityProtocol.PLAINTEXT
        else None
        for x in listeners
    ]
    setup.security = secured[0]
    setup.more = tuple((x.host, x.port, sec) for x, sec in zip(listeners[1:], secured[1:], strict=True))
    if args.authorizer is not None:
        setup.authorizer = _authorizer(args, auth, setup)
    return setup


def _client_auth(args: argparse.Namespace) -> str:
    if args.ssl_principal_mapping_rules.strip() != "DEFAULT":
        raise ConfigError(
            f"--ssl.principal.mapping.rules {args.ssl_principal_mapping_rules!r}: only DEFAULT is supported "
            "(the principal is User:<the certificate's whole subject DN>)"
        )
    if args.ssl_truststore is not None and args.ssl_client_auth == "none":
        # Before ssl.client.auth existed here a truststore alone required client certificates: refuse rather
        # than silently stop checking them.
        raise ConfigError(
            "--ssl.truststore.location is only used to check client certificates: give --ssl.client.auth "
            "required or requested (Kafka's default is none)"
        )
    return str(args.ssl_client_auth)


def _authorizer(args: argparse.Namespace, auth: ZkAuth, setup: ListenerSetup) -> RequestAuthorizer:
    config = AuthorizerConfig(
        AuthorizerConfig.parse_super_users(args.super_users), args.allow_if_no_acl == "true"
    )
    connect = args.security_zk or args.zk
    if not connect:
        raise ConfigError(
            f"{args.authorizer} reads ACLs from ZooKeeper (/kafka-acl): give --zk or --security-zk"
        )
    cache = AclCache(connect, auth)
    setup.closers.append(cache.close)
    cache.start()
    return RequestAuthorizer(cache, config)


def _sasl_config(args: argparse.Namespace, auth: ZkAuth, setup: ListenerSetup) -> SaslConfig:
    mechanisms = parse_mechanisms(args.sasl_mechanisms)
    users: dict[str, str] = {}
    if PLAIN in mechanisms and args.jaas_config:
        try:
            text = Path(args.jaas_config).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--jaas-config {args.jaas_config}: {exc.strerror}") from None
        users = plain_users(text, args.jaas_config)
    lookup = None
    if any(m in HASHES for m in mechanisms):
        connect = args.security_zk or args.zk
        if not connect:
            raise ConfigError(
                "SCRAM credentials live in ZooKeeper (/config/users): give --zk or --security-zk, or drop the "
                "SCRAM mechanisms from --sasl.enabled.mechanisms"
            )
        store = ScramCredentialStore(connect, auth)
        store.start()
        setup.closers.append(store.close)

        async def lookup(user: str, mechanism: str) -> ScramCredential | None:
            return await asyncio.to_thread(store.credential, user, mechanism)

    return SaslConfig(mechanisms, users, lookup, args.failed_auth_delay_ms)
