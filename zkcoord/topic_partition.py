"""The one (topic, partition) value of every layer: a NamedTuple, so it also is the plain pair older callers
use — it unpacks as `topic, partition`, compares and hashes equal to `(topic, partition)`, and sorts by topic
then partition."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka's TopicAndPartition.toString, as the original's log lines show it.
        return f"[{self.topic},{self.partition}]"


__all__ = ["TopicPartition"]
