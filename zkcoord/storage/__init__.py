"""Durable record logs for the group coordinator: the small `RecordStore` protocol and its file implementation."""

from zkcoord.storage.file_store import CorruptLog, FileRecordStore
from zkcoord.storage.store import MemoryRecordStore, RecordStore

__all__ = ["CorruptLog", "FileRecordStore", "MemoryRecordStore", "RecordStore"]
