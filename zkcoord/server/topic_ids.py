"""Topic ids (KIP-516): every topic's stable uuid, as Metadata v10+ and the consumer protocol (KIP-848) carry it.

A topic's id is derived from its name (uuid5 in a fixed namespace), so it is stable for the topic's life without a
write: every node of a cluster and every restart give the same id, and there is nothing to lose or corrupt. Known
gap since DeleteTopics came: a topic deleted and created again under the same name gets the same id, where Kafka
gives it a fresh one; the id is to be persisted with the topic. Kafka reserves the zero uuid (no id) and 0...01
(the metadata topic); a derived id is neither (uuid5 sets version and variant bits).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import lru_cache

from zkcoord.server.log import LogManager

_NAMESPACE = uuid.UUID("5b0e7f1e-6a43-4b8e-9a0c-7a6b9c1d2e3f")  # zkcoord's, fixed forever


@lru_cache(maxsize=65536)
def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE, name)


def topic_lookup(logs: LogManager) -> Callable[[str], tuple[str, int] | None]:
    """name -> (topic id as 32 hex digits, partition count) of a topic this node has, else None."""

    def lookup(name: str) -> tuple[str, int] | None:
        parts = logs.topics.get(name)
        if not parts:
            return None
        return topic_id(name).hex, len(parts)

    return lookup


def topics_version(logs: LogManager) -> Callable[[], int]:
    """What moves whenever `topic_lookup(logs)` may answer differently (a topic created, grown or deleted)."""
    return lambda: logs.topics_version
