"""`zkcoord replay DIR`: rebuild the coordinator's groups and offsets from a record log and print them (read-only),
or with `--repair` cut a damaged log's damaged ranges out (kept aside) so a node can start on it again."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

from zkcoord.cli.options import examples
from zkcoord.group import handlers
from zkcoord.group.config import GroupConfig
from zkcoord.group.consumer_model import ConsumerGroup
from zkcoord.group.model import CoordinatorState
from zkcoord.records.offsets import OffsetCommitValue, decode_record
from zkcoord.storage import FileRecordStore
from zkcoord.storage.file_store import repair


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay",
        help="rebuild groups and offsets from a coordinator record log",
        description="Replay a coordinator record log (read-only; a torn tail is reported, not truncated) and "
        "print every group (state, generation, protocol, leader, members) and its committed offsets; consumer-protocol "
        "(KIP-848) groups with their epochs and each member's epoch, state and assignment. A log "
        "damaged where a crash cannot explain it (a bad frame followed by valid ones) is refused with exit "
        "status 2 and a report naming each file, byte range and the valid records after it, as `serve` "
        "refuses to start on it. --repair then rewrites the damaged segments without the damaged bytes.",
        epilog=examples(
            "zkcoord replay /var/lib/zkcoord/group-records",
            "zkcoord replay /var/lib/zkcoord/group-records --json | jq '.groups[0]'",
            "zkcoord replay /var/lib/zkcoord/group-records --repair   # node stopped; then serve starts again",
        ),
    )
    parser.add_argument("directory", help="the record log directory (FileRecordStore)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="stop every process using DIR first. Rewrites each damaged segment without its damaged byte "
        "ranges (each kept as SEGMENT.damaged-START-END, the original as SEGMENT.before-repair; the records "
        "in the damaged ranges are lost, every valid record is kept in order), moves a torn tail aside, "
        "then replays the result. Default: off (read-only)",
    )
    parser.set_defaults(func=run)


def rebuild(directory: str) -> dict[str, Any]:
    store = FileRecordStore(directory, read_only=True)
    raw = list(store.load())
    state = CoordinatorState(GroupConfig())
    handlers.load(state, [decode_record(k, v) for k, v in raw], int(time.time() * 1000))
    groups = []
    for gid, group in sorted(state.groups.items()):
        offsets = state.view.offsets.get(gid, {})
        groups.append(
            {
                "group": gid,
                "state": group.state.value,
                "generation": group.generation,
                "protocol_type": group.protocol_type,
                "protocol": group.protocol_name,
                "leader": group.leader_id,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "session_timeout_ms": m.session_timeout_ms,
                        "rebalance_timeout_ms": m.rebalance_timeout_ms,
                        "assignment_bytes": len(m.assignment),
                    }
                    for m in group.members.values()
                ],
                "offsets": _offsets(offsets),
            }
        )
    consumer_groups = []
    for gid, cg in sorted(state.consumer_groups.items()):

        def named(assignment: Mapping[str, frozenset[int]], cg: ConsumerGroup = cg) -> dict[str, list[int]]:
            return {cg.topic_name(t) or t: sorted(ps) for t, ps in sorted(assignment.items())}

        consumer_groups.append(
            {
                "group": gid,
                "type": "consumer",
                "state": cg.state_name(),
                "group_epoch": cg.group_epoch,
                "assignment_epoch": cg.assignment_epoch,
                "members": [
                    {
                        "member_id": mid,
                        "member_epoch": m.member_epoch,
                        "state": m.state.name,
                        "client_id": m.metadata.client_id,
                        "client_host": m.metadata.client_host,
                        "subscribed_topics": list(m.metadata.subscribed_topic_names),
                        "assigned": named(m.assigned),
                        "pending_revocation": named(m.pending_revocation),
                        "target": named(cg.target.get(mid, {})),
                    }
                    for mid, m in sorted(cg.members.items())
                ],
                "offsets": _offsets(state.view.offsets.get(gid, {})),
            }
        )
    return {
        "directory": directory,
        "records": len(raw),
        "torn_tail_bytes": store.dropped_tail_bytes,
        "groups": groups,
        "consumer_groups": consumer_groups,  # KIP-848 groups
    }


def _offsets(offsets: Mapping[tuple[str, int], OffsetCommitValue]) -> list[dict[str, Any]]:
    return [
        {
            "topic": topic,
            "partition": partition,
            "offset": v.offset,
            "leader_epoch": v.leader_epoch,
            "metadata": v.metadata,
            "commit_timestamp": v.commit_timestamp,
            "expire_timestamp": v.expire_timestamp,
        }
        for (topic, partition), v in sorted(offsets.items())
    ]


def run(args: argparse.Namespace) -> int:
    if args.repair:
        done = repair(args.directory)
        for line in done or [f"{args.directory}: no damage found, nothing changed"]:
            print(f"repair: {line}", file=sys.stderr if args.json else sys.stdout, flush=True)
    result = rebuild(args.directory)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['directory']}: {result['records']} records, {len(result['groups'])} groups, "
        f"{len(result['consumer_groups'])} consumer groups"
    )
    if result["torn_tail_bytes"]:
        print(f"  (a torn tail of {result['torn_tail_bytes']} bytes was ignored)")
    for g in result["groups"]:
        print(
            f"group {g['group']}: {g['state']} generation={g['generation']} "
            f"protocol={g['protocol_type'] or '-'}/{g['protocol'] or '-'} leader={g['leader'] or '-'}"
        )
        for m in g["members"]:
            instance = f" instance={m['group_instance_id']}" if m["group_instance_id"] else ""
            print(
                f"  member {m['member_id']}{instance} client={m['client_id']} host={m['client_host']} "
                f"assignment={m['assignment_bytes']}B"
            )
        _print_offsets(g["offsets"])
    for g in result["consumer_groups"]:
        print(
            f"consumer group {g['group']}: {g['state']} group_epoch={g['group_epoch']} "
            f"assignment_epoch={g['assignment_epoch']}"
        )
        for m in g["members"]:
            print(
                f"  member {m['member_id']} epoch={m['member_epoch']} {m['state']} client={m['client_id']} "
                f"host={m['client_host']} assigned={m['assigned']} pending_revocation={m['pending_revocation']}"
            )
        _print_offsets(g["offsets"])
    return 0


def _print_offsets(offsets: list[dict[str, Any]]) -> None:
    for o in offsets:
        print(
            f"  offset {o['topic']}-{o['partition']} = {o['offset']} "
            f"(epoch {o['leader_epoch']}, metadata {o['metadata']!r})"
        )
