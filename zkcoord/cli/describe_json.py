"""`zkcoord legacy describe --bootstrap / --json / --watch`: one view of a group's two offset stores side by side,
per partition: ZooKeeper's committed offset, the coordinator's (OffsetFetch), the log end offset, the lag against
each, and the owner (a broker-protocol member by its client id). SCHEMA is the stable contract of the JSON
document (fields are only added, never renamed or retyped, without bumping VERSION).

Through a coordinator offset bridge (`serve --bridge-zk-offsets`, registered under /zkcoord/offset-bridges) an
OffsetFetch answers max(coordinator, ZooKeeper) per partition: the document says so (`coordinator.offsets` is
`bridged`), so a coordinator value equal to ZooKeeper's is never mistaken for the coordinator holding it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from zkcoord.legacy import paths
from zkcoord.legacy.ids import consumer_of_thread, java_sorted
from zkcoord.topic_partition import TopicPartition
from zkcoord.zk import registry
from zkcoord.zk.session import Client

VERSION = 1

_OFFSET = {"type": ["integer", "null"]}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "group", "time", "coordinator", "partitions", "members"],
    "properties": {
        "version": {"const": VERSION},
        "group": {"type": "string"},
        "time": {"type": "string", "description": "ISO 8601 UTC, when the view was read"},
        "coordinator": {
            "type": "object",
            "required": ["bootstrap", "offsets", "error"],
            "properties": {
                "bootstrap": {"type": ["string", "null"]},
                "offsets": {
                    "enum": ["coordinator", "bridged", None],
                    "description": "coordinator: its own offsets; bridged: max(coordinator, ZooKeeper) through "
                    "an offset bridge; null: not read",
                },
                "error": {"type": ["string", "null"]},
            },
            "additionalProperties": False,
        },
        "partitions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "topic", "partition", "zookeeper_offset", "coordinator_offset", "log_end_offset",
                    "zookeeper_lag", "coordinator_lag", "owner",
                ],
                "properties": {
                    "topic": {"type": "string"},
                    "partition": {"type": "integer", "minimum": 0},
                    "zookeeper_offset": _OFFSET,
                    "coordinator_offset": _OFFSET,
                    "log_end_offset": _OFFSET,
                    "zookeeper_lag": _OFFSET,
                    "coordinator_lag": _OFFSET,
                    "owner": {
                        "type": ["object", "null"],
                        "required": ["consumer_id", "client_id", "thread"],
                        "properties": {
                            "consumer_id": {"type": "string"},
                            "client_id": {"type": ["string", "null"]},
                            "thread": {"type": "string"},
                        },
                        "additionalProperties": False,
                    },
                },
                "additionalProperties": False,
            },
        },
        "members": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["consumer_id", "client_id", "protocol", "topics"],
                "properties": {
                    "consumer_id": {"type": "string"},
                    "client_id": {"type": ["string", "null"]},
                    "protocol": {"enum": ["legacy", "classic"]},
                    "topics": {"type": "array", "items": {"type": "string"}},
                },
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}  # fmt: skip

EndOffsets = Callable[[Client, list[TopicPartition], int], dict[TopicPartition, int]]
CoordinatorRead = Callable[[str], tuple[dict[TopicPartition, int], str | None]]


def _lag(end: int | None, offset: int | None) -> int | None:
    return None if end is None or offset is None or offset < 0 else max(end - offset, 0)


def build_view(
    client: Client,
    group: str,
    *,
    bootstrap: str | None,
    end_offsets: EndOffsets,
    coordinator: CoordinatorRead | None,
    timeout_ms: int,
    now_ms: int,
) -> dict[str, Any]:
    """The group's view (SCHEMA): every partition of every topic the group subscribes to, owns or has offsets
    for in either store, in (topic, partition) order."""
    from zkcoord.bridge.mixed_policy import classic_marker
    from zkcoord.bridge.zk_store import list_offset_bridges
    from zkcoord.zk import mixed_group

    ids = mixed_group.read_ids(client, group)
    members = []
    topics: set[str] = set()
    client_ids: dict[str, str] = {}
    for cid, data in ids.items():
        marker = classic_marker(data) or {}
        try:
            body = json.loads(data or b"")
            sub = body.get("subscription") if isinstance(body, dict) else None
        except ValueError:
            sub = None
        subscribed = sorted(sub) if isinstance(sub, dict) and body.get("pattern") == "static" else []
        topics.update(subscribed)
        if marker.get("client_id"):
            client_ids[cid] = marker["client_id"]
        members.append(
            {
                "consumer_id": cid,
                "client_id": marker.get("client_id"),
                "protocol": "classic" if marker else "legacy",
                "topics": subscribed,
            }
        )
    owners = registry.read_owners(client, group)
    zk_offsets = registry.read_offsets(client, group)
    coord: dict[TopicPartition, int] = {}
    error = None
    if coordinator is not None and bootstrap is not None:
        coord, error = coordinator(group)
    topics.update(t for t, _ in [*owners, *zk_offsets, *coord])
    tps: set[TopicPartition] = {TopicPartition(*tp) for tp in [*owners, *zk_offsets, *coord]}
    for topic in topics:
        assignment = registry.read_topic(client, topic)
        if assignment is not None:
            tps.update(TopicPartition(topic, p) for p in assignment.partition_ids)
    ordered = sorted(tps, key=lambda tp: (java_sorted([tp.topic])[0], tp.partition))
    ends = end_offsets(client, ordered, timeout_ms) if ordered else {}
    partitions = []
    for tp in ordered:
        zk_off, co_off, end = zk_offsets.get(tp), coord.get(tp), ends.get(tp)
        thread = owners.get(tp)
        owner = None
        if thread is not None:
            cid = consumer_of_thread(thread)
            owner = {"consumer_id": cid, "client_id": client_ids.get(cid), "thread": thread}
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "zookeeper_offset": zk_off,
                "coordinator_offset": co_off,
                "log_end_offset": end,
                "zookeeper_lag": _lag(end, zk_off),
                "coordinator_lag": _lag(end, co_off),
                "owner": owner,
            }
        )
    read = bootstrap is not None and error is None
    return {
        "version": VERSION,
        "group": group,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now_ms / 1000)),
        "coordinator": {
            "bootstrap": bootstrap,
            "offsets": ("bridged" if list_offset_bridges(client) else "coordinator") if read else None,
            "error": error,
        },
        "partitions": partitions,
        "members": members,
    }


ROW = "%-30s %-10s %-12s %-12s %-14s %-10s %-10s %s"


def render(view: dict[str, Any]) -> list[str]:
    """The view as a table: both stores side by side."""
    coord = view["coordinator"]
    lines = [f"group {view['group']} at {view['time']}"]
    if coord["bootstrap"] is None:
        lines.append("  coordinator offsets: not read (give --bootstrap HOST:PORT)")
    elif coord["error"] is not None:
        lines.append(f"  coordinator offsets: unavailable from {coord['bootstrap']}: {coord['error']}")
    elif coord["offsets"] == "bridged":
        lines.append(
            "  coordinator offsets: through an offset bridge, max(coordinator, ZooKeeper) per partition"
        )
    lines.append(ROW % ("TOPIC", "PARTITION", "ZK-OFFSET", "COORD-OFFSET", "LOG-END-OFFSET", "ZK-LAG", "COORD-LAG",
                        "OWNER"))  # fmt: skip

    def cell(v: object) -> str:
        return "-" if v is None else str(v)

    for p in view["partitions"]:
        owner = p["owner"]
        who = "-" if owner is None else (
            f"{owner['client_id']} ({owner['consumer_id']})" if owner["client_id"] else owner["consumer_id"]
        )  # fmt: skip
        lines.append(
            ROW % (p["topic"], p["partition"], cell(p["zookeeper_offset"]), cell(p["coordinator_offset"]),
                   cell(p["log_end_offset"]), cell(p["zookeeper_lag"]), cell(p["coordinator_lag"]), who)
        )  # fmt: skip
    return lines


def _coordinator_reader(args: argparse.Namespace) -> tuple[CoordinatorRead | None, Callable[[], None]]:
    if not args.bootstrap:
        return None, lambda: None
    from zkcoord.bridge.broker_store import BrokerOffsetStore

    stores: dict[str, BrokerOffsetStore] = {}

    def read(group: str) -> tuple[dict[TopicPartition, int], str | None]:
        try:
            if group not in stores:
                stores[group] = BrokerOffsetStore(
                    args.bootstrap,
                    group,
                    request_timeout_ms=args.timeout_ms,
                    bootstrap_timeout_ms=args.timeout_ms,
                )
            got = stores[group].read_offsets(None)
        except Exception as exc:  # unreachable: the view says so, ZooKeeper's side is still shown
            return {}, f"{type(exc).__name__}: {exc}"
        if got.request_error is not None:
            return {}, str(got.request_error)
        return {TopicPartition(*tp): off for tp, off in got.offsets.items() if off >= 0}, None

    def close() -> None:
        for store in stores.values():
            store.close()

    return read, close


def run(
    args: argparse.Namespace,
    group: str,
    *,
    connect: Callable[[argparse.Namespace], AbstractContextManager[Client]],
    end_offsets: EndOffsets,
    views: Iterable[int] | None = None,
) -> int:
    """Print the view once, or every --watch seconds until interrupted (`views`: a bound, for tests). `connect`
    and `end_offsets` are `legacy describe`'s own (zkcoord.cli.legacy), handed in so the modules stay acyclic."""
    if args.watch is not None and args.watch <= 0:
        from zkcoord.errors import ConfigError

        raise ConfigError(f"--watch {args.watch}: must be a positive number of seconds")
    if args.metrics_listen is not None and args.watch is None:
        from zkcoord.errors import ConfigError

        raise ConfigError("--metrics-listen serves the view while it is watched: add --watch S")
    coordinator, close = _coordinator_reader(args)
    metrics = endpoint = None
    if args.metrics_listen is not None:
        from zkcoord.metrics import GroupViewMetrics

        metrics = GroupViewMetrics()
        endpoint = metrics.serve(*args.metrics_listen)
        print(f"metrics on http://{endpoint.host}:{endpoint.port}/metrics", file=sys.stderr, flush=True)
    try:
        with connect(args) as client:
            if not registry.group_exists(client, group) and coordinator is None:
                print(
                    f"Error: The consumer group '{paths.validate_group(group)}' does not exist.",
                    file=sys.stderr,
                )
                return 1
            rounds = views if views is not None else (iter(int, 1) if args.watch is not None else range(1))
            for i, _ in enumerate(rounds):
                if i:
                    time.sleep(args.watch)  # the refresh period the operator asked for
                view = build_view(
                    client, group, bootstrap=args.bootstrap, end_offsets=end_offsets, coordinator=coordinator,
                    timeout_ms=args.timeout_ms, now_ms=int(time.time() * 1000),
                )  # fmt: skip
                if metrics is not None:
                    metrics.update(view)
                if args.json:
                    print(json.dumps(view, sort_keys=True, indent=None if args.watch else 2), flush=True)
                else:
                    print("\n".join(render(view)) + ("\n" if args.watch else ""), flush=True)
    except KeyboardInterrupt:
        return 0
    finally:
        close()
        if endpoint is not None:
            endpoint.stop()
    return 0
