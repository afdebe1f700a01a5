"""Decoding a whole log of `__consumer_offsets` records fast (a coordinator's load): struct fast paths for the
shapes zkcoord writes, each equal to `offsets.decode_record`, which decodes every other record and raises its
precise errors.

An offset key is `version | group | topic | partition`: the bytes before the partition are decoded once per
(group, topic) and remembered, so a group's hundred partitions cost one string decode. An offset value of
version 3 with empty metadata (what a commit without metadata writes) is one struct unpack.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator

from zkcoord.records.offsets import (
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    decode_key,
    decode_record,
)

_V3_EMPTY_METADATA = struct.Struct(
    ">hqihq"
)  # version 3, offset, leader_epoch, metadata length 0, commit timestamp
_PARTITION = struct.Struct(">i")
_MAX_PREFIXES = 1 << 20  # bounds the memory of the (group, topic) cache on a hostile log
_new = tuple.__new__  # a NamedTuple without its keyword-handling constructor: half the cost


class BulkDecoder:
    """`decode_record` for many records in a row; remembers decoded (group, topic) key prefixes."""

    def __init__(self) -> None:
        self._prefixes: dict[bytes, tuple[str, str]] = {}
        self.decoded = 0  # records decoded by `records`

    def key(self, data: bytes) -> RecordKey:
        # An offset key (version 0 or 1) is at least 2 + 2 + 2 + 4 bytes.
        if len(data) >= 10 and data[0] == 0 and data[1] <= 1:
            names = self._prefixes.get(data[:-4])
            if names is not None:
                return _new(OffsetCommitKey, (*names, _PARTITION.unpack_from(data, len(data) - 4)[0]))
            key = decode_key(data)  # validates the whole key, or raises
            if isinstance(key, OffsetCommitKey) and len(self._prefixes) < _MAX_PREFIXES:
                # Any key of this length with these leading bytes decodes to this group and topic.
                self._prefixes[data[:-4]] = (key.group, key.topic)
            return key
        return decode_key(data)

    def check(self, key: bytes, value: bytes | None) -> None:
        """Raise what `decode_record` raises for this record, else nothing: a record of the fast-path shape whose
        (group, topic) prefix was already decoded is accepted without building any object (a store's validation
        pass over a load that `records`/`offsets_into` decodes afterwards)."""
        n = len(key)
        if (
            n >= 10
            and key[0] == 0
            and key[1] <= 1
            and key[:-4] in self._prefixes
            and (
                value is None
                or (
                    len(value) == 24 and value[1] == 3 and value[0] == 0 and value[14] == 0 and value[15] == 0
                )
            )
        ):
            return
        self.record(key, value)

    def record(self, key: bytes, value: bytes | None) -> Record:
        k = self.key(key)
        if value is None:
            return k, None
        if (
            type(k) is OffsetCommitKey
            and len(value) == 24
            and value[0] == 0
            and value[1] == 3
            and value[14] == 0
            and value[15] == 0
        ):
            _, offset, leader_epoch, _, commit_timestamp = _V3_EMPTY_METADATA.unpack(value)
            return k, _new(OffsetCommitValue, (offset, leader_epoch, "", commit_timestamp, -1))
        return decode_record(key, value)

    def records(self, raw: Iterable[tuple[bytes, bytes | None]]) -> Iterator[Record]:
        """`record` over `raw`, with its common path inlined (a load runs this loop once per record)."""
        prefixes = self._prefixes
        partition_at = _PARTITION.unpack_from
        unpack_value = _V3_EMPTY_METADATA.unpack
        new = _new
        key_cls = OffsetCommitKey
        value_cls = OffsetCommitValue
        record = self.record
        count = 0
        try:
            for count, (key, value) in enumerate(raw, 1):  # noqa: B007 (count is read in `finally`)
                n = len(key)
                names = prefixes.get(key[:-4]) if n >= 10 and key[0] == 0 and key[1] <= 1 else None
                if (
                    names is not None
                    and value is not None
                    and len(value) == 24
                    and value[1] == 3
                    and value[0] == 0
                    and value[14] == 0
                    and value[15] == 0
                ):
                    _, offset, leader_epoch, _, commit_timestamp = unpack_value(value)
                    yield (
                        new(key_cls, (*names, partition_at(key, n - 4)[0])),
                        new(value_cls, (offset, leader_epoch, "", commit_timestamp, -1)),
                    )
                else:
                    yield record(key, value)
        finally:
            self.decoded += count

    def offsets_into(
        self,
        raw: Iterable[tuple[bytes, bytes | None]],
        offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]],
        other: Callable[[Record], object],
    ) -> int:
        """Replay `raw` in order with no record object for the common case: an offset commit of the fast-path
        shape is stored straight into `offsets` (group -> (topic, partition) -> value, as `replay` stores it);
        every other record is decoded and handed to `other` (which must be `replay` into the same view).
        Returns the number of records."""
        prefixes = self._prefixes
        partition_at = _PARTITION.unpack_from
        unpack_value = _V3_EMPTY_METADATA.unpack
        new = _new
        value_cls = OffsetCommitValue
        record = self.record
        count = 0
        for count, (key, value) in enumerate(raw, 1):  # noqa: B007 (count is returned)
            n = len(key)
            names = prefixes.get(key[:-4]) if n >= 10 and key[0] == 0 and key[1] <= 1 else None
            if (
                names is not None
                and value is not None
                and len(value) == 24
                and value[1] == 3
                and value[0] == 0
                and value[14] == 0
                and value[15] == 0
            ):
                _, offset, leader_epoch, _, commit_timestamp = unpack_value(value)
                group, topic = names
                stored = offsets.get(group)
                if stored is None:
                    stored = offsets[group] = {}
                stored[(topic, partition_at(key, n - 4)[0])] = new(
                    value_cls, (offset, leader_epoch, "", commit_timestamp, -1)
                )
            else:
                other(record(key, value))
        self.decoded += count
        return count
