"""Ephemeral announcements of running zkcoord processes (under `/zkcoord/...`, outside every path a legacy
reader looks at): create one for this session, list the live ones. An announcement goes with its session."""

from __future__ import annotations

import json
import re

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

PROXIES = "/zkcoord/proxies"  # `zkcoord proxy` nodes: {"node_id", "host", "port", "groups"} each


def announce(client: KazooClient, prefix: str, data: bytes) -> str:
    """Create an ephemeral sequential znode `prefix<seq>` (parents made as needed); returns its path."""
    client.ensure_path(prefix.rsplit("/", 1)[0])
    path: str = client.create(prefix, data, ephemeral=True, sequence=True)
    return path


def read_children(client: KazooClient, parent: str) -> list[tuple[str, bytes]]:
    """(name, data) of each child of `parent`, sorted by name; none when `parent` is missing. A child that
    vanishes while it is read (its session ended) is left out."""
    try:
        names = sorted(client.get_children(parent))
    except NoNodeError:
        return []
    found: list[tuple[str, bytes]] = []
    for name in names:
        try:
            data, _ = client.get(f"{parent}/{name}")
        except NoNodeError:
            continue
        found.append((name, data))
    return found


def proxy_bootstraps(zk: KazooClient, group: str | None = None) -> list[str]:
    """The live proxy nodes' bootstrap addresses (their announcements under /zkcoord/proxies); with `group`, only
    those whose --bridge-zk-groups matches it (the nodes that coordinate it)."""
    found = []
    for _, data in read_children(zk, PROXIES):
        try:
            obj = json.loads(data)
            address = f"{obj['host']}:{int(obj['port'])}"
            pattern = obj.get("groups")
            if group is not None and not (isinstance(pattern, str) and re.fullmatch(pattern, group)):
                continue
            found.append(address)
        except (ValueError, KeyError, TypeError, AttributeError, re.error):
            continue
    return sorted(found)
