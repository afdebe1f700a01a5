"""Who is in a ZooKeeper-era group and who owns what, by protocol: a legacy member's registration has no
"zkcoord" key, a broker-protocol member's (written by `zkcoord serve --bridge-zk-groups`) carries
`"zkcoord":{"protocol":"classic",...}`; ownership comes from the owner znodes (`<consumer id>-<thread>`).
Read-only: nothing here writes a znode."""

from __future__ import annotations

import json
from dataclasses import dataclass

from zkcoord.legacy import paths
from zkcoord.legacy.topic_partition import TopicPartition
from zkcoord.zk import registry
from zkcoord.zk.registrations import read_children
from zkcoord.zk.session import Client

LEGACY = "legacy"


@dataclass(frozen=True, slots=True)
class MemberView:
    """One registered member: its consumer id, its protocol ("legacy", or the "zkcoord" key's protocol, e.g.
    "classic") and the partitions its threads hold owner znodes for, sorted."""

    consumer_id: str
    protocol: str
    owned: tuple[TopicPartition, ...]


def _protocol(data: bytes) -> str:
    # A registration another tool wrote may not be JSON we understand; it is still a legacy member's.
    try:
        obj = json.loads(data)
    except ValueError:
        return LEGACY
    extra = obj.get("zkcoord") if isinstance(obj, dict) else None
    if isinstance(extra, dict) and isinstance(extra.get("protocol"), str):
        return str(extra["protocol"])
    return LEGACY


def read_members(client: Client, group: str) -> list[MemberView]:
    """The members of `group` in consumer-id order, each with its protocol and owned partitions."""
    owners = registry.read_owners(client, group)
    owned: dict[str, list[TopicPartition]] = {}
    for tp, thread in owners.items():
        owned.setdefault(thread.rpartition("-")[0], []).append(tp)
    return [
        MemberView(cid, _protocol(data), tuple(sorted(owned.get(cid, ()))))
        for cid, data in read_children(client, paths.ids_path(group))
    ]
