"""Plays of a comparison scenario side by side, for tests: one `run_scenario` per protocol, all at once, each with
its own ZooKeeper (ensemble) and node, or on the given ones with its own group and topic there, as `run_scenario`
gives each protocol's play in turn. A play's wall time is its scenario's timeline (waits, not work), so two plays
at once take the time of one; what the tests check of each play (its own trace, counts and churn rows) does not
depend on the order of the plays."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from migration.compare.runner import PlayResult, run_scenario
from migration.compare.scenario import Scenario


def play_side_by_side(
    scenario: Scenario, out_dir: Path, *, runs: int = 1, **given: Any
) -> tuple[list[Path], list[PlayResult]]:
    """(run directories, results) in the order `run_scenario(scenario, out_dir, runs=runs, **given)` returns them
    played one after another: run by run, in the scenario's protocol order. Each protocol plays its `runs` in
    turn, beside the others. `given`: run_scenario's zk_connect and bootstrap, a ZooKeeper and node the plays
    then share (each play has its own group and topic there)."""

    def play(protocol: str) -> list[tuple[Path, PlayResult]]:
        results: list[PlayResult] = []
        dirs = run_scenario(
            scenario,
            out_dir,
            runs=runs,
            protocols=[protocol],
            progress=False,
            on_result=results.append,
            **given,
        )
        return list(zip(dirs, results, strict=True))

    protocols = [p.protocol for p in scenario.protocols]
    with ThreadPoolExecutor(len(protocols), thread_name_prefix="play") as pool:
        by_protocol = list(pool.map(play, protocols))
    played = [by_protocol[p][i] for i in range(runs) for p in range(len(protocols))]
    return [d for d, _ in played], [r for _, r in played]
