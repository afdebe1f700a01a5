"""Removing a legacy group's data as 0.10.2's `kafka-consumer-groups --zookeeper --delete` does, but atomically:
a group (or one topic of it) is deleted in one ZooKeeper transaction, refused while any member is registered,
and the same transaction fails (deleting nothing) if a member registers between the check and the delete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError

from zkcoord.errors import ZkcoordError
from zkcoord.legacy import paths
from zkcoord.zk import registry


def delete_ops(client: KazooClient, path: str) -> list[str]:
    """`path` and all descendants, children before parents."""
    try:
        children = client.get_children(path)
    except NoNodeError:
        return []
    out: list[str] = []
    for child in children:
        out.extend(delete_ops(client, f"{path}/{child}"))
    out.append(path)
    return out


def delete_atomically(client: KazooClient, roots: Sequence[str], guard_ids: str | None) -> bool:
    """Delete `roots` recursively in one transaction. `guard_ids`, if given, is the (empty) ids node whose
    deletion in the same transaction fails if a member registered meanwhile. Returns False in that case."""
    doomed: list[str] = []
    for root in roots:
        doomed.extend(delete_ops(client, root))
    if guard_ids is not None and guard_ids not in doomed and client.exists(guard_ids) is not None:
        doomed.insert(0, guard_ids)
    if not doomed:
        return True
    tx = client.transaction()
    for path in doomed:
        tx.delete(path)
    results: list[Any] = tx.commit()
    failures = [r for r in results if isinstance(r, Exception)]
    if not failures:
        return True
    if any(isinstance(r, NotEmptyError) for r in failures):
        return False
    raise ZkcoordError(f"delete transaction failed and deleted nothing: {failures[0]!r}")


def active(client: KazooClient, group: str) -> bool:
    """Whether any member is registered under /consumers/[group]/ids."""
    try:
        return bool(client.get_children(paths.ids_path(group)))
    except NoNodeError:
        return False


def group_topics(client: KazooClient, group: str) -> set[str]:
    """Topics the group owns or has offsets for."""
    return set(registry.children(client, paths.owners_path(group))) | set(
        registry.children(client, paths.offsets_path(group))
    )


def delete_group(client: KazooClient, group: str, topic: str | None) -> tuple[int, str]:
    """(exit code, message) with the wording of 0.10.2's `kafka-consumer-groups --zookeeper --delete`."""
    what = f"group '{group}'" if topic is None else f"group '{group}' topic '{topic}'"
    if not registry.group_exists(client, group):
        return 1, f"Error: Delete for {what} failed because group does not exist."
    if active(client, group):
        return 1, f"Error: Delete for {what} failed because its consumers are still active."
    ids = paths.ids_path(group)
    if topic is None or group_topics(client, group) <= {topic}:
        # (Kafka decides "only topic" from the owners children alone; counting offsets too never deletes another
        # topic's offsets.)
        ok = delete_atomically(client, [paths.group_path(group)], None)
    else:
        ok = delete_atomically(
            client, [paths.owners_topic_path(group, topic), paths.offsets_topic_path(group, topic)], ids
        )
    if not ok:
        return 1, f"Error: Delete for {what} failed because its consumers are still active."
    if topic is None:
        return 0, f"Deleted all consumer group information for group '{group}' in zookeeper."
    return 0, f"Deleted consumer group information for group '{group}' topic '{topic}' in zookeeper."
