"""Fixtures shared by the integration modules: the session's one `zkcoord demo` run."""

from __future__ import annotations

import pytest
from demo_run import DemoRun, run_demo


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo, run once: test_demo checks its output, report and clean exit; test_compare_rolling_migration
    checks the built-in rolling-migration it plays (the same play as `run_scenario(builtin_scenario(
    "rolling-migration"))`, which cost another ~27 s of CI when played twice)."""
    return run_demo(tmp_path_factory.mktemp("demo"))
