"""The JSON Schemas of `zkcoord migrate plan|verify|status --json`: the stable contract of those documents (a
field is only ever added, never renamed or retyped, without bumping VERSION). Tests validate real output with them.

One document per run: `{"version": 1, "step": "plan", "groups": [...]}`, one object per group named by the run,
in group order, each with its `exit` status (0 done, 1 verify found disagreements, 2 refused or failed). A group
that failed has `error` (the message the text output prints) instead of the rest.
"""

from __future__ import annotations

from typing import Any

VERSION = 1

_NEXT: dict[str, Any] = {
    "type": "array",
    "description": "the next steps, in order; `command` is a command line that works as printed, or null",
    "items": {
        "type": "object",
        "required": ["text", "command"],
        "properties": {"text": {"type": "string"}, "command": {"type": ["string", "null"]}},
        "additionalProperties": False,
    },
}

_MEMBER = {
    "type": "object",
    "required": ["consumer_id", "client_id", "protocol", "owns", "gone"],
    "properties": {
        "consumer_id": {"type": "string", "description": "the /consumers/G/ids child"},
        "client_id": {"type": ["string", "null"], "description": "a broker-protocol member's client.id"},
        "protocol": {"type": "string", "enum": ["legacy", "classic"]},
        "owns": {
            "type": "array",
            "items": {"type": "string"},
            "description": "owner znodes it holds, as T-P",
        },
        "gone": {"type": "boolean", "description": "znodes left over by a member that is not there any more"},
    },
    "additionalProperties": False,
}

_PHASE = {"type": ["string", "null"], "enum": ["legacy-only", "mixed", "broker-only", None]}

_GROUP: dict[str, Any] = {
    "type": "object",
    "required": ["group", "state", "membership", "next", "exit"],
    "properties": {
        "group": {"type": "string"},
        "state": {
            "type": "string",
            "enum": ["none", "planned", "dual-commit", "verified", "finalized", "rolled-back"],
        },
        "membership": {
            "type": "object",
            "required": ["phase", "recorded", "members", "not_settled"],
            "properties": {
                "phase": _PHASE,
                "recorded": _PHASE,
                "members": {"type": "array", "items": _MEMBER},
                "not_settled": {"type": "array", "items": {"type": "string"}},
            },
            "additionalProperties": False,
        },
        "next": _NEXT,
        "exit": {"type": "integer", "enum": [0, 1, 2]},
    },
}

_ERROR = {
    "type": "object",
    "required": ["group", "error", "exit"],
    "properties": {
        "group": {"type": "string"},
        "error": {"type": "string"},
        "exit": {"type": "integer", "enum": [1, 2]},
    },
    "additionalProperties": False,
}

_COUNT = {"type": "integer", "minimum": 0}

PLAN = {
    **_GROUP,
    "required": [*_GROUP["required"], "plan"],
    "properties": {
        **_GROUP["properties"],
        "plan": {
            "type": "object",
            "required": [
                "offsets", "broker_offsets", "broker_members", "broker_state", "offset_bridges", "changes", "risks",
            ],
            "properties": {
                "offsets": {
                    "type": "object",
                    "required": ["zookeeper", "broker", "to_seed"],
                    "properties": {"zookeeper": _COUNT, "broker": _COUNT, "to_seed": _COUNT},
                },
                "broker_offsets": {
                    "enum": ["coordinator", "bridged"],
                    "description": "bridged: read through an offset bridge, max(coordinator, ZooKeeper)",
                },
                "broker_members": {"type": "array", "items": {"type": "string"}},
                "broker_state": {"type": ["string", "null"]},
                "offset_bridges": {"type": "array", "items": {"type": "string"}},
                "changes": {"type": "array", "items": {"type": "string"}},
                "risks": {"type": "array", "items": {"type": "string"}},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}  # fmt: skip

VERIFY = {
    **_GROUP,
    "required": [*_GROUP["required"], "verify"],
    "properties": {
        **_GROUP["properties"],
        "verify": {
            "type": "object",
            "required": ["ok", "max_lag", "partitions", "counts", "disagreements"],
            "properties": {
                "ok": {"type": "boolean"},
                "max_lag": _COUNT,
                "partitions": _COUNT,
                "counts": {"type": "object", "additionalProperties": _COUNT},
                "disagreements": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": [
                            "topic",
                            "partition",
                            "zookeeper",
                            "broker",
                            "agreement",
                            "lag",
                            "cause",
                        ],
                        "properties": {
                            "topic": {"type": "string"},
                            "partition": _COUNT,
                            "zookeeper": {"type": ["integer", "null"]},
                            "broker": {"type": ["integer", "null"]},
                            "agreement": {"type": "string"},
                            "lag": _COUNT,
                            "cause": {"type": "string"},
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

STATUS = {
    **_GROUP,
    "required": [*_GROUP["required"], "status"],
    "properties": {
        **_GROUP["properties"],
        "status": {
            "type": "object",
            "required": ["marker", "journal"],
            "properties": {
                "marker": {
                    "type": ["object", "null"],
                    "required": ["step", "updated", "version"],
                    "properties": {
                        "step": {"type": "string"},
                        "updated": {"type": "string", "description": "ISO 8601 UTC"},
                        "version": {"type": "integer"},
                    },
                },
                "journal": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["time", "step", "event", "from", "to", "reason"],
                        "properties": {
                            "time": {"type": "string"},
                            # offsets, forwarding: `migrate handoff`'s steps (docs/proxy.md "Hand-off")
                            "event": {
                                "enum": ["begin", "done", "failed", "refused", "offsets", "forwarding"]
                            },
                            "reason": {"type": ["string", "null"]},
                        },
                    },
                },
                "handoff": {
                    "type": "object",
                    "description": "present while or after `migrate handoff` moved the group to the cluster",
                    "required": ["phase", "updated"],
                    "properties": {
                        "phase": {"enum": ["releasing", "forwarding"]},
                        "updated": {"type": "string", "description": "ISO 8601 UTC"},
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


def document(step: str) -> dict[str, Any]:
    """The schema of the whole `migrate STEP --json` document."""
    per_group = {"plan": PLAN, "verify": VERIFY, "status": STATUS}[step]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["version", "step", "groups"],
        "properties": {
            "version": {"const": VERSION},
            "step": {"const": step},
            "groups": {"type": "array", "items": {"oneOf": [per_group, _ERROR]}},
        },
        "additionalProperties": False,
    }
