"""Every assignor test must pass its results through the shared checker (tests/unit/assignors/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import helpers


@pytest.fixture(autouse=True)
def _every_test_is_checked(request: pytest.FixtureRequest) -> Iterator[None]:
    before = helpers.calls["checked"]
    yield
    if "no_assign" not in request.keywords:
        assert helpers.calls["checked"] > before, "this assignor test never ran the shared invariant checker"
