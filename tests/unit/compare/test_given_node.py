"""Plays on a given node (`compare run --bootstrap`): a registered listener of another security protocol than the
runner's clients would speak is refused naming both (what no registration names, or a match, passes); the
play's own topic names are read back as the scenario's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from migration.compare.runner import MemberProc, RunnerError, check_bootstrap_listener
from zkcoord.legacy.codecs import BrokerRegistration

SECURED = {
    1: BrokerRegistration(
        version=4,
        host=None,
        port=-1,
        endpoints=("CLIENTS://127.0.0.1:9093", "PLAINTEXT://127.0.0.1:9092"),
        listener_security_protocol_map=(("CLIENTS", "SASL_SSL"), ("PLAINTEXT", "PLAINTEXT")),
    )
}


def test_a_listener_of_another_protocol_is_refused_naming_both() -> None:
    with pytest.raises(RunnerError) as err:
        check_bootstrap_listener(SECURED, "127.0.0.1:9093", "PLAINTEXT", None)
    text = str(err.value)
    assert "broker 1's SASL_SSL listener" in text and "without --command-config they speak PLAINTEXT" in text
    with pytest.raises(
        RunnerError, match=re.escape("--command-config c.properties says security.protocol=SSL")
    ):
        check_bootstrap_listener(SECURED, "127.0.0.1:9093", "SSL", "c.properties")
    with pytest.raises(RunnerError, match="PLAINTEXT listener"):
        check_bootstrap_listener(SECURED, "127.0.0.1:9092", "SASL_SSL", "c.properties")


def test_a_matching_listener_or_an_unregistered_address_passes() -> None:
    check_bootstrap_listener(SECURED, "127.0.0.1:9093", "SASL_SSL", "c.properties")
    check_bootstrap_listener(SECURED, "127.0.0.1:9092", "PLAINTEXT", None)
    check_bootstrap_listener(SECURED, "10.0.0.7:9093", "PLAINTEXT", None)  # an alias: not judged here
    check_bootstrap_listener({}, "127.0.0.1:9093", "PLAINTEXT", None)


def test_a_members_rows_name_the_scenarios_topic(tmp_path: Path) -> None:
    """On a given node a play's Kafka topic is `<topic>-<run id>`; what its members write is read back in the
    scenario's names, so traces and reports compare plays topic by topic."""
    trace = tmp_path / "m0.jsonl"
    rows = [
        {"kind": "consume", "topic": "orders-demo-legacy-fast-r0-1", "partition": 0, "offset": 5},
        {"kind": "rebalance_start", "topic": None, "partition": None},
        {"kind": "consume", "topic": "elsewhere", "partition": 1, "offset": 2},
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "cons')  # a partial last line
    member = MemberProc("m0", cast(Any, None), trace, tmp_path / "m0.stderr", 0,
                        scenario_topic={"orders-demo-legacy-fast-r0-1": "orders"})  # fmt: skip
    assert [r["topic"] for r in member.read_new()] == ["orders", None, "elsewhere"]
    assert member.read_new() == []  # the partial line waits for its end
