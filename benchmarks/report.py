"""Benchmark results: one section per benchmark in docs/benchmarks.md, replaced in place, with machine and date."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
from pathlib import Path

# The 1-minute load average when this benchmark started (scripts/bench.sh reads it just before it starts the
# benchmark; run alone, when this module is imported): the figure that says whether anything else competed for
# the cores, stamped beside the one at the end of the run.
LOAD_AT_START = float(os.environ.get("ZKCOORD_BENCH_LOAD") or os.getloadavg()[0])
DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nRun them all with `bash scripts/bench.sh` (or one: `bash scripts/bench.sh NAME`).\n"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({cpu}){mem}, Python {platform.python_version()}, {platform.system()}"


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section `name` of docs/benchmarks.md with `body`, stamped with machine, date and load."""
    start, end = LOAD_AT_START, os.getloadavg()[0]
    stamp = (
        f"_Measured {dt.date.today().isoformat()} on {machine()}; load average (1 min) {start:.2f} at the "
        f"start, {end:.2f} at the end (the end includes this benchmark's own processes)._"
    )
    section = f"<!-- bench:{name} -->\n## {name}\n\n{stamp}\n\n{body.strip()}\n<!-- /bench:{name} -->\n"
    text = DOC.read_text() if DOC.exists() else HEADER
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->\n", re.S)
    text = (
        pattern.sub(lambda _m: section, text)
        if pattern.search(text)
        else text.rstrip("\n") + "\n\n" + section
    )
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
    print(section)
