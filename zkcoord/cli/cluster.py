"""`zkcoord cluster describe --zk CONNECT`: the cluster as ZooKeeper records it — nodes with every registered
endpoint and its security protocol, the controller and its epoch, and every partition's leader, leader epoch and
ISR (read-only; a malformed znode is reported, not fixed)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import MalformedZnode
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration, format_endpoint
from zkcoord.placement.coordinator import OFFSETS_TOPIC


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "cluster",
        help="inspect the ZooKeeper-era cluster (nodes, controller, leaders)",
        epilog=examples(
            "zkcoord cluster describe --zk 127.0.0.1:2181",
            "zkcoord cluster describe --zk 127.0.0.1:2181 --topic __consumer_offsets --json",
        ),
    )
    actions = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe",
        help="nodes, controller, epochs and partition leaders",
        epilog=examples(
            "zkcoord cluster describe --zk 127.0.0.1:2181",
            "zkcoord cluster describe --zk 127.0.0.1:2181 --topic __consumer_offsets --json",
        ),
    )
    describe.add_argument(
        "--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)"
    )
    add_zk_security(describe)
    describe.add_argument(
        "--topic", action="append", metavar="T", help="only these topics (repeatable; default: every topic)"
    )
    describe.add_argument("--json", action="store_true", help="machine-readable output")
    describe.set_defaults(func=run_describe)


def describe_cluster(client: Any, topics: list[str] | None = None) -> dict[str, Any]:
    """A plain dict of what the tree says (the CLI prints it; tests assert on it)."""
    from zkcoord.zk.controller import read_topic_states
    from zkcoord.zk.registry import read_broker_data, read_controller, read_controller_epoch

    nodes = []
    for node_id, data in sorted(read_broker_data(client).items()):
        try:
            reg = BrokerRegistration.decode(paths.broker_path(node_id), data)
            endpoint = reg.plaintext_endpoint()
            nodes.append(
                {
                    "id": node_id,
                    "version": reg.version,
                    "endpoint": endpoint and f"{endpoint[0]}:{endpoint[1]}",  # the PLAINTEXT one (or None)
                    # every listener, whatever its protocol: a SASL_SSL-only node has no PLAINTEXT endpoint
                    "endpoints": [
                        {"listener": name, "protocol": protocol, "host": host, "port": port}
                        for name, protocol, host, port in reg.listeners()
                    ],
                }
            )
        except MalformedZnode as exc:
            nodes.append({"id": node_id, "error": str(exc)})
    controller = read_controller(client)
    epoch = read_controller_epoch(client)
    names = sorted(topics) if topics else sorted(client.get_children(paths.BROKER_TOPICS))
    partitions = []
    for topic in names:
        assignment, states = read_topic_states(client, topic)
        if assignment is None:
            partitions.append({"topic": topic, "error": "no such topic"})
            continue
        for p, replicas in assignment.partitions:
            row: dict[str, Any] = {"topic": topic, "partition": p, "replicas": list(replicas)}
            if p in states:
                s = states[p][0]
                row.update(
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=list(s.isr),
                    controller_epoch=s.controller_epoch,
                )
            else:
                row.update(leader=None, leader_epoch=None, isr=None, controller_epoch=None)
            partitions.append(row)
    return {
        "nodes": nodes,
        "controller": None if controller is None else controller.brokerid,
        "controller_epoch": None if epoch is None else epoch[0],
        "partitions": partitions,
    }


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _endpoint(e: dict[str, Any]) -> str:
    """`SASL_SSL://h:9094`; a listener named apart from its protocol says which: `INTERNAL://h:9093 (SSL)`."""
    text = format_endpoint(e["listener"], e["host"], e["port"])
    return text if e["listener"] == e["protocol"] else f"{text} ({e['protocol']})"


def format_description(desc: dict[str, Any]) -> str:
    out = [
        f"controller: {_show(desc['controller'])}  controller_epoch: {_show(desc['controller_epoch'])}",
        "",
    ]
    node_rows = [["NODE", "VERSION", "ENDPOINTS"]]
    for n in desc["nodes"]:
        shown = ",".join(_endpoint(e) for e in n.get("endpoints", ())) or n.get("error", "-")
        node_rows.append([str(n["id"]), _show(n.get("version")), shown])
    out += [_table(node_rows), ""]
    rows = [["TOPIC", "PARTITION", "LEADER", "LEADER_EPOCH", "ISR", "REPLICAS", "CONTROLLER_EPOCH"]]
    for r in desc["partitions"]:
        if "error" in r:
            rows.append([r["topic"], "-", r["error"], "", "", "", ""])
            continue
        rows.append(
            [
                r["topic"],
                str(r["partition"]),
                _show(r["leader"]),
                _show(r["leader_epoch"]),
                _show(r["isr"]),
                _show(r["replicas"]),
                _show(r["controller_epoch"]),
            ]
        )
    out.append(_table(rows))
    offsets = [r for r in desc["partitions"] if r["topic"] == OFFSETS_TOPIC and r.get("leader") is not None]
    if offsets:
        per_node: dict[int, int] = {}
        for r in offsets:
            per_node[r["leader"]] = per_node.get(r["leader"], 0) + 1
        share = ", ".join(f"node {n}: {c}" for n, c in sorted(per_node.items()))
        out += ["", f"{OFFSETS_TOPIC} leaders (group coordinators): {share}"]
    return "\n".join(out)


def run_describe(args: argparse.Namespace) -> int:
    from zkcoord.zk.session import connect

    client = connect(args.zk, auth=zk_auth(args))
    try:
        desc = describe_cluster(client, args.topic)
    finally:
        client.stop()
        client.close()
    print(json.dumps(desc, indent=2, sort_keys=True) if args.json else format_description(desc))
    return 0
