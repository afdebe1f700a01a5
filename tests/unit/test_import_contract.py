"""The layer rules (pyproject's [tool.importlinter] contracts) hold for the tree, and each kind of rule really
catches a wrong import: a copy of the tree with one bad import added fails, naming the broken contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("tree")
    for name in ("zkcoord", "migration"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "contract", "evidence"),
    [
        ("zkcoord/group/model.py", "import kazoo", "The pure core does no I/O", "zkcoord.group.model -> kazoo"),
        ("zkcoord/server/mixed_decisions.py", "import asyncio", "The pure core does no I/O", "zkcoord.server.mixed_decisions -> asyncio"),
        ("zkcoord/legacy/paths.py", "import zkcoord.zk.session", "Layers", "zkcoord.legacy.paths -> zkcoord.zk"),
        ("zkcoord/server/app.py", "import kazoo.client", "Only zkcoord.zk and the test kit", "zkcoord.server.app"),
        ("zkcoord/server/broker.py", "import zkcoord.bridge.mirror", "Layers", "zkcoord.server.broker ->"),
        ("zkcoord/zk/member.py", "import migration.offsets_io", "never imports the application", "zkcoord.zk.member"),
        ("zkcoord/bridge/member.py", "import kafka.protocol.commit", "Only the adapter", "zkcoord.bridge.member"),
        ("zkcoord/group/state.py", "import zkcoord.group.handlers", "No import cycles", "cycles are allowed in zkcoord.group"),
        ("zkcoord/zk/controller_state.py", "import threading", "The lifecycle tables", "zkcoord.zk.controller_state -> threading"),
        ("zkcoord/cluster/node_state.py", "import time", "The lifecycle tables", "zkcoord.cluster.node_state -> time"),
        ("zkcoord/api_keys.py", "import zkcoord.security.acl", "Layers", "zkcoord.api_keys -> zkcoord.security"),
        ("zkcoord/server/apis.py", "import kafka.protocol.admin", "Only the adapter", "zkcoord.server.apis"),
        ("migration/compare/churn.py", "import subprocess", "churn table and trace analysis decide without I/O",
         "migration.compare.churn -> subprocess"),
    ],
)  # fmt: skip
def test_a_wrong_import_breaks_its_contract(
    tree: Path, module: str, bad_import: str, contract: str, evidence: str
) -> None:
    path = tree / module
    original = path.read_text()
    path.write_text(original + f"\n{bad_import}  # deliberately wrong\n")
    try:
        result = lint(tree)
    finally:
        path.write_text(original)
    assert result.returncode != 0
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    section = broken[broken.index(contract) :]
    assert evidence in section, section[:2000]
