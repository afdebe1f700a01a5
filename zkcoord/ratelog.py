"""Rate-limited logging for events a client can repeat at will: every event counted, few lines written.

Guarantees: per kind, at most `burst` lines per `window_s` seconds; the events beyond are counted in
`suppressed[kind]` and summarised in one line when the kind next logs after its window ends. `events[kind]` counts
every event, logged or not, so operators (and the metrics hook) see the true rate.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Window:
    start: float
    lines: int = 0
    suppressed: int = 0


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        burst: int = 10,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self.events: Counter[str] = Counter()
        self.suppressed: Counter[str] = Counter()

    def log(self, level: int, kind: str, msg: str, *args: object, exc_info: bool = False) -> None:
        self.events[kind] += 1
        now = self._clock()
        win = self._windows.get(kind)
        if win is None or now - win.start >= self.window_s:
            if win is not None and win.suppressed:
                self.logger.log(
                    level,
                    "%d more '%s' events in the last %.0f s were not logged (rate limit)",
                    win.suppressed,
                    kind,
                    now - win.start,
                )
            win = self._windows[kind] = _Window(now)
        if win.lines < self.burst:
            win.lines += 1
            self.logger.log(level, msg, *args, exc_info=exc_info)
        else:
            win.suppressed += 1
            self.suppressed[kind] += 1
