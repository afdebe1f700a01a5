"""`zkcoord migrate`: move consumer groups' offsets from ZooKeeper to the broker and back — plan, export,
import, dual-commit, verify, finalize, rollback, status — plus offset-store snapshots and the Spark
divergence report. Exit status: 0 done, 1 verify found disagreements, 2 a step was refused or failed.

For broker-protocol members, the coordinator keeps ZooKeeper current itself when it runs with
`zkcoord serve --bridge-zk-offsets` (docs/migration.md §9); `plan` and `verify` report whether one is running.
With `serve --bridge-zk-groups`, members move one at a time: `plan`/`status` name the next one, `rollback`
walks them back (docs/migration.md, "Member-by-member migration: the workflow").
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from zkcoord.errors import ConfigError, ZkcoordError

STEPS = ("plan", "dual-commit", "verify", "finalize", "rollback", "status")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "migrate",
        help="migrate consumer groups' offsets from ZooKeeper to the broker (and back)",
        description=__doc__,
    )
    cmds = parser.add_subparsers(dest="migrate_command", metavar="STEP", required=True)

    def common(p: argparse.ArgumentParser, *, groups: bool = True, bootstrap: bool = True) -> None:
        p.add_argument(
            "--zk", required=True, metavar="CONNECT", help="ZooKeeper connect string (chroot allowed)"
        )
        if bootstrap:
            p.add_argument("--bootstrap", metavar="HOST:PORT", help="a broker (or `zkcoord serve`) to reach")
        if groups:
            p.add_argument("--group", action="append", default=[], metavar="G", help="a group (repeatable)")
            p.add_argument("--groups-file", metavar="F", help="file with one group id per line")
        p.add_argument("--request-timeout-ms", type=int, default=10_000)

    for step in STEPS:
        p = cmds.add_parser(step, help=_STEP_HELP[step])
        common(p)
        p.add_argument("--state-dir", default=".zkcoord-migrate", help="where journals are written")
        if step in ("verify", "finalize"):
            p.add_argument("--max-lag", type=int, default=0, help="tolerated |zk - broker| per partition")
        p.set_defaults(func=_run_step, step=step)

    p = cmds.add_parser(
        "export", help="write ZooKeeper offsets to a file (ExportZkOffsets lines, JSON lines, Parquet)"
    )
    common(p, bootstrap=False)
    p.add_argument("--output-file", "--out", dest="output", required=True)
    p.add_argument("--format", choices=("zk", "jsonl", "parquet"), help="default: by file extension (zk)")
    p.set_defaults(func=_run_export)

    p = cmds.add_parser("import", help="validate a whole offsets file, then write it in journaled batches")
    common(p, groups=False)
    p.add_argument("--input-file", "--in", dest="input", required=True)
    p.add_argument("--format", choices=("zk", "jsonl", "parquet"))
    p.add_argument("--target", choices=("zookeeper", "broker"), default="zookeeper")
    p.add_argument("--never-regress", action="store_true", help="keep any stored offset that is higher")
    p.add_argument("--journal", help="resume journal (default: <input>.import-journal)")
    p.add_argument("--batch-size", type=int, default=500)
    p.set_defaults(func=_run_import)

    p = cmds.add_parser("snapshot", help="snapshot both offset stores to Parquet for the divergence report")
    common(p)
    p.add_argument("--out", required=True, help="directory: zookeeper.parquet and broker.parquet are written")
    p.add_argument(
        "--broker-records",
        action="append",
        default=[],
        metavar="DIR",
        help="read the broker side from __consumer_offsets record logs (a `zkcoord serve` "
        "<data-dir>/group-records, read-only; repeatable) instead of OffsetFetch through --bootstrap",
    )
    p.set_defaults(func=_run_snapshot)

    p = cmds.add_parser("divergence", help="Spark: compare two snapshots for many groups")
    p.add_argument("--zk-snapshot", required=True)
    p.add_argument("--broker-snapshot", required=True)
    p.add_argument("--out", required=True, help="output directory (Parquet + summary.md)")
    p.add_argument("--master", help="Spark master (default local[2])")
    p.add_argument("--max-lag", type=int, default=0)
    p.set_defaults(func=_run_divergence)

    p = cmds.add_parser("synth", help="generate synthetic snapshots (for trying or benchmarking divergence)")
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=_run_synth)


_STEP_HELP = {
    "plan": "show what will change, members by protocol and what each owns, the next member to move and the "
    "point of no return, what could go wrong; mark the group planned",
    "dual-commit": "seed the broker with ZooKeeper offsets (never lowering) and enter dual-commit "
    "(broker-protocol members: run the coordinator with `serve --bridge-zk-offsets`)",
    "verify": "compare both stores within --max-lag and list every disagreement with its cause",
    "finalize": "re-verify and record the final state (then turn dual commit off); refused while ZooKeeper "
    "members remain in a group migrating member by member",
    "rollback": "ZooKeeper := max(zk, broker) per partition, then back to ZooKeeper storage; names the next "
    "broker-protocol member to restart as a ZooKeeper member, one per run, once the group has settled",
    "status": "the group's marker state and membership phase, members by protocol, the next member move, "
    "and the tail of its journal",
}


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
def _zookeeper(connect: str) -> Iterator[Any]:
    from zkcoord.zk.session import connect as zk_connect

    try:
        client = zk_connect(connect, timeout=15.0)
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
                )
            )
        return root[0] if root[0].group == group else root[0].for_group(group)

    def close() -> None:
        if root:
            with contextlib.suppress(Exception):
                root[0].close()

    return for_group, close


def _run_step(args: argparse.Namespace) -> int:
    from migration.workflow import MigrationRunner

    groups = _groups(args)
    worst = 0
    with _zookeeper(args.zk) as zk:
        broker_for, close = _broker_factory(args)
        try:
            runner = MigrationRunner(zk, broker_for, args.state_dir)
            for group in groups:
                try:
                    lines, rc = _one_step(runner, args, group)
                except ZkcoordError as exc:
                    lines, rc = [f"group {group}: error: {exc}"], 2
                print("\n".join(lines), file=sys.stdout if rc == 0 else sys.stderr)
                worst = max(worst, rc)
        finally:
            close()
    return worst


def _one_step(runner: Any, args: argparse.Namespace, group: str) -> tuple[list[str], int]:
    step = args.step
    if step == "plan":
        outcome, _ = runner.plan(group)
        return outcome.lines, 0
    if step == "dual-commit":
        return runner.dual_commit(group).lines, 0
    if step == "verify":
        outcome = runner.verify(group, args.max_lag)
        return outcome.lines, 0 if outcome.ok else 1
    if step == "finalize":
        return runner.finalize(group, args.max_lag).lines, 0
    if step == "rollback":
        return runner.rollback(group).lines, 0
    return runner.status(group), 0


def _run_export(args: argparse.Namespace) -> int:
    from migration.offsets_io import export_zookeeper

    groups = _groups(args, required=False) or None
    with _zookeeper(args.zk) as zk:
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

    with _zookeeper(args.zk) as zk:
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
    with _zookeeper(args.zk) as zk:
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
        args.zk_snapshot, args.broker_snapshot, args.out, master=args.master, max_lag=args.max_lag
    )
    print(summary)
    return 0


def _run_synth(args: argparse.Namespace) -> int:
    from migration.divergence.synth import write_synthetic

    counts = write_synthetic(args.out, groups=args.groups, partitions=args.partitions, seed=args.seed)
    print(f"wrote {counts['zookeeper']} zookeeper and {counts['broker']} broker rows to {args.out}")
    return 0
