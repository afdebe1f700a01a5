"""RateLimitedLog: every event counted, at most `burst` lines per kind per window, a summary when it rolls."""

from __future__ import annotations

import logging

import pytest

from zkcoord.ratelog import RateLimitedLog


def test_burst_then_summary_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    say = RateLimitedLog(logging.getLogger("t.ratelog"), burst=3, window_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="t.ratelog"):
        for i in range(50):
            say.log(logging.WARNING, "bad", "bad frame %d", i)
        say.log(logging.WARNING, "other", "another kind logs on its own budget")
        now[0] = 10.5
        say.log(logging.WARNING, "bad", "bad frame after the window")
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:3] == ["bad frame 0", "bad frame 1", "bad frame 2"]
    assert messages[3] == "another kind logs on its own budget"
    assert messages[4].startswith("47 more 'bad' events in the last 10 s")
    assert messages[5] == "bad frame after the window"
    assert (say.events["bad"], say.suppressed["bad"], say.events["other"]) == (51, 47, 1)
