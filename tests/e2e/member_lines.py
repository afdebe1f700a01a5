"""What the e2e tests of member processes share: the observer of their callback lines ("A ns parts" assigned,
"R ns parts" revoked, "M ns partition offset" consumed; ns from the member's CLOCK_MONOTONIC), replayed in time
order so a partition given while another member still held it fails the test.

Each member's lines reach the observer through its own pipe and reader thread, so lines of different members
arrive in any order: a member's revocation printed before another's assignment can arrive after it (its reader
thread starved under load). Replaying what has arrived so far would then show two holders. An overlap is
therefore reported only once it is certain: the earlier holder's stream has moved past the moment of the new
assignment (a later line of its own arrived, and its lines arrive in the order it printed them) or has ended.
Until then the two are both shown as holders; once every stream ended (`ended`), the replay is complete."""

from __future__ import annotations

import subprocess
import sys
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
    last_ns: dict[str, int] = field(default_factory=dict)  # per member: the stamp of its latest line here
    closed: set[str] = field(default_factory=set)  # members whose stream ended: nothing more will arrive

    def line(self, member: str, text: str) -> None:
        kind, ns, *rest = text.split(" ", 2)
        with self.lock:
            self.last_ns[member] = max(self.last_ns.get(member, 0), int(ns))
            if kind == "M":
                p, o = rest[0].split()
                self.consumed.add((int(p), int(o)))
            elif kind in ("A", "R"):
                parts = tuple(int(p) for p in rest[0].split(",") if p) if rest else ()
                self.events.append((int(ns), member, kind, parts))

    def ended(self, member: str) -> None:
        """The member's stream reached its end (its reader saw EOF): every line it printed is here."""
        with self.lock:
            self.closed.add(member)

    def killed(self, member: str) -> None:
        with self.lock:
            self.events.append((time.monotonic_ns(), member, "K", ()))

    def holders(self) -> dict[str, set[int]]:
        """Who holds what now, replaying every event in time order; raises on a partition held twice once no
        line still in flight can undo it (see the module's docstring)."""
        with self.lock:
            events = sorted(self.events)
            last_ns = dict(self.last_ns)
            closed = set(self.closed)
        held: dict[str, set[int]] = {}
        for ns, member, kind, parts in events:
            mine = held.setdefault(member, set())
            if kind == "A":
                for p in parts:
                    for other, theirs in held.items():
                        certain = other in closed or last_ns.get(other, 0) > ns
                        assert other == member or p not in theirs or not certain, (
                            f"partition {p} given to {member} at {ns} while {other} held it"
                        )
                    mine.add(p)
            elif kind == "R":
                mine.difference_update(parts)
            else:
                mine.clear()  # a killed process holds nothing
        return held


class MemberProcess:
    """One member process (`python SCRIPT ARGS...`) printing its callback lines, each read into `observer` under
    `name` by a reader thread that tells the observer when the stream ends."""

    def __init__(self, script: str, args: list[str], name: str, observer: Observer) -> None:
        self.name = name
        self.observer = observer
        self.proc = subprocess.Popen(
            [sys.executable, script, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            self.observer.line(self.name, text.strip())
        self.observer.ended(self.name)

    def leave(self) -> None:
        """SIGTERM: the member closes (revocation printed, then its leave: a static consumer-protocol member's is
        the epoch -2 one). A close that cannot reach the node waits for it, so after 20 s the process is killed:
        a member never outlives its test."""
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(5)

    def kill9(self) -> None:
        """kill -9: the process holds nothing from now on (the observer is told)."""
        self.proc.kill()
        self.proc.wait(10)
        self.observer.killed(self.name)
        self.reader.join(5)
