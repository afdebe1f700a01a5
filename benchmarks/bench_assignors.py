"""Assignor benchmark: range, roundrobin, sticky, cooperative-sticky at 1M partitions x 2,000 consumers.

Each (case, strategy) runs in a fresh child process so its peak RSS is its own. A run times the first
assignment, then a reassignment after one consumer leaves and one after one joins (each fed the previous result
as owned partitions, as the embedded protocol would), checks every result with the shared invariant checker
(untimed), and reports partitions moved. Usage: `python -m benchmarks.bench_assignors [--quick]`.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time

from zkcoord.assignors import STRATEGIES, assign, check_assignment

CASES = {
    # name: (topics, partitions per topic, consumers, mixed subscriptions)
    "uniform-1M": (1000, 1000, 2000, False),
    "mixed-1M": (500, 2000, 2000, True),
    "mixed-20k": (100, 200, 500, True),
}
QUICK = {
    "uniform-1M": (100, 1000, 200, False),
    "mixed-1M": (50, 2000, 200, True),
    "mixed-20k": (100, 200, 500, True),
}
BALANCE = {"range": "per-topic", "roundrobin": "total", "sticky": "movable", "cooperative-sticky": "movable"}


def build(
    topics: int, per_topic: int, consumers: int, mixed: bool
) -> tuple[dict[str, int], dict[str, list[str]]]:
    ppt = {f"topic-{i:04d}": per_topic for i in range(topics)}
    names = sorted(ppt)
    rng = random.Random(7)  # seeded: the same mixed subscriptions on every run
    subs = {}
    for i in range(consumers):
        if mixed:
            k = max(1, topics // 2 + rng.randint(-topics // 4, topics // 4))
            subs[f"consumer-{i:04d}"] = sorted(rng.sample(names, k))
        else:
            subs[f"consumer-{i:04d}"] = names
    return ppt, subs


def moved(before: dict[str, list[tuple[str, int]]], after: dict[str, list[tuple[str, int]]]) -> int:
    return sum(len(set(after[m]) - set(before.get(m, ()))) for m in after)


def run_one(case: str, strategy: str, sizes: tuple[int, int, int, bool]) -> dict[str, object]:
    ppt, subs = build(*sizes)
    cooperative = strategy == "cooperative-sticky"

    def check(
        result: dict[str, list[tuple[str, int]]], subscriptions: dict[str, list[str]], full: bool
    ) -> None:
        check_assignment(result, subscriptions, ppt, complete=full, balance=BALANCE[strategy])

    t0 = time.perf_counter()
    first = assign(strategy, subs, ppt)
    t_first = time.perf_counter() - t0
    check(first, subs, True)

    leaver = sorted(subs)[len(subs) // 2]
    after_leave = {m: t for m, t in subs.items() if m != leaver}
    t0 = time.perf_counter()
    left = assign(
        strategy,
        after_leave,
        ppt,
        owned={m: first[m] for m in after_leave},
        generations=dict.fromkeys(after_leave, 1),
    )
    t_leave = time.perf_counter() - t0
    check(left, after_leave, True)

    after_join = {**subs, "consumer-new": subs[sorted(subs)[0]]}
    t0 = time.perf_counter()
    joined = assign(strategy, after_join, ppt, owned=first, generations=dict.fromkeys(subs, 1))
    t_join = time.perf_counter() - t0
    check(joined, after_join, not cooperative)

    return {
        "case": case,
        "strategy": strategy,
        "partitions": sum(ppt.values()),
        "consumers": len(subs),
        "first_s": t_first,
        "leave_s": t_leave,
        "join_s": t_join,
        "moved_leave": moved({m: first[m] for m in after_leave}, left),
        "leaver_had": len(first[leaver]),
        "moved_join": moved(first, joined),
        "joiner_got": len(joined["consumer-new"]),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes (a smoke run, not for the report)"
    )
    parser.add_argument("--child", nargs=2, metavar=("CASE", "STRATEGY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = QUICK if args.quick else CASES
    if args.child:
        case, strategy = args.child
        print(json.dumps(run_one(case, strategy, cases[case])))
        return 0
    rows = []
    for case in cases:
        for strategy in STRATEGIES:
            cmd = [sys.executable, "-m", "benchmarks.bench_assignors", "--child", case, strategy]
            if args.quick:
                cmd.append("--quick")
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
            row = json.loads(out.strip().splitlines()[-1])
            print(row, flush=True)
            rows.append(row)
    table = [
        "Times are wall-clock seconds for one `assign()` call; *leave*/*join* are the reassignment after one"
        " consumer leaves / joins, given the first result as owned partitions (generation 1). *moved* counts"
        " partitions whose owner changed (for cooperative-sticky on join: 0, because the joiner's partitions are"
        " withheld until their owners revoke them). Every result passed the shared invariant checker. Peak RSS"
        " is the whole child process (inputs, outputs and checks included).",
        "",
        "| case | strategy | partitions × consumers | first (s) | leave (s) | moved on leave (leaver had) |"
        " join (s) | moved on join (joiner got) | peak RSS (MiB) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        table.append(
            f"| {r['case']} | {r['strategy']} | {r['partitions']:,} × {r['consumers']:,} | {r['first_s']:.2f} |"
            f" {r['leave_s']:.2f} | {r['moved_leave']:,} ({r['leaver_had']:,}) | {r['join_s']:.2f} |"
            f" {r['moved_join']:,} ({r['joiner_got']:,}) | {r['peak_rss_mib']:.0f} |"
        )
    sticky_total = max(
        r["first_s"] + max(r["leave_s"], r["join_s"])
        for r in rows
        if r["strategy"] in ("sticky", "cooperative-sticky") and r["case"] == "uniform-1M"
    )
    table += [
        "",
        f"Kafka's bar (AbstractStickyAssignorTest): 1M partitions × 2,000 consumers, two consecutive sticky"
        f" assignments within 30 s (uniform) / 90 s (mixed). Worst uniform sticky pair here: {sticky_total:.1f} s.",
    ]
    if args.quick:
        print("\n".join(table))
        return 0
    from benchmarks.report import write_section

    write_section("assignors", "\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
