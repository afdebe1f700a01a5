"""Message formats of clients before 0.11 on the data plane: Produce v0-v2 message sets (magic 0/1) converted up
to the RecordBatch v2 the logs store, and stored batches converted down for Fetch v0-v3 (magic 0 for v0-v1,
magic 1 for v2-v3), so producers and consumers of every generation share one topic.

What Kafka's LogValidator and down-conversion decide for these versions is kept: a Produce v0-v2 whose records are
a RecordBatch v2 is CORRUPT_MESSAGE (those versions carry message sets only); a bad CRC, a truncated or nested
wrapper, or a wrapper inflating past the bound is CORRUPT_MESSAGE and stores nothing; a message over
message.max.bytes is MESSAGE_TOO_LARGE. Every codec (none, gzip, snappy, lz4, zstd) is read both ways; a stored batch
that still cannot be down-converted (its records do not decompress, or inflate past the bound) is that partition's
UNSUPPORTED_FOR_MESSAGE_FORMAT, never an empty answer without an error.
"""

from __future__ import annotations

import logging

from zkcoord.errors import ErrorCode
from zkcoord.ratelog import RateLimitedLog
from zkcoord.records import message_set as ms
from zkcoord.records.batch import AppendRules, CorruptBatch

log = logging.getLogger(__name__)
# A client repeats a Fetch at will: its conversion failures are counted, few lines written (operations.md).
_say = RateLimitedLog(log)

FIRST_RECORD_BATCH_PRODUCE = 3  # Produce v3 (Kafka 0.11) is the first to carry RecordBatch v2
FIRST_RECORD_BATCH_FETCH = 4  # Fetch v4 likewise


def fetch_magic(fetch_version: int) -> int:
    """The message format an old Fetch version reads: v0-v1 magic 0, v2-v3 magic 1 (KIP-32)."""
    return ms.MAGIC_V0 if fetch_version < 2 else ms.MAGIC_V1


def produce_to_batch(
    api_version: int, records: memoryview, now_ms: int, rules: AppendRules, max_inflated: int
) -> memoryview:
    """The records of a Produce at `api_version`, as the RecordBatch v2 to validate and store; v3+ unchanged."""
    if api_version >= FIRST_RECORD_BATCH_PRODUCE:
        return records
    magic = ms.magic_of(records)
    if magic not in (ms.MAGIC_V0, ms.MAGIC_V1):
        raise CorruptBatch(f"Produce v{api_version} carries message sets of magic 0 or 1, not magic {magic}")
    return memoryview(ms.to_record_batch(records, now_ms, rules, max_inflated))


def fetch_records(
    fetch_version: int, where: str, data: bytes, fetch_offset: int, max_bytes: int, max_inflated: int
) -> tuple[bytes, ErrorCode]:
    """Stored batches as `fetch_version` reads them, and the partition's error: UNSUPPORTED_FOR_MESSAGE_FORMAT
    (with no records) when they cannot be converted (`where` names the partition in the log line)."""
    if fetch_version >= FIRST_RECORD_BATCH_FETCH or not data:
        return data, ErrorCode.NONE
    try:
        converted = ms.down_convert(data, fetch_magic(fetch_version), fetch_offset, max_bytes, max_inflated)
    except CorruptBatch as exc:
        _say.log(
            logging.WARNING, "down-conversion", "fetch v%d %s: cannot convert: %s", fetch_version, where, exc
        )
        return b"", ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    return converted, ErrorCode.NONE
