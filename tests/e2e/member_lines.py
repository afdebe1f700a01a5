"""What the e2e tests of member processes share: the observer of their callback lines ("A ns parts" assigned,
"R ns parts" revoked, "M ns partition offset" consumed; ns from the member's CLOCK_MONOTONIC), replayed in time
order so a partition given while another member still held it fails the test."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Observer:
    """Every member's lines, timestamped by the member itself; kills timestamped by the test."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    events: list[tuple[int, str, str, tuple[int, ...]]] = field(
        default_factory=list
    )  # (ns, member, A|R|K, parts)
    consumed: set[tuple[int, int]] = field(default_factory=set)

    def line(self, member: str, text: str) -> None:
        kind, ns, *rest = text.split(" ", 2)
        with self.lock:
            if kind == "M":
                p, o = rest[0].split()
                self.consumed.add((int(p), int(o)))
            elif kind in ("A", "R"):
                parts = tuple(int(p) for p in rest[0].split(",") if p) if rest else ()
                self.events.append((int(ns), member, kind, parts))

    def killed(self, member: str) -> None:
        with self.lock:
            self.events.append((time.monotonic_ns(), member, "K", ()))

    def holders(self) -> dict[str, set[int]]:
        """Who holds what now, replaying every event in time order; raises on a partition held twice."""
        with self.lock:
            events = sorted(self.events)
        held: dict[str, set[int]] = {}
        for ns, member, kind, parts in events:
            mine = held.setdefault(member, set())
            if kind == "A":
                for p in parts:
                    other = next((m for m, ps in held.items() if m != member and p in ps), None)
                    assert other is None, f"partition {p} given to {member} at {ns} while {other} held it"
                    mine.add(p)
            elif kind == "R":
                mine.difference_update(parts)
            else:
                mine.clear()  # a killed process holds nothing
        return held
