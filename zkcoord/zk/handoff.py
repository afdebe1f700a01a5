"""The hand-off znodes `/zkcoord/handoffs/<group>`: that a group the proxies coordinate is being handed to the
cluster's own coordinator (`releasing`: the proxies make its members release everything and admit none) or has been
(`forwarding`: the proxies forward all its requests, FindCoordinator included, to the cluster). Written only by
`zkcoord migrate handoff`, read and watched by every proxy node. Never under the cluster's own znodes.
"""

from __future__ import annotations

import enum
import json
import logging
import urllib.parse
from dataclasses import dataclass
from typing import Any

from zkcoord.errors import MalformedZnode
from zkcoord.zk.offset_store import read_node, write_node
from zkcoord.zk.session import Client
from zkcoord.zk.watch import RearmedWatch, Watcher

log = logging.getLogger(__name__)

HANDOFFS = "/zkcoord/handoffs"
MAX_HANDOFF_BYTES = 64 * 1024  # a hand-off znode is a few hundred bytes; anything larger is not one of ours


class Phase(enum.Enum):
    RELEASING = "releasing"  # members are made to release everything; no member is admitted
    FORWARDING = "forwarding"  # the point of no return: the cluster's coordinator has the group


def handoff_path(group: str) -> str:
    # A group id may hold any character, a znode name no "/": percent-encoded (as a URL path segment).
    return f"{HANDOFFS}/{urllib.parse.quote(group, safe='')}"


@dataclass(frozen=True, slots=True)
class Handoff:
    group: str
    phase: Phase
    updated_ms: int
    members: (
        int  # members the proxies' group had when the hand-off began (how many to wait for on the cluster)
    )

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "group": self.group,
                "phase": self.phase.value,
                "updated_ms": self.updated_ms,
                "members": self.members,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, path: str, data: bytes) -> Handoff:
        if len(data) > MAX_HANDOFF_BYTES:
            raise MalformedZnode(path, f"{len(data)} bytes, more than a hand-off znode holds")
        try:
            obj = json.loads(data)
            if not isinstance(obj, dict) or obj.get("version") != 1:
                raise ValueError("not a version-1 object")
            group, phase, updated, members = obj["group"], obj["phase"], obj["updated_ms"], obj["members"]
            if not isinstance(group, str) or not isinstance(updated, int) or not isinstance(members, int):
                raise ValueError("group, updated_ms or members of the wrong type")
            if members < 0:
                raise ValueError(f"members {members} < 0")
            return cls(group, Phase(phase), updated, members)
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedZnode(path, f"not a hand-off record: {exc}") from None


def read_handoff(client: Any, group: str) -> tuple[Handoff | None, int]:
    """(the group's hand-off, znode version), or (None, -1) when the group is not being handed off."""
    path = handoff_path(group)
    data, version = read_node(client, path)
    if data is None:
        return None, -1
    handoff = Handoff.decode(path, data)
    if handoff.group != group:
        raise MalformedZnode(path, f"names group {handoff.group!r}, not {group!r}")
    return handoff, version


def write_handoff(client: Any, handoff: Handoff, version: int) -> int:
    """Create (version -1) or versioned-set the group's hand-off znode; OffsetWriteConflict if someone else did."""
    return write_node(client, handoff_path(handoff.group), handoff.encode(), version)


class HandoffWatch:
    """`phase(group)` from `/zkcoord/handoffs`, kept current by ZooKeeper watches (children and each child's data;
    read again once a new session replaces an expired one: `zkcoord.zk.watch.RearmedWatch`). A malformed child
    is logged and ignored."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._watch: RearmedWatch[dict[str, Phase]] = RearmedWatch(
            client, self._read, {}, name=f"proxy: {HANDOFFS}", on_change=_log_phases
        )

    @property
    def phases(self) -> dict[str, Phase]:
        """Replaced whole on every re-read: safe to read from any thread."""
        return self._watch.value

    def phase(self, group: str) -> Phase | None:
        return self.phases.get(group)

    def start(self) -> None:
        self._watch.start()

    def close(self) -> None:
        self._watch.close()

    def _read(self, watch: Watcher) -> dict[str, Phase]:
        found: dict[str, Phase] = {}
        if self.client.exists(HANDOFFS, watch=watch):
            for name in self.client.get_children(HANDOFFS, watch=watch):
                path = f"{HANDOFFS}/{name}"
                try:
                    data, _ = self.client.get(path, watch=watch)
                    handoff = Handoff.decode(path, data)
                except MalformedZnode as exc:
                    log.warning("proxy: ignoring %s", exc)
                    continue
                except Exception as exc:  # NoNode: deleted between the listing and the read
                    log.debug("proxy: %s: %r", path, exc)
                    continue
                found[handoff.group] = handoff.phase
        return found


def _log_phases(found: dict[str, Phase]) -> None:
    log.info("proxy: hand-offs %s", ", ".join(f"{g}={p.value}" for g, p in sorted(found.items())) or "none")
