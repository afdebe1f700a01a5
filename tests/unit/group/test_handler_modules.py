"""The handler modules (membership, offsets, admin, loading, common) stand without the entry `handlers` module."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from zkcoord.group import handlers as h

SPLIT = ("common", "membership", "offsets", "admin", "loading")


def test_split_modules_do_not_import_the_entry_module() -> None:
    # A fresh interpreter: this test process has long imported the entry module through other tests.
    code = (
        "import importlib, sys\n"
        f"for name in {SPLIT!r}: importlib.import_module('zkcoord.group.' + name)\n"
        "print('zkcoord.group.handlers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _names_callers_use() -> set[str]:
    """Every `h.NAME` / `handlers.NAME` in the modules that import the entry under that name."""
    root = Path(__file__).resolve().parents[3]
    spellings = {
        "from zkcoord.group import handlers as h": re.compile(r"\bh\.([A-Za-z_]\w*)"),
        "from zkcoord.group import handlers\n": re.compile(r"\bhandlers\.([A-Za-z_]\w*)"),
    }
    names: set[str] = set()
    for package in ("zkcoord", "migration", "tests", "benchmarks"):
        for path in (root / package).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            text = path.read_text(encoding="utf-8")
            for line, pattern in spellings.items():
                if line in text:
                    names.update(pattern.findall(text))
    return names


def test_entry_module_keeps_every_name_callers_use() -> None:
    used = _names_callers_use()
    assert {"handle_join", "load", "on_timer", "error_response"} <= used  # the scan itself found the callers
    assert sorted(name for name in used if name not in h.__all__ or not hasattr(h, name)) == []
