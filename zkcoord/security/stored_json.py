"""JSON read from stored security data (ACL znodes, SCRAM credential znodes): bounded in size and nesting depth
before the parser runs, so any bytes either give a value or a ConfigError naming what is wrong.

Python's json recurses once per nesting level (`[` x 5000 raises RecursionError, and a deep value breaks repr
and str later); the depth is therefore measured first, with C-level string operations only (strings removed by
one regular expression, then innermost bracket pairs removed a level per pass, at most `max_depth` passes).
"""

from __future__ import annotations

import json
import re
from typing import Any

from zkcoord.errors import ConfigError

# ZooKeeper's default jute.maxbuffer is ~1 MiB: no znode written with default settings is larger.
MAX_STORED_JSON_BYTES = 1 << 20
# Kafka's ACL and entity-config documents are 3 levels deep; anything far deeper is not theirs.
MAX_STORED_JSON_DEPTH = 16

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def nesting_depth(data: bytes, limit: int) -> int:
    """The deepest nesting of [] and {} outside strings; ConfigError when it exceeds `limit` or when the brackets
    do not pair up (which json would refuse anyway, after recursing as deep as they open)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = 0
    while brackets:
        if depth == limit:
            raise ConfigError(f"nested deeper than {limit} levels")
        shorter = _INNERMOST.sub(b"", brackets)  # one level: only the pairs already innermost
        if len(shorter) == len(brackets):
            raise ConfigError("not JSON: brackets do not pair up")
        brackets = shorter
        depth += 1
    return depth


def load_stored_json(
    data: bytes, max_bytes: int = MAX_STORED_JSON_BYTES, max_depth: int = MAX_STORED_JSON_DEPTH
) -> Any:
    """The JSON value of `data`; ConfigError (never another exception) when it is too large, too deep, not UTF-8
    or not JSON."""
    if len(data) > max_bytes:
        raise ConfigError(f"{len(data)} bytes, at most {max_bytes}")
    nesting_depth(data, max_depth)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8") from None
    except ValueError as exc:
        raise ConfigError(f"not JSON: {exc}") from None
    except Exception as exc:  # any other parser failure: still "this item is malformed"
        raise ConfigError(f"not JSON: {type(exc).__name__}") from None


def brief(value: object) -> str:
    """A short, safe description of a stored value for an error message: never the whole of a large or deep
    value (whose repr could be megabytes, or recurse)."""
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if value is None or isinstance(value, bool | int | float):
        return repr(value)[:40]
    return f"a JSON {type(value).__name__}"
