"""`zkcoord compare`: validate scenarios, simulate rebalances through the pure assignors, play scenarios live
(`compare run`), and build the Spark report from trace runs."""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

from zkcoord.cli.client_security import add_command_config, command_config
from zkcoord.cli.logs import quiet_client_logs
from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_flags

DEFAULT_GROUP_SIZES = "2,5,10,25"
DEFAULT_CHURN = "1,2,4"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "compare",
        help="compare the legacy and broker group protocols: simulate, report, run",
        description="Side-by-side comparison of the ZooKeeper (legacy) and broker (classic) group protocols.",
        epilog=examples(
            "zkcoord compare validate demo                         # what the built-in scenario does",
            "zkcoord compare run demo --runs 3 --out traces        # play it against local ZooKeeper and a node",
            "zkcoord compare report traces/ --out report           # the Spark report from the traces",
        ),
    )
    csub = parser.add_subparsers(dest="compare_command", metavar="SUBCOMMAND", required=True)
    from migration.compare.scenario import (  # names and bounds only: the application's package data
        BUILTIN,
        MAX_SCENARIO_BYTES,
        MAX_YAML_DEPTH,
        PROTOCOLS,
    )

    builtins = ", ".join(BUILTIN)

    v = csub.add_parser(
        "validate",
        help="check a scenario file and print what it describes",
        epilog=examples("zkcoord compare validate demo", "zkcoord compare validate my-scenario.yaml"),
    )
    v.add_argument(
        "scenario",
        help=f"scenario YAML file (UTF-8, at most {MAX_SCENARIO_BYTES // 1024} KiB, no YAML aliases, nesting at "
        f"most {MAX_YAML_DEPTH} levels), or the name of a built-in scenario ({builtins})",
    )
    v.set_defaults(func=_validate)

    s = csub.add_parser(
        "simulate",
        help="play churn through the pure assignors (no I/O): partitions moved and balance per rebalance",
        description=(
            "Without SCENARIO: a sweep over group sizes x churn rates (membership changes per rebalance), each "
            "case played through every assignor on identical random churn. With SCENARIO: that scenario's churn "
            "schedule, once per protocol with its strategy."
        ),
        epilog=examples(
            "zkcoord compare simulate --group-sizes 3,10 --churn 1,3 --csv sweep.csv",
            "zkcoord compare simulate mixed",
        ),
    )
    s.add_argument(
        "scenario", nargs="?", help=f"scenario YAML file or built-in name ({builtins}); omit for a sweep"
    )
    s.add_argument(
        "--group-sizes", default=DEFAULT_GROUP_SIZES, help=f"comma list (default {DEFAULT_GROUP_SIZES})"
    )
    s.add_argument(
        "--churn", default=DEFAULT_CHURN, help=f"membership changes per rebalance (default {DEFAULT_CHURN})"
    )
    s.add_argument("--topics", type=int, default=4, metavar="N", help="topics in the sweep (default 4)")
    s.add_argument(
        "--partitions",
        type=int,
        default=24,
        metavar="N",
        help="partitions per topic in the sweep (default 24)",
    )
    s.add_argument("--rebalances", type=int, default=50, metavar="N", help="rebalances per case (default 50)")
    s.add_argument(
        "--families",
        default="legacy,classic",
        help="protocol families: legacy, classic, consumer (KIP-848) (default legacy,classic; e.g. classic,consumer)",
    )
    s.add_argument("--strategies", default=None, help="only these strategies (comma list; default all)")
    s.add_argument("--seed", type=int, default=1, help="PRNG seed; same seed, same rows (default 1)")
    s.add_argument("--csv", default=None, metavar="FILE", help="also write the rows as CSV")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=_simulate)

    r = csub.add_parser(
        "report",
        help="Spark job: many trace runs -> tables, plots and report.html",
        description="Read trace run directories (or folders holding them), compute the comparison metrics with "
        "Spark and write DIR/report.html, DIR/plots/*.png and DIR/tables/*.{csv,parquet}. Traces and DIR "
        "may be URIs (file://, hdfs://, s3a://...) that the Spark executors can read.",
        epilog=examples(
            "zkcoord compare report traces/ --out report",
            "zkcoord compare report hdfs:///traces --out hdfs:///reports/r1 --master spark://master:7077",
        ),
    )
    r.add_argument("traces", nargs="+", help="run directories, or folders searched for them (paths or URIs)")
    r.add_argument("--out", required=True, metavar="DIR", help="output directory (path or URI)")
    spark = r.add_mutually_exclusive_group()
    spark.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="Spark master: local[N], spark://host:7077, yarn... (default: local[2])",
    )
    spark.add_argument(
        "--remote",
        default=None,
        metavar="URL",
        help="Spark Connect server instead of a master, e.g. sc://host:15002 (default: none)",
    )
    r.add_argument(
        "--timeline-run", default=None, metavar="RUN_ID", help="draw the ownership timeline of this run"
    )
    r.add_argument(
        "--json",
        action="store_true",
        help="print the summary (rows, takeaway, run metadata) as one JSON document instead of the paths; it is "
        "written to DIR/summary.json either way (schema: migration.compare.report.SUMMARY_SCHEMA)",
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=_report)

    run = csub.add_parser(
        "run",
        help="play a scenario against real ZooKeeper and zkcoord nodes, one trace per run",
        epilog=examples(
            "zkcoord compare run demo --runs 3 --out traces",
            "zkcoord compare run mixed --protocol legacy-fast --zk 127.0.0.1:2181",
            "zkcoord compare run mixed --protocol classic-kafka-python --protocol classic-kafka-python-cooperative",
            "zkcoord compare run rolling-migration-cooperative --out traces",
        ),
    )
    run.add_argument("scenario", help=f"scenario YAML file or built-in name ({builtins})")
    run.add_argument("--out", default="traces", metavar="DIR", help="where run directories are written")
    run.add_argument("--runs", type=int, default=1, metavar="N", help="runs per protocol (default 1)")
    run.add_argument(
        "--zk", default=None, metavar="CONNECT", help="use this ZooKeeper (default: start a local one)"
    )
    run.add_argument(
        "--bootstrap", default=None, metavar="HOST:PORT", help="use this zkcoord node (default: start one)"
    )
    run.add_argument("--protocol", action="append", dest="protocols", default=None,
                     help=f"only this protocol (repeatable; default: every protocol of the scenario); protocols: "
                          f"{', '.join(PROTOCOLS)}")  # fmt: skip
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_command_config(run)  # for --bootstrap: the runner's clients and every member use it
    add_zk_security(run)  # for --zk: the runner, its members and the nodes it starts all log in with them
    run.set_defaults(func=_run)


def _ints(text: str, what: str, lo: int = 1) -> list[int]:
    from zkcoord.errors import ConfigError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"--{what}: expected a comma-separated list of integers, got {text!r}") from exc
    if not values or any(v < lo for v in values):
        raise ConfigError(f"--{what}: expected integers >= {lo}, got {text!r}")
    return values


def _console() -> Any:
    from rich.console import Console

    # Piped output would otherwise be cut to 80 columns and the tables truncated.
    return Console() if sys.stdout.isatty() else Console(width=200)


def _validate(args: argparse.Namespace) -> int:
    from migration.compare.scenario import resolve_scenario

    sc = resolve_scenario(args.scenario)
    print(f"{sc.source}: scenario {sc.name!r} is valid")
    print(f"  duration {sc.duration_s:g} s, seed {sc.seed}, session timeout {sc.session_timeout_ms} ms")
    print("  topics: " + ", ".join(f"{t.name} ({t.partitions} partitions)" for t in sc.topics))
    print(f"  producer: {sc.producer.rate_per_s:g} records/s for {sc.producer.duration_s:g} s")
    for p in sc.protocols:
        print(f"  {p.protocol}: {p.members} members, {p.strategy}")
    for e in sc.churn:
        target = "" if e.member is None else f" member {e.member}"
        print(f"  at {e.at_s:g} s: {e.kind.value}{target}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from migration.compare import simulate as sim
    from zkcoord.errors import ConfigError

    console = _console()
    rng = random.Random(args.seed)
    if args.scenario:
        from migration.compare.scenario import resolve_scenario

        sc = resolve_scenario(args.scenario)
        steps = sim.scenario_steps(sc, sim.make_assignor, rng)
        console.print(sim.rich_table(steps, f"scenario {sc.name}: rebalances through the pure assignors"))
        if args.csv:
            sim.write_csv_file(steps, args.csv)
        return 0

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    for f in families:
        if f not in ("legacy", "classic", "consumer"):
            raise ConfigError(f"--families: expected legacy, classic and/or consumer, got {f!r}")
    strategies = (
        None if args.strategies is None else [s.strip() for s in args.strategies.split(",") if s.strip()]
    )
    assignors, missing = sim.available_assignors(families, strategies)
    for note in missing:
        console.print(f"[yellow]skipped[/yellow] {note}")
    if not assignors:
        raise ConfigError("no assignor to simulate (check --families/--strategies)")
    if args.topics < 1 or args.partitions < 1 or args.rebalances < 1:
        raise ConfigError("--topics, --partitions and --rebalances must be >= 1")
    cases = sim.sweep_cases(
        _ints(args.group_sizes, "group-sizes"),
        _ints(args.churn, "churn"),
        args.topics,
        args.partitions,
        args.rebalances,
    )
    total = len(cases) * len(assignors)
    if args.no_progress:
        rows = sim.sweep(assignors, cases, rng)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("simulate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            task = progress.add_task("cases", total=total)
            rows = sim.sweep(assignors, cases, rng, on_step=lambda: progress.advance(task))
    title = (
        f"{len(cases)} cases x {len(assignors)} assignors, {args.rebalances} rebalances each, "
        f"{args.topics * args.partitions} partitions, seed {args.seed} (means per rebalance)"
    )
    console.print(sim.rich_table(rows, title))
    if args.csv:
        sim.write_csv_file(rows, args.csv)
        console.print(f"wrote {args.csv}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from zkcoord.errors import ConfigError

    try:
        import matplotlib  # noqa: F401
        import pyspark  # noqa: F401

        from migration.compare.report import run_report
        from migration.compare.trace import TraceError
    except ImportError as exc:
        raise ConfigError(
            f"compare report needs the spark extra (pip install 'zkcoord[spark]'): {exc}"
        ) from exc

    if args.json:  # stdout carries the document only: progress goes to stderr
        from rich.console import Console

        console = Console(stderr=True)
    else:
        console = _console()
    try:
        result = run_report(
            args.traces,
            args.out,
            master=args.remote or args.master,
            timeline_run=args.timeline_run,
            console=console,
            progress=not args.no_progress,
        )
    except TraceError as exc:
        raise ConfigError(str(exc)) from exc
    if args.json:
        import json

        from migration.compare.report import summary_document

        print(json.dumps(summary_document(result), indent=2, sort_keys=True))
        return 0
    console.print(f"report: {result.html}")
    console.print(f"tables: {result.out_dir / 'tables'}   plots: {result.out_dir / 'plots'}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from migration.compare.runner import run_command

    if args.runs < 1:
        print("zkcoord compare run: --runs must be at least 1", file=sys.stderr)
        return 2
    if args.bootstrap and not args.zk:
        print(
            "zkcoord compare run: --bootstrap needs --zk (the ZooKeeper that node is registered in)",
            file=sys.stderr,
        )
        return 2
    security = zk_flags(args)
    if security.given and not args.zk:
        print(
            "zkcoord compare run: the ZooKeeper security flags need --zk (a local ZooKeeper is open)",
            file=sys.stderr,
        )
        return 2
    if args.command_config and not args.bootstrap:
        print(
            "zkcoord compare run: --command-config is for a given node: it needs --bootstrap", file=sys.stderr
        )
        return 2
    command_config(args)  # a bad file is refused (naming it and the key) before anything starts
    quiet_client_logs(args)
    return run_command(
        args.scenario,
        args.out,
        zk_connect=args.zk,
        zk_security=security,
        bootstrap=args.bootstrap,
        command_config=args.command_config,
        runs=args.runs,
        protocols=args.protocols,
        progress=not args.no_progress,
    )
