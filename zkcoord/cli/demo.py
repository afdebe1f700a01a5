"""`zkcoord demo`, the README's main job: the side-by-side comparison in under two minutes — a local ZooKeeper
and zkcoord node (unless given), the built-in `demo` scenario played by each protocol, the Spark report, and a
one-screen summary; the exit status is non-zero when any record was lost or any partition had two owners."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from zkcoord.cli.client_security import add_command_config, command_config
from zkcoord.cli.logs import quiet_client_logs
from zkcoord.cli.options import examples
from zkcoord.cli.zkargs import add_zk_security, zk_flags

DEFAULT_OUT = "reports"

# (summary column, heading) of the one-screen table, in order.
SUMMARY_COLUMNS = (
    ("protocol", "protocol"),
    ("rebalances", "rebalances"),
    ("rebalance_p50_ms", "rebalance p50 ms"),
    ("rebalance_p95_ms", "p95 ms"),
    ("churn_to_stable_p50_ms", "churn→stable p50 ms"),
    ("moved_per_rebalance_mean", "moved / rebalance"),
    ("gaps", "gaps"),
    ("gap_ms_total", "gap ms"),
    ("overlaps", "overlaps"),
    ("duplicates", "duplicates"),
    ("lost", "lost"),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="the side-by-side comparison: legacy and classic groups on one scenario, then the Spark report",
        description="Starts a local ZooKeeper and a zkcoord node per play (unless --zk / --bootstrap), plays the "
        "built-in 'demo' scenario once per protocol, writes the Spark report and prints a summary. Exit 1 when "
        "a record was lost or a partition had two owners at once.",
        epilog=examples(
            "zkcoord demo",
            "zkcoord demo --out /tmp/demo --no-progress",
            "zkcoord demo --no-rolling-migration",
        ),
    )
    demo.add_argument(
        "--zk",
        default=None,
        metavar="CONNECT",
        help="use this ZooKeeper connect string (default: start a local one)",
    )
    demo.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="use this zkcoord node, registered in --zk (default: start one per play)",
    )
    demo.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help=f"where traces/ and report/ go (default {DEFAULT_OUT}/demo-<date>-<time>)",
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.add_argument(
        "--rolling-migration",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the per-protocol plays, the built-in rolling-migration: legacy members replaced one at a "
        "time by classic ones and back in one group (a node with --bridge-zk-groups), drawn in the ownership "
        "timeline; --no-rolling-migration skips it (about 25 s) (default: played)",
    )
    add_zk_security(demo)  # for --zk: the runner, its members and the nodes it starts all log in with them
    add_command_config(demo)  # for --bootstrap: the runner's clients and every member use it
    demo.set_defaults(func=run_demo)


class _SparkStarter:
    """Starts the Spark session in a background thread while the protocols play: the JVM boot then costs no
    wall time of its own (it is ~10 s of the two-minute budget)."""

    def __init__(self) -> None:
        self.session: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="demo-spark", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            from migration.spark import spark_session

            # The demo's traces are a few MB: a job of seconds (see SHORT_JOB_JAVA_OPTIONS).
            self.session = spark_session(None, app_name="zkcoord-demo", short_job=True)
        except BaseException as exc:  # surfaced by get(); a thread cannot raise to its caller
            self.error = exc

    def get(self) -> Any:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.session

    def stop(self) -> None:
        self._thread.join()
        if self.session is not None:
            self.session.stop()


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 10 else f"{value:.1f}"
    return str(value)


def summary_table(rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(
        title="zkcoord demo: one run per protocol (all rebalances of the run)", title_justify="left"
    )
    for key, heading in SUMMARY_COLUMNS:
        table.add_column(heading, justify="left" if key == "protocol" else "right")
    for r in rows:
        cells = []
        for key, _ in SUMMARY_COLUMNS:
            text = _fmt(r.get(key))
            bad = key in ("lost", "overlaps") and (r.get(key) or 0) > 0
            cells.append(f"[bold red]{text}[/]" if bad else text)
        table.add_row(*cells)
    return table


def verdict(rows: list[dict[str, Any]], plays: list[dict[str, Any]]) -> list[str]:
    """Problems that fail the demo: lost records or ownership overlaps, from the report and from the runner's
    own checks (ZooKeeper owner samples, produced vs consumed)."""
    problems = []
    for r in rows:
        if (r.get("lost") or 0) > 0:
            problems.append(f"{r['protocol']}: {r['lost']} records lost")
        if (r.get("overlaps") or 0) > 0:
            problems.append(f"{r['protocol']}: {r['overlaps']} ownership overlaps")
    for p in plays:
        if p["lost"] > 0:
            problems.append(
                f"{p['protocol']}: the runner counted {p['lost']} produced records never consumed"
            )
        if p["owner_overlaps"] > 0:
            problems.append(f"{p['protocol']}: {p['owner_overlaps']} ZooKeeper owner samples with two owners")
    return sorted(set(problems))


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from migration.compare.report import run_report
    from migration.compare.runner import run_builtin_demo

    console = Console(highlight=False) if sys.stdout.isatty() else Console(highlight=False, width=160)
    if args.bootstrap and not args.zk:
        print(
            "zkcoord demo: --bootstrap needs --zk (the ZooKeeper that node is registered in)", file=sys.stderr
        )
        return 2
    security = zk_flags(args)
    if security.given and not args.zk:
        print(
            "zkcoord demo: the ZooKeeper security flags need --zk (a local ZooKeeper is open)",
            file=sys.stderr,
        )
        return 2
    if args.command_config and not args.bootstrap:
        print("zkcoord demo: --command-config is for a given node: it needs --bootstrap", file=sys.stderr)
        return 2
    command_config(args)  # a bad file is refused (naming it and the key) before anything starts
    quiet_client_logs(args)
    t0 = time.monotonic()
    out = Path(args.out or f"{DEFAULT_OUT}/demo-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    console.print(
        "[bold]zkcoord demo[/]: the built-in 'demo' scenario (join, leave, pause, crash, partition increase) played "
        "by a legacy-faithful, a legacy-fast and a classic (kafka-python) group"
        + (
            ", then the rolling migration (the 'mixed' row: one group moved member by member from ZooKeeper to "
            "the broker protocol and back)"
            if args.rolling_migration
            else ""
        )
        + f", into {out}"
    )
    if args.zk is None:
        console.print("  starting a local ZooKeeper; each protocol gets a fresh zkcoord node and group")
    spark = _SparkStarter()
    try:
        dirs, plays = run_builtin_demo(
            out / "traces",
            progress=not args.no_progress,
            zk_connect=args.zk,
            zk_security=security,
            bootstrap=args.bootstrap,
            command_config=args.command_config,
            rolling_migration=args.rolling_migration,
        )
        console.print(f"  {len(dirs)} runs played in {time.monotonic() - t0:.0f} s; building the report ...")
        result = run_report(
            dirs, out / "report", spark=spark.get(), console=console, progress=not args.no_progress
        )
    finally:
        spark.stop()
    console.print(summary_table(result.summary))
    console.print(f"report: {result.html}")
    console.print(f"plots:  {out / 'report' / 'plots'}   traces: {out / 'traces'}")
    problems = verdict(result.summary, plays)
    for p in problems:
        console.print(f"[bold red]FAIL[/] {p}")
    if not problems:
        console.print("no record lost and no partition with two owners, in every protocol")
    console.print(f"done in {time.monotonic() - t0:.0f} s")
    console.print(
        "next: open the report in a browser; other scenarios: `zkcoord compare run "
        "--help`; the same migration with the data on brokers of your own: docs/proxy.md 'Try it on your machine'",
        soft_wrap=True,
    )
    return 1 if problems else 0
