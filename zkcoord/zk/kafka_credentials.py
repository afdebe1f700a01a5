"""Kafka's SCRAM credentials in ZooKeeper: `/config/users/<user>` holding
`{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=N"}}`, as
`kafka-configs.sh --zookeeper ... --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users` writes it.

Guarantees: a write keeps the user's other config entries and announces the change under `/config/changes`
(`{"version":2,"entity_path":"users/<user>"}`) as Kafka's AdminZkClient does, so running Kafka brokers pick it up;
a read of an absent user is None, of a malformed znode (any bytes: size and depth bounded) a MalformedZnode naming
it, never another exception; a write over a malformed znode is refused (the znode is left as it is). Reads are
never cached, so a credential written by any tool counts from the next login, a repaired one too.
"""

from __future__ import annotations

import json
from typing import Any

from kazoo.exceptions import NoNodeError

from zkcoord.errors import ConfigError, MalformedZnode
from zkcoord.security.scram import HASHES, ScramCredential
from zkcoord.security.stored_json import brief, load_stored_json
from zkcoord.zk.auth import NO_AUTH, ZkAuth
from zkcoord.zk.session import Client, connect, update_znode

USERS_PATH = "/config/users"
CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"


def user_path(user: str) -> str:
    if not user or "/" in user or user in (".", ".."):
        raise ConfigError(f"a SCRAM user name cannot be empty, '.', '..' or contain '/': {user!r}")
    return f"{USERS_PATH}/{user}"


def _user_config(client: Client, path: str) -> tuple[dict[str, Any], int | None]:
    """The znode's `config` map and version (None when absent)."""
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return {}, None
    try:
        doc = load_stored_json(data) if data else {"version": 1, "config": {}}
    except ConfigError as exc:
        raise MalformedZnode(path, f"not Kafka's entity config JSON: {exc}", data) from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise MalformedZnode(path, 'not Kafka\'s entity config JSON: no "config" object', data)
    return config, stat.version


def read_scram(client: Client, user: str, mechanism: str) -> ScramCredential | None:
    """The user's stored credential for `mechanism`, or None (no such user, or none for that mechanism)."""
    path = user_path(user)
    config, _ = _user_config(client, path)
    text = config.get(mechanism)
    if text is None:
        return None
    if not isinstance(text, str):
        raise MalformedZnode(path, f"{mechanism}: {brief(text)} is not a credential string")
    try:
        return ScramCredential.from_kafka(text)
    except ConfigError as exc:
        raise MalformedZnode(path, f"{mechanism}: {exc}") from None


def write_scram(client: Client, user: str, mechanism: str, credential: ScramCredential) -> None:
    """Store (replace) the user's credential for `mechanism`, keeping the user's other entries."""
    if mechanism not in HASHES:
        raise ConfigError(f"{mechanism} is not a SCRAM mechanism ({', '.join(sorted(HASHES))})")
    path = user_path(user)

    def merge() -> tuple[bytes, int | None]:
        config, version = _user_config(client, path)
        config[mechanism] = credential.to_kafka()
        return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode(), version

    update_znode(client, path, merge)
    client.create(
        f"{CHANGES_PATH}/{CHANGE_PREFIX}",
        json.dumps({"version": 2, "entity_path": f"users/{user}"}, separators=(",", ":")).encode(),
        sequence=True,
        makepath=True,
    )


class ScramCredentialStore:
    """A ZooKeeper session that reads SCRAM credentials for a serving node (its own session, closed by `close`)."""

    def __init__(self, hosts: str, auth: ZkAuth = NO_AUTH) -> None:
        self.hosts = hosts
        self.auth = auth
        self._client: Client | None = None

    def start(self) -> None:
        self._client = connect(self.hosts, auth=self.auth)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential, None for no such user (or a name that cannot be one); MalformedZnode when the
        user's znode does not parse (the caller fails that login and reports it), ZooKeeper errors as raised."""
        assert self._client is not None, "start() first"
        try:
            return read_scram(self._client, user, mechanism)
        except MalformedZnode:
            raise
        except ConfigError:
            return None  # an unusable user name cannot log in

    def close(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None
