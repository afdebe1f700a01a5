"""BrokerOffsetStore over a fake admin client: per-partition errors mapped to StoreErrors by Kafka name,
request-level failures copied to every partition, -1 offsets treated as none."""

from __future__ import annotations

from typing import Any

import kafka.errors as Errors
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTP

from zkcoord.bridge import Store, TopicPartition
from zkcoord.bridge.broker_store import BrokerOffsetStore


class FakeAdmin:
    def __init__(self) -> None:
        self.committed: dict[KTP, OffsetAndMetadata] = {}
        self.fail: Exception | None = None
        self.reject: dict[KTP, Any] = {}
        self.closed = False

    def alter_group_offsets(self, group: str, offsets: dict[KTP, OffsetAndMetadata]) -> dict[KTP, Any]:
        if self.fail:
            raise self.fail
        out: dict[KTP, Any] = {}
        for tp, meta in offsets.items():
            if tp in self.reject:
                out[tp] = self.reject[tp]
            else:
                self.committed[tp] = meta
                out[tp] = Errors.NoError
        return out

    def list_group_offsets(self, specs: dict[str, Any]) -> dict[str, dict[KTP, OffsetAndMetadata]]:
        if self.fail:
            raise self.fail
        ((group, wanted),) = specs.items()
        found = dict(self.committed)
        if wanted is not None:
            found = {tp: found.get(tp, OffsetAndMetadata(-1, "", -1)) for tp in wanted}
        return {group: found}

    def describe_groups(self, groups: list[str]) -> dict[str, Any]:
        return {
            groups[0]: {
                "group_state": "Stable",
                "protocol_type": "consumer",
                "protocol_data": "range",
                "members": [
                    {"member_id": "b", "client_id": "c", "client_host": "/127.0.0.1"},
                    {"member_id": "a"},
                ],
            }
        }

    def close(self) -> None:
        self.closed = True


def test_commit_and_fetch_through_the_admin_api() -> None:
    admin = FakeAdmin()
    admin.reject[KTP("t", 1)] = Errors.for_code(16)
    store = BrokerOffsetStore("127.0.0.1:1", "g", admin=admin)
    reply = store.write_offsets({TopicPartition("t", 0): 5, ("t", 1): 6})
    errors = dict(reply.errors)
    assert errors[TopicPartition("t", 0)] is None
    bad = errors[TopicPartition("t", 1)]
    assert bad is not None and bad.error == "NOT_COORDINATOR" and bad.retriable and bad.store is Store.BROKER
    assert admin.committed[KTP("t", 0)].offset == 5
    read = store.read_offsets([("t", 0), ("t", 1)])
    assert dict(read.offsets) == {TopicPartition("t", 0): 5}  # -1 = none committed
    assert dict(store.read_offsets().offsets) == {TopicPartition("t", 0): 5}


def test_request_failure_becomes_an_error_on_every_partition() -> None:
    admin = FakeAdmin()
    admin.fail = Errors.KafkaTimeoutError("Unable to bootstrap")
    store = BrokerOffsetStore("127.0.0.1:1", "g", admin=admin)
    reply = store.write_offsets({("t", 0): 1, ("t", 1): 2})
    assert {e.error for _, e in reply.errors if e} == {"KafkaTimeoutError"}
    assert all(e is not None and e.retriable for _, e in reply.errors)
    read = store.read_offsets()
    assert read.request_error is not None and "Unable to bootstrap" in read.request_error.message


def test_describe_members_sorted_and_admin_shared_between_groups() -> None:
    made: list[FakeAdmin] = []

    def factory(bootstrap: str, req: int, boot: int) -> FakeAdmin:
        made.append(FakeAdmin())
        return made[-1]

    store = BrokerOffsetStore("127.0.0.1:1", "g", admin_factory=factory)
    info = store.describe()
    assert info["state"] == "Stable" and [m["member_id"] for m in info["members"]] == ["a", "b"]
    other = store.for_group("h")
    assert other.admin is store.admin and len(made) == 1
    other.close()
    assert not made[0].closed  # the shared admin belongs to the first store
    store.close()
    assert made[0].closed
