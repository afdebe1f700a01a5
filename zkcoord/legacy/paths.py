"""Every znode path of the 0.8-era Kafka tree, built from validated names so a bad name never reaches ZooKeeper.

Builders validate their inputs and raise `InvalidName` (a `ConfigError`) naming the offending value and rule.
Topic names follow Kafka's legal characters `[a-zA-Z0-9._-]`; builders accept up to 255 characters (what a
0.8.2 broker allowed, so every topic that can exist in such a tree has a path) while `validate_topic` defaults
to the 249-character limit of 0.10 for names about to be created. Group names were never validated by the old
consumer, so only what ZooKeeper itself cannot hold is refused: empty, `/`, `.`, `..`, and the code points
ZooKeeper rejects in path elements.
"""

from __future__ import annotations

import re
from typing import Final

from zkcoord.errors import ConfigError

CONSUMERS: Final = "/consumers"
BROKERS: Final = "/brokers"
BROKER_IDS: Final = "/brokers/ids"
BROKER_TOPICS: Final = "/brokers/topics"
BROKER_SEQUENCE_ID: Final = "/brokers/seqid"
CONTROLLER: Final = "/controller"
CONTROLLER_EPOCH: Final = "/controller_epoch"
ADMIN: Final = "/admin"
ADMIN_DELETE_TOPICS: Final = "/admin/delete_topics"
ADMIN_REASSIGN_PARTITIONS: Final = "/admin/reassign_partitions"
ADMIN_PREFERRED_REPLICA_ELECTION: Final = "/admin/preferred_replica_election"
CONFIG: Final = "/config"
CONFIG_CHANGES: Final = "/config/changes"
CONFIG_TOPICS: Final = "/config/topics"
CONFIG_CLIENTS: Final = "/config/clients"
ISR_CHANGE_NOTIFICATION: Final = "/isr_change_notification"

# ZkUtils.setupCommonPaths of 0.8.2.2.
PERSISTENT_PATHS_0_8_2: Final = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    ADMIN_DELETE_TOPICS,
)
# ZkUtils.persistentZkPaths of 0.10.2.2: the 0.8.2 set plus client configs, the broker id sequence and the
# ISR change notifications.
PERSISTENT_PATHS_0_10_2: Final = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    ADMIN_DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
)

INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets"})
TOPIC_MAX_LENGTH: Final = 249
TOPIC_MAX_LENGTH_0_8_2: Final = 255
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
# Characters ZooKeeper's PathUtils.validatePath refuses inside a path element.
_ZK_ILLEGAL = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


class InvalidName(ConfigError):
    """A group, topic, partition or broker id cannot be part of a znode path; says which and why."""

    def __init__(self, kind: str, value: object, rule: str) -> None:
        super().__init__(f"invalid {kind} {value!r}: {rule}")
        self.kind = kind
        self.value = value
        self.rule = rule


def validate_topic(topic: str, *, max_length: int = TOPIC_MAX_LENGTH) -> str:
    """Return `topic` if Kafka accepts it as a topic name, else raise `InvalidName`."""
    if not isinstance(topic, str):
        raise InvalidName("topic", topic, "must be a string")
    if topic == "":
        raise InvalidName("topic", topic, "must not be empty")
    if topic in (".", ".."):
        raise InvalidName("topic", topic, "'.' and '..' are not allowed")
    if len(topic) > max_length:
        raise InvalidName("topic", topic, f"longer than {max_length} characters ({len(topic)})")
    if not _TOPIC_CHARS.fullmatch(topic):
        bad = sorted({c for c in topic if not _TOPIC_CHARS.fullmatch(c)})
        raise InvalidName("topic", topic, f"illegal characters {''.join(bad)!r}; allowed are [a-zA-Z0-9._-]")
    return topic


def validate_group(group: str) -> str:
    """Return `group` if it can be one znode path element, else raise `InvalidName`."""
    if not isinstance(group, str):
        raise InvalidName("group", group, "must be a string")
    if group == "":
        raise InvalidName("group", group, "must not be empty")
    if group in (".", ".."):
        raise InvalidName("group", group, "'.' and '..' are not allowed")
    if "/" in group:
        raise InvalidName("group", group, "must not contain '/'")
    bad = _ZK_ILLEGAL.search(group)
    if bad:
        raise InvalidName("group", group, f"character U+{ord(bad.group()):04X} is not allowed by ZooKeeper")
    return group


def _element(kind: str, value: str) -> str:
    # Consumer ids and thread ids are built from the group name plus host and digits; same rules as a group.
    try:
        return validate_group(value)
    except InvalidName as exc:
        raise InvalidName(kind, value, exc.rule) from None


def _topic(topic: str) -> str:
    return validate_topic(topic, max_length=TOPIC_MAX_LENGTH_0_8_2)


def _non_negative(kind: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidName(kind, value, "must be an int")
    if value < 0 or value > 2**31 - 1:
        raise InvalidName(kind, value, "must be in 0..2147483647")
    return value


# --- /consumers ---------------------------------------------------------------------------------------------


def group_path(group: str) -> str:
    return f"{CONSUMERS}/{validate_group(group)}"


def ids_path(group: str) -> str:
    return f"{group_path(group)}/ids"


def id_path(group: str, consumer_id: str) -> str:
    return f"{ids_path(group)}/{_element('consumer id', consumer_id)}"


def owners_path(group: str) -> str:
    return f"{group_path(group)}/owners"


def owners_topic_path(group: str, topic: str) -> str:
    return f"{owners_path(group)}/{_topic(topic)}"


def owner_path(group: str, topic: str, partition: int) -> str:
    return f"{owners_topic_path(group, topic)}/{_non_negative('partition', partition)}"


def wanted_topic_path(group: str, topic: str) -> str:
    """zkcoord's hand-over hint (no 0.8 member reads it): `/consumers/G/zkcoord-wanted/T/P` exists while a
    coordinator's hand-over waits for partition P's owner znode for a broker-protocol member, so a leaving
    fast-mode member holds that partition (and consumes it) until then (`LegacyConsumer.leave`)."""
    return f"{group_path(group)}/zkcoord-wanted/{_topic(topic)}"


def wanted_path(group: str, topic: str, partition: int) -> str:
    return f"{wanted_topic_path(group, topic)}/{_non_negative('partition', partition)}"


def offsets_path(group: str) -> str:
    return f"{group_path(group)}/offsets"


def offsets_topic_path(group: str, topic: str) -> str:
    return f"{offsets_path(group)}/{_topic(topic)}"


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{offsets_topic_path(group, topic)}/{_non_negative('partition', partition)}"


# --- /brokers -------------------------------------------------------------------------------------------------


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{_non_negative('broker id', broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{_topic(topic)}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{_non_negative('partition', partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


# --- /admin and /config ----------------------------------------------------------------------------------------


def delete_topic_path(topic: str) -> str:
    return f"{ADMIN_DELETE_TOPICS}/{_topic(topic)}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{_topic(topic)}"


def config_change_path(sequence: int) -> str:
    """`/config/changes/config_change_NNNNNNNNNN`, the name a persistent-sequential create gives."""
    return f"{CONFIG_CHANGES}/config_change_{_non_negative('sequence', sequence):010d}"


def parse_partition(path: str, name: str) -> int:
    """A child name under owners/offsets/partitions as a partition id; `InvalidName` names the parent path."""
    if not name.isascii() or not name.isdigit() or (len(name) > 1 and name[0] == "0"):
        raise InvalidName("partition", name, f"child of {path} is not a decimal partition id")
    return _non_negative("partition", int(name))
