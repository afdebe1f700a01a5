"""Benchmark results: one section per benchmark in docs/benchmarks.md, replaced in place, with machine and date."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
from pathlib import Path

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
    """Replace (or append) the section `name` of docs/benchmarks.md with `body`, stamped with machine and date."""
    stamp = f"_Measured {dt.date.today().isoformat()} on {machine()}._"
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
