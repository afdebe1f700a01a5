"""zkcoord.records sits below the group coordinator: it loads nothing from it and shares its error class."""

from __future__ import annotations

import subprocess
import sys

from zkcoord.group import errors as group_errors
from zkcoord.records.errors import MalformedRecord


def test_records_import_nothing_from_group() -> None:
    # A fresh interpreter: this test process has long imported zkcoord.group through other tests.
    code = (
        "import sys, zkcoord.records.offsets, zkcoord.records.batch;"
        "print(sorted(m for m in sys.modules if m.startswith('zkcoord.group')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_group_errors_name_the_same_malformed_record_class() -> None:
    # `except MalformedRecord` written against either module must catch what the codecs raise.
    assert group_errors.MalformedRecord is MalformedRecord
