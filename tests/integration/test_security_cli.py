"""`zkcoord security add-acl` against real ZooKeeper: each resource type it can grant, the TransactionalId one
included, lands in Kafka's `/kafka-acl/<Type>/<name>` JSON with a change notice for Kafka brokers; an operation the
resource type does not have is refused before anything is written, as kafka-acls.sh refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zkcoord.cli import main

pytestmark = pytest.mark.integration


def test_add_acl_grants_a_transactional_id(zk: Any, zk_connect: str, capsys: Any) -> None:
    argv = ["security", "add-acl", "--zk", zk_connect, "--allow-principal", "User:app", "--operation", "Write",
            "--operation", "Describe", "--transactional-id", "payments-tx"]  # fmt: skip
    assert main(argv) == 0
    assert "/kafka-acl/TransactionalId/payments-tx: 2 ACLs" in capsys.readouterr().out
    stored = json.loads(zk.get("/kafka-acl/TransactionalId/payments-tx")[0])
    assert stored["version"] == 1
    assert sorted(stored["acls"], key=lambda a: a["operation"]) == [
        {"principal": "User:app", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:app", "permissionType": "Allow", "operation": "Write", "host": "*"},
    ]
    notices = [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")]
    assert notices == [b"TransactionalId:payments-tx"]  # Kafka's change notice: brokers reload that resource


def test_add_acl_refuses_an_operation_the_resource_type_does_not_have(
    zk: Any, zk_connect: str, capsys: Any
) -> None:
    argv = ["security", "add-acl", "--zk", zk_connect, "--allow-principal", "User:app", "--operation", "Read",
            "--transactional-id", "payments-tx"]  # fmt: skip
    assert main(argv) == 2
    assert "ResourceType TransactionalId only supports operations Write,Describe,All, not Read" in (
        capsys.readouterr().err
    )
    assert zk.exists("/kafka-acl/TransactionalId/payments-tx") is None
