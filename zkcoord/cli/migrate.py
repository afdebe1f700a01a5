"""`zkcoord migrate`: move consumer groups' offsets from ZooKeeper to the broker and back — plan, export,
import, dual-commit, verify, finalize, rollback, status — plus offset-store snapshots and the Spark
divergence report. Exit status: 0 done, 1 verify found disagreements, 2 a step was refused or failed.

For broker-protocol members, the coordinator keeps ZooKeeper current itself when it runs with
`zkcoord serve --bridge-zk-offsets` (docs/migration.md §9); `plan` and `verify` report whether one is running.
With `serve --bridge-zk-groups`, members move one at a time: `plan`/`status` name the next one, `rollback`
walks them back (docs/migration.md, "Member-by-member migration: the workflow"). In front of your own brokers
(`zkcoord proxy`), `handoff` then moves the group to their coordinator (docs/proxy.md). Every step ends with a
`next` block whose `$ ` lines are commands that work as printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from zkcoord.cli.client_security import add_command_config, command_config
from zkcoord.cli.options import add_config_option, examples
from zkcoord.cli.zkargs import add_zk_security, zk_auth
from zkcoord.errors import ConfigError, ZkcoordError

STEPS = ("plan", "dual-commit", "verify", "finalize", "rollback", "status")
DEFAULT_STATE_DIR = ".zkcoord-migrate"
JSON_STEPS = ("plan", "verify", "status")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "migrate",
        help="migrate consumer groups' offsets from ZooKeeper to the broker (and back)",
        description=__doc__,
        epilog=examples(
            "zkcoord migrate plan --zk 127.0.0.1:2181 --bootstrap 127.0.0.1:9092 --group orders",
            "zkcoord migrate verify --config migrate.properties   # flags from a properties file",
        ),
    )
    cmds = parser.add_subparsers(dest="migrate_command", metavar="STEP", required=True)

    # What --bootstrap is for: the coordinator the group moves to, or (handoff) the cluster it is handed to.
    to_coordinator = (
        "the coordinator the group moves to: a broker, `zkcoord serve`, or `zkcoord proxy` in front of your "
        "cluster (default: none; plan and status then show ZooKeeper's side only, the other steps need it)"
    )
    to_cluster = (
        "a broker of your cluster, whose own coordinator receives the group; not the proxy (default: the first "
        "endpoint in /brokers/ids of --command-config's security.protocol)"
    )

    def common(
        p: argparse.ArgumentParser, *, groups: bool = True, bootstrap: bool = True, bootstrap_help: str = ""
    ) -> None:
        p.add_argument(
            "--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)"
        )
        add_zk_security(p)
        if bootstrap:
            p.add_argument("--bootstrap", metavar="HOST:PORT", help=bootstrap_help or to_coordinator)
            add_command_config(p)
        if groups:
            p.add_argument("--group", action="append", default=[], metavar="G", help="a group (repeatable)")
            p.add_argument("--groups-file", metavar="F", help="file with one group id per line")
        p.add_argument(
            "--request-timeout-ms",
            type=int,
            default=10_000,
            metavar="MS",
            help="how long one ZooKeeper or broker request may take, in milliseconds",
        )
        add_config_option(p)

    def step_examples(step: str) -> str:
        return examples(
            f"zkcoord migrate {step} --zk 127.0.0.1:2181 --bootstrap 127.0.0.1:9092 --group orders",
            f"zkcoord migrate {step} --config migrate.properties  # zk=..., bootstrap=..., groups-file=...",
        )

    for step in STEPS:
        p = cmds.add_parser(
            step, help=_STEP_HELP[step], description=_STEP_HELP[step], epilog=step_examples(step)
        )
        common(p)
        p.add_argument(
            "--state-dir",
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help=f"directory where journals are written (default: {DEFAULT_STATE_DIR})",
        )
        if step in JSON_STEPS:
            p.add_argument(
                "--json",
                action="store_true",
                help="one JSON document on stdout instead of text (schema: migration/workflow/json_schema.py, "
                "docs/migration.md 'Machine-readable output'; exit status unchanged)",
            )
        if step in ("verify", "finalize"):
            p.add_argument(
                "--max-lag",
                type=int,
                default=0,
                metavar="N",
                help="tolerated |zk - broker| per partition, in offsets",
            )
        p.set_defaults(func=_run_step, step=step)

    p = cmds.add_parser(
        "repair",
        help="remove what stopped coordinators left of a mixed group's broker-protocol members",
        description="A mixed group's broker-protocol members hold persistent ids and owner znodes, so a "
        "coordinator's crash never frees partitions they may still consume. When every coordinator of the group "
        "is gone for good (or its broker-protocol members are all stopped), this deletes those znodes and the "
        "group's fence so the legacy members can take the partitions. Without --force it only lists what it "
        "would delete.",
        epilog=examples(
            "zkcoord migrate repair --zk 127.0.0.1:2181 --group orders            # show what would go",
            "zkcoord migrate repair --zk 127.0.0.1:2181 --group orders --force    # delete it",
        ),
    )
    common(p, bootstrap=False)
    p.add_argument(
        "--force",
        action="store_true",
        help="delete; without it the command only lists the znodes it would delete (default: list only)",
    )
    p.set_defaults(func=_run_repair)

    p = cmds.add_parser(
        "handoff",
        help="move a group the proxies coordinate (no ZooKeeper member left) to the cluster's own coordinator",
        description="For a group coordinated by `zkcoord proxy` with no ZooKeeper member left: every member is made "
        "to commit and release everything (the proxies admit none meanwhile), the group's committed offsets are "
        "written to the cluster's own coordinator and read back, then the proxies forward the group's requests "
        "(FindCoordinator included) to the cluster, so the members rejoin there. Exits 0 once they have; "
        "journaled under --state-dir and resumable (run it again). Refused while ZooKeeper members or consumer-protocol "
        "(KIP-848) members remain (the cluster's coordinator may not serve them), and when the classic members offer "
        "no protocol (assignor) name in common (the cluster's coordinator would refuse some), naming them. The "
        "forwarding switch is the point of no return; the way back is the barrier way (docs/proxy.md 'Hand-off'). "
        "--bootstrap names a broker of the cluster (default: the first endpoint in /brokers/ids of --command-config's "
        "security.protocol, PLAINTEXT without one). --command-config FILE secures every connection it opens, to the "
        "proxy nodes' listeners and to the cluster's brokers alike (TLS; SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512): "
        "one principal both accept.",
        epilog=examples(
            "zkcoord migrate handoff --zk 127.0.0.1:2181 --group orders",
            "zkcoord migrate handoff --zk 127.0.0.1:2181 --group orders --timeout-ms 600000",
            "zkcoord migrate handoff --zk 127.0.0.1:2181 --group orders --command-config client.properties",
        ),
    )
    common(p, bootstrap_help=to_cluster)
    p.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help=f"directory where journals are written (default: {DEFAULT_STATE_DIR})",
    )
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=120_000,
        metavar="MS",
        help="how long to wait for the members to release, then to rejoin on the cluster (default: 120000)",
    )
    p.set_defaults(func=_run_handoff)

    p = cmds.add_parser(
        "export",
        help="write ZooKeeper offsets to a file (ExportZkOffsets lines, JSON lines, Parquet)",
        epilog=examples(
            "zkcoord migrate export --zk 127.0.0.1:2181 --group orders --out orders.offsets",
            "zkcoord migrate export --zk 127.0.0.1:2181 --groups-file groups.txt --out all.parquet",
        ),
    )
    common(p, bootstrap=False)
    p.add_argument(
        "--output-file", "--out", dest="output", required=True, metavar="FILE", help="file to write"
    )
    _format_option(p)
    p.set_defaults(func=_run_export)

    p = cmds.add_parser(
        "import",
        help="validate a whole offsets file, then write it in journaled batches",
        epilog=examples(
            "zkcoord migrate import --zk 127.0.0.1:2181 --in orders.offsets --never-regress",
            "zkcoord migrate import --zk zk:2181 --bootstrap 127.0.0.1:9092 --in all.parquet --target broker",
        ),
    )
    common(p, groups=False)
    p.add_argument(
        "--input-file", "--in", dest="input", required=True, metavar="FILE", help="offsets file to read"
    )
    _format_option(p)
    p.add_argument(
        "--target", choices=("zookeeper", "broker"), default="zookeeper", help="the offset store to write"
    )
    p.add_argument("--never-regress", action="store_true", help="keep any stored offset that is higher")
    p.add_argument("--journal", metavar="FILE", help="resume journal (default: <input>.import-journal)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=500,
        metavar="N",
        help="offsets written per journaled batch (partitions)",
    )
    p.set_defaults(func=_run_import)

    p = cmds.add_parser(
        "snapshot",
        help="snapshot both offset stores to Parquet for the divergence report",
        epilog=examples(
            "zkcoord migrate snapshot --zk zk:2181 --bootstrap 127.0.0.1:9092 --groups-file g.txt --out snap",
            "zkcoord migrate snapshot --zk 127.0.0.1:2181 --broker-records /data/n1/group-records --out snap",
        ),
    )
    common(p)
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="directory: zookeeper.parquet and broker.parquet are written",
    )
    p.add_argument(
        "--broker-records",
        action="append",
        default=[],
        metavar="DIR",
        help="read the broker side from __consumer_offsets record logs (a `zkcoord serve` "
        "<data-dir>/group-records, read-only; repeatable) instead of OffsetFetch through --bootstrap",
    )
    p.set_defaults(func=_run_snapshot)

    p = cmds.add_parser(
        "divergence",
        help="Spark: compare two snapshots for many groups",
        epilog=examples(
            "zkcoord migrate divergence --zk-snapshot snap/zookeeper.parquet --broker-snapshot "
            "snap/broker.parquet --out div",
            "zkcoord migrate divergence --zk-snapshot hdfs:///m/zk.parquet "
            "--broker-snapshot hdfs:///m/b.parquet "
            "--out hdfs:///m/div --master spark://spark-master:7077",
        ),
    )
    add_config_option(p)
    p.add_argument(
        "--zk-snapshot", required=True, metavar="PATH", help="ZooKeeper-side snapshot (Parquet; path or URI)"
    )
    p.add_argument(
        "--broker-snapshot", required=True, metavar="PATH", help="broker-side snapshot (Parquet; path or URI)"
    )
    p.add_argument(
        "--out", required=True, metavar="DIR", help="output directory or URI (Parquet tables + summary.md)"
    )
    spark = p.add_mutually_exclusive_group()
    spark.add_argument(
        "--master",
        metavar="URL",
        help="Spark master: local[N], spark://host:7077, yarn... (default: local[2])",
    )
    spark.add_argument(
        "--remote", metavar="URL", help="Spark Connect server instead of a master, e.g. sc://host:15002"
    )
    p.add_argument(
        "--max-lag",
        type=int,
        default=0,
        metavar="N",
        help="tolerated |zk - broker| per partition, in offsets",
    )
    p.set_defaults(func=_run_divergence)

    p = cmds.add_parser(
        "synth",
        help="generate synthetic snapshots (for trying or benchmarking divergence)",
        epilog=examples(
            "zkcoord migrate synth --groups 100 --partitions 10 --out snap",
            "zkcoord migrate synth --out snap && zkcoord migrate divergence "
            "--zk-snapshot snap/zookeeper.parquet "
            "--broker-snapshot snap/broker.parquet --out div",
        ),
    )
    add_config_option(p)
    p.add_argument("--groups", type=int, default=10_000, metavar="N", help="number of consumer groups")
    p.add_argument("--partitions", type=int, default=100, metavar="N", help="partitions per group")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="directory for zookeeper.parquet and broker.parquet"
    )
    p.add_argument("--seed", type=int, default=1, help="PRNG seed: the same seed writes the same snapshots")
    p.set_defaults(func=_run_synth)


_STEP_HELP = {
    "plan": "show what will change, members by protocol and what each owns, the next member to move and the "
    "point of no return, what could go wrong; mark the group planned",
    "dual-commit": "seed the broker with ZooKeeper offsets (never lowering) and enter dual-commit "
    "(broker-protocol members: run the coordinator with `serve --bridge-zk-offsets`)",
    "verify": "compare both stores within --max-lag and list every disagreement with its cause",
    "finalize": "re-verify and record the final state (then turn dual commit off); refused while ZooKeeper "
    "members remain in a group migrating member by member. Run again once the coordinators run without the "
    "bridge flags (the point of no return), it removes the znodes the bridge left",
    "rollback": "ZooKeeper := max(zk, broker) per partition, then back to ZooKeeper storage; names the next "
    "broker-protocol member to restart as a ZooKeeper member, one per run, once the group has settled",
    "status": "the group's marker state and membership phase, members by protocol, the next member move, "
    "and the tail of its journal",
}


def _format_option(p: argparse.ArgumentParser) -> None:
    """The offsets file format option export and import share."""
    p.add_argument(
        "--format",
        choices=("zk", "jsonl", "parquet"),
        help="file format (default: by file extension: .jsonl, .parquet, otherwise zk)",
    )


def _groups(args: argparse.Namespace, required: bool = True) -> list[str]:
    groups = list(args.group)
    if getattr(args, "groups_file", None):
        try:
            text = Path(args.groups_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--groups-file {args.groups_file}: {exc.strerror}") from None
        groups += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    unique = sorted(set(groups))
    if required and not unique:
        raise ConfigError("name at least one group: --group G or --groups-file F")
    return unique


@contextlib.contextmanager
def _zookeeper(args: argparse.Namespace) -> Iterator[Any]:
    from zkcoord.zk.session import ZkUnreachable
    from zkcoord.zk.session import connect as zk_connect

    connect = args.zk
    auth = zk_auth(args)  # a bad JAAS file is its own error, not "cannot connect"
    try:
        client = zk_connect(connect, timeout=15.0, auth=auth)
    except ZkUnreachable:
        raise  # its message names the connect string
    except Exception as exc:
        raise ZkcoordError(f"cannot connect to ZooKeeper at {connect}: {exc}") from None
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _broker_factory(args: argparse.Namespace) -> tuple[Callable[[str], Any] | None, Callable[[], None]]:
    if not getattr(args, "bootstrap", None):
        return None, lambda: None
    from zkcoord.bridge.broker_store import BrokerOffsetStore

    root: list[BrokerOffsetStore] = []

    def for_group(group: str) -> BrokerOffsetStore:
        if not root:
            root.append(
                BrokerOffsetStore(
                    args.bootstrap,
                    group,
                    request_timeout_ms=args.request_timeout_ms,
                    bootstrap_timeout_ms=args.request_timeout_ms,
                    security=command_config(args),
                )
            )
        return root[0] if root[0].group == group else root[0].for_group(group)

    def close() -> None:
        if root:
            with contextlib.suppress(Exception):
                root[0].close()

    return for_group, close


def invocation(args: argparse.Namespace) -> Any:
    """The connection flags of this run, so that the commands the workflow advises work as printed."""
    import os

    from migration.workflow.states import Invocation
    from zkcoord.cli.zkargs import zk_flags

    zk_security = list(zk_flags(args).argv())
    if "--zk-digest" in zk_security:  # a secret is never printed: the operator types it again
        zk_security[zk_security.index("--zk-digest") + 1] = "USER:PASSWORD"
    broker = (
        ("--command-config", os.path.abspath(args.command_config))
        if getattr(args, "command_config", None)
        else ()
    )
    state_dir = getattr(args, "state_dir", None)
    return Invocation(
        zk=args.zk,
        bootstrap=getattr(args, "bootstrap", None),
        zk_flags=tuple(zk_security),
        broker_flags=broker,
        state_dir=None if state_dir in (None, DEFAULT_STATE_DIR) else state_dir,
    )


def _run_step(args: argparse.Namespace) -> int:
    from migration.workflow import MigrationRunner

    groups = _groups(args)
    worst = 0
    with _zookeeper(args) as zk:
        broker_for, close = _broker_factory(args)
        try:
            runner = MigrationRunner(zk, broker_for, args.state_dir, how=invocation(args))
            views = []
            for group in groups:
                try:
                    lines, rc, view = _one_step(runner, args, group)
                except ZkcoordError as exc:
                    lines, rc, view = [f"group {group}: error: {exc}"], 2, {"group": group, "error": str(exc)}
                views.append({**view, "exit": rc})
                if not getattr(args, "json", False):
                    print("\n".join(lines), file=sys.stdout if rc == 0 else sys.stderr)
                worst = max(worst, rc)
        finally:
            close()
    if getattr(args, "json", False):
        from migration.workflow.json_schema import VERSION

        print(json.dumps({"version": VERSION, "step": args.step, "groups": views}, indent=2, sort_keys=True))
    return worst


def _one_step(runner: Any, args: argparse.Namespace, group: str) -> tuple[list[str], int, dict[str, Any]]:
    step = args.step
    if step == "plan":
        outcome, _ = runner.plan(group)
        return outcome.lines, 0, outcome.view
    if step == "dual-commit":
        return runner.dual_commit(group).lines, 0, {"group": group}
    if step == "verify":
        outcome = runner.verify(group, args.max_lag)
        return outcome.lines, 0 if outcome.ok else 1, outcome.view
    if step == "finalize":
        return runner.finalize(group, args.max_lag).lines, 0, {"group": group}
    if step == "rollback":
        return runner.rollback(group).lines, 0, {"group": group}
    lines, view = runner.status_view(group)
    return lines, 0, view


def _run_repair(args: argparse.Namespace) -> int:
    from zkcoord.bridge.membership import read_members, repair

    groups = _groups(args, required=True)
    with _zookeeper(args) as zk:
        for group in groups:
            classic = [m for m in read_members(zk, group) if m.protocol != "legacy"]
            if not classic:
                print(f"group {group}: no broker-protocol member in ZooKeeper, nothing to repair")
                continue
            for m in classic:
                held = ", ".join(f"{tp[0]}-{tp[1]}" for tp in m.owned) or "no partition"
                print(f"group {group}: {m.protocol} member {m.consumer_id} holds {held}")
            if not args.force:
                print(
                    f"group {group}: not repaired; stop every `zkcoord serve --bridge-zk-groups` node serving it "
                    "(or its broker-protocol members), then run again with --force"
                )
                continue
            deleted = repair(zk, group)
            print(f"group {group}: deleted {len(deleted)} znode(s): " + ", ".join(deleted))
    return 0


def _run_handoff(args: argparse.Namespace) -> int:
    from migration.workflow.handoff import Handoffs
    from migration.workflow.runner import Journal
    from zkcoord.bridge.broker_store import BrokerOffsetStore

    security = command_config(args)  # a bad file is refused here, before anything is read or written
    login = _handoff_login(args, security)

    def store_for(bootstrap: str, group: str) -> BrokerOffsetStore:
        timeout = args.request_timeout_ms
        return BrokerOffsetStore(bootstrap, group, request_timeout_ms=timeout, bootstrap_timeout_ms=timeout,
                                 security=security)  # fmt: skip

    worst = 0
    with _zookeeper(args) as zk:
        handoffs = Handoffs(zk, Journal(args.state_dir), store_for, args.bootstrap, args.timeout_ms / 1000,
                            security=login, request_timeout_s=args.request_timeout_ms / 1000)  # fmt: skip
        try:
            for group in _groups(args):
                try:
                    print("\n".join(handoffs.run(group).lines))
                except ZkcoordError as exc:
                    print(f"group {group}: hand-off stopped: {exc}", file=sys.stderr)
                    worst = 2
                finally:
                    handoffs.close()
        finally:
            handoffs.close()
    return worst


def _handoff_login(args: argparse.Namespace, security: dict[str, Any]) -> Any:
    """--command-config as the TLS context and SASL login of the hand-off's own FindCoordinator/DescribeGroups
    requests to the cluster (zkcoord.proxy.upstream: PLAIN and SCRAM, as the proxy logs in upstream)."""
    from zkcoord.proxy.upstream import PLAINTEXT, SASL_MECHANISMS, from_kafka_python

    if not args.command_config:
        return PLAINTEXT
    source = f"--command-config {args.command_config}"
    mechanism = security.get("sasl_mechanism", "GSSAPI")  # Kafka's default mechanism
    if str(security.get("security_protocol", "")).startswith("SASL_") and mechanism not in SASL_MECHANISMS:
        raise ConfigError(
            f"{source}: sasl.mechanism={mechanism}: migrate handoff logs in with {', '.join(SASL_MECHANISMS)} only"
        )
    return from_kafka_python(security, source)


def _run_export(args: argparse.Namespace) -> int:
    from migration.offsets_io import export_zookeeper

    groups = _groups(args, required=False) or None
    with _zookeeper(args) as zk:
        count = export_zookeeper(zk, groups, args.output, args.format)
    print(f"exported {count} offset(s) to {args.output}")
    return 0


def _run_import(args: argparse.Namespace) -> int:
    from migration.offsets_io import BrokerTarget, ZooKeeperTarget, import_offsets, read_offsets_file

    records = read_offsets_file(args.input, args.format)  # everything validated before anything is written
    journal = args.journal or f"{args.input}.import-journal"
    print(f"{args.input}: {len(records)} offset(s) for {len({r.group for r in records})} group(s) validated")

    def progress(done: int, total: int) -> None:
        print(f"\r  batch {done}/{total}", end="", file=sys.stderr, flush=True)

    with _zookeeper(args) as zk:
        if args.target == "zookeeper":
            target: Any = ZooKeeperTarget(zk, never_regress=args.never_regress)
            close: Callable[[], None] = lambda: None  # noqa: E731
        else:
            broker_for, close = _broker_factory(args)
            if broker_for is None:
                raise ConfigError("--target broker needs --bootstrap HOST:PORT")
            target = BrokerTarget(broker_for, never_regress=args.never_regress)
        try:
            report = import_offsets(records, target, journal, batch_size=args.batch_size, progress=progress)
        finally:
            close()
    print(file=sys.stderr)
    print(
        f"imported {report.total} offset(s) into {args.target}: {report.written_batches} batch(es) written, "
        f"{report.resumed_batches} already done (journal {journal}), {report.kept_higher} kept higher"
    )
    return 0


def _run_snapshot(args: argparse.Namespace) -> int:
    from migration.divergence.snapshot import snapshot_broker, snapshot_zookeeper

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with _zookeeper(args) as zk:
        groups = _groups(args, required=False) or None
        zk_rows = snapshot_zookeeper(zk, groups, out / "zookeeper.parquet")
        print(f"zookeeper: {zk_rows} offset(s) -> {out / 'zookeeper.parquet'}")
        if args.broker_records:
            from migration.divergence.snapshot import RecordLogError, snapshot_broker_records

            if args.bootstrap:
                print("error: give either --bootstrap or --broker-records, not both", file=sys.stderr)
                return 2
            try:
                rows = snapshot_broker_records(args.broker_records, groups, out / "broker.parquet")
            except RecordLogError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(f"broker (record logs): {rows} offset(s) -> {out / 'broker.parquet'}")
            return 0
        broker_for, close = _broker_factory(args)
        if broker_for is not None:
            try:
                from zkcoord.zk.offset_store import list_groups

                names = groups or list_groups(zk)
                rows, errors = snapshot_broker(broker_for, names, out / "broker.parquet")
            finally:
                close()
            print(f"broker: {rows} offset(s) -> {out / 'broker.parquet'}")
            for line in errors:
                print(f"  broker error: {line}", file=sys.stderr)
            return 2 if errors else 0
    return 0


def _run_divergence(args: argparse.Namespace) -> int:
    from migration.divergence.job import run_divergence

    summary = run_divergence(
        args.zk_snapshot,
        args.broker_snapshot,
        args.out,
        master=args.remote or args.master,
        max_lag=args.max_lag,
    )
    print(summary)
    return 0


def _run_synth(args: argparse.Namespace) -> int:
    from migration.divergence.synth import write_synthetic

    counts = write_synthetic(args.out, groups=args.groups, partitions=args.partitions, seed=args.seed)
    print(f"wrote {counts['zookeeper']} zookeeper and {counts['broker']} broker rows to {args.out}")
    return 0
