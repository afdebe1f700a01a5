"""Fixtures for end-to-end tests: one real `zkcoord serve` subprocess per module, always killed afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zkcoord.local.node import FAST_GROUP_FLAGS, READY, NodeProcess

__all__ = ["FAST_GROUP_FLAGS", "READY", "ServerProcess"]

# The e2e tests' server is the project's own `zkcoord serve` process manager.
ServerProcess = NodeProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("zkcoord-serve"), (*FAST_GROUP_FLAGS, "--num.partitions=1"))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill9()
