"""Consumer ids, thread ids and the Java string semantics the old consumer orders them by.

Pure: the host name, clock reading and uuid bits are parameters. Orders match the JVM exactly:
`String.compareTo` compares UTF-16 code units (so `c-10 < c-2`, and non-BMP characters sort as surrogates),
`String.hashCode` is the 32-bit signed polynomial hash over UTF-16 code units.
"""

from __future__ import annotations

from collections.abc import Iterable

INT32_SPAN = 2**32


def utf16_key(s: str) -> bytes:
    """Sort key giving Java `String.compareTo` order: `sorted(names, key=utf16_key)`."""
    # surrogatepass: a lone surrogate in a Python str is one UTF-16 code unit in Java, not an error.
    return s.encode("utf-16-be", "surrogatepass")


def java_compare(a: str, b: str) -> int:
    """Java `a.compareTo(b)`: difference of the first differing code units, else of the lengths."""
    ua, ub = _units(a), _units(b)
    for x, y in zip(ua, ub, strict=False):
        if x != y:
            return x - y
    return len(ua) - len(ub)


def java_sorted(names: Iterable[str]) -> list[str]:
    """`names` in Java String order (the order of ids children and of thread ids)."""
    return sorted(names, key=utf16_key)


def java_hash(s: str) -> int:
    """Java `String.hashCode` as a signed 32-bit int. `java_hash("[topic1,0]") == -315570884`."""
    h = 0
    for unit in _units(s):
        h = (31 * h + unit) % INT32_SPAN
    return h - INT32_SPAN if h >= 2**31 else h


def _units(s: str) -> list[int]:
    raw = utf16_key(s)
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def uuid_prefix(most_significant_bits: int) -> str:
    """`uuid.getMostSignificantBits.toHexString.substring(0,8)`: hex of the signed long's two's complement,
    not zero-padded, so a small positive value gives fewer digits (Java would then throw; we refuse too)."""
    if not -(2**63) <= most_significant_bits < 2**63:
        raise ValueError(f"most significant bits must be a signed 64-bit value, got {most_significant_bits}")
    text = format(most_significant_bits % 2**64, "x")
    if len(text) < 8:
        raise ValueError(f"toHexString of {most_significant_bits} has fewer than 8 digits")
    return text[:8]


def consumer_id(group: str, *, host: str, timestamp_ms: int, uuid8: str) -> str:
    """Generated consumer id `group_host-timestampMs-uuid8`, e.g. `mygroup_host1-1428512949385-1a2b3c4d`."""
    if len(uuid8) != 8 or any(c not in "0123456789abcdef" for c in uuid8):
        raise ValueError(f"uuid8 must be 8 lower-case hex digits, got {uuid8!r}")
    return f"{group}_{host}-{timestamp_ms}-{uuid8}"


def consumer_id_from_suffix(group: str, consumer_id_config: str) -> str:
    """Consumer id when `consumer.id` is configured ("for testing only"): `group + "_" + consumer.id`."""
    return f"{group}_{consumer_id_config}"


def thread_id(consumer: str, n: int) -> str:
    """`ConsumerThreadId.toString`: `consumer + "-" + n`."""
    if n < 0:
        raise ValueError(f"thread number must be >= 0, got {n}")
    return f"{consumer}-{n}"


def thread_ids(consumer: str, num_streams: int) -> list[str]:
    """The thread ids of one topic: `consumer-0 .. consumer-(num_streams-1)`, in Java order."""
    return java_sorted(thread_id(consumer, n) for n in range(num_streams))


def consumer_of_thread(thread: str) -> str:
    """Owner value -> consumer id: `owner.substring(0, owner.lastIndexOf('-'))` (consumer-groups 0.10.x)."""
    cut = thread.rfind("-")
    if cut < 0:
        raise ValueError(f"thread id {thread!r} has no '-<n>' suffix")
    return thread[:cut]


def is_classic_id(group: str, consumer_id: str) -> bool:
    """Whether a `/consumers/G/ids` child is a broker-protocol member a zkcoord coordinator registered
    (`<group>_classic-<16 hex>`: zkcoord.bridge.mixed_policy.consumer_id_for names them).

    >>> is_classic_id("g", "g_classic-0000000012345678"), is_classic_id("g", "g_host-1")
    (True, False)
    """
    prefix = f"{group}_classic-"
    tail = consumer_id[len(prefix) :]
    return consumer_id.startswith(prefix) and len(tail) == 16 and all(c in "0123456789abcdef" for c in tail)
