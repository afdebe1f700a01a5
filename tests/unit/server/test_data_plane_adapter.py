"""The data-plane half of the adapter: responses encoded from `zkcoord.server.messages` values are byte-identical
to kafka-python's own encoding of the same content, at every version the server accepts, and requests decode
into those values with each version's defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from zkcoord.group.errors import ErrorCode as E
from zkcoord.server import kafka_protocol as kp
from zkcoord.server import messages as dm

CORRELATION_ID = 0x0102_0304


def _versions(api_key: int) -> list[int]:
    return sorted(v for k, v in kp._CODECS if k == api_key)


def _frame(api_key: int, version: int) -> kp.RequestFrame:
    # The encoders read only the header fields; the body is the decoders' business.
    return kp.RequestFrame(
        api_key, version, CORRELATION_ID, "c", None, kp._CODECS[(api_key, version)].flexible
    )


def _reference(obj: Any) -> bytes:
    """kafka-python's own framing and encoding of a response object (header included)."""
    obj.with_header(correlation_id=CORRELATION_ID)
    return bytes(obj.encode(header=True, framed=True))


# -- one (zkcoord value, kafka-python object) pair of the same content per API ----------------------------------


def _metadata(v: int) -> tuple[dm.MetadataResponse, Any]:
    brokers = ((1, "127.0.0.1", 9092), (2, "localhost", 9093))
    topics = (
        ("t", 0, False, ((0, 1, (1,), 0), (1, -1, (-1,), 5))),
        ("__consumer_offsets", 0, True, ((0, 2, (2,), 0),)),
        ("bad", 17, False, ()),
    )
    ours = dm.MetadataResponse(
        tuple(dm.BrokerEndpoint(n, h, p) for n, h, p in brokers),
        "cluster-a",
        2,
        tuple(
            dm.TopicMeta(name, e, tuple(dm.PartitionMeta(i, ld, r, pe) for i, ld, r, pe in parts), internal)
            for name, e, internal, parts in topics
        ),
    )
    B, T = MetadataResponse.MetadataResponseBroker, MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    theirs = MetadataResponse(
        version=v,
        throttle_time_ms=0,
        brokers=[B(node_id=n, host=h, port=p, rack=None) for n, h, p in brokers],
        cluster_id="cluster-a",
        controller_id=2,
        topics=[
            T(
                error_code=e,
                name=name,
                is_internal=internal,
                partitions=[
                    P(
                        error_code=pe,
                        partition_index=i,
                        leader_id=ld,
                        leader_epoch=0,
                        replica_nodes=list(r),
                        isr_nodes=list(r),
                        offline_replicas=[],
                    )
                    for i, ld, r, pe in parts
                ],
            )
            for name, e, internal, parts in topics
        ],
    )
    return ours, theirs


def _find_coordinator(v: int) -> tuple[dm.FindCoordinatorResponse, Any]:
    rows = [("g1", 0, None, 3, "127.0.0.1", 9094), ("g2", 15, "COORDINATOR_NOT_AVAILABLE", -1, "", -1)]
    if v < 4:
        rows = rows[:1]
    ours = dm.FindCoordinatorResponse(tuple(dm.Coordinator(*row) for row in rows))
    if v >= 4:
        C = FindCoordinatorResponse.Coordinator
        theirs = FindCoordinatorResponse(
            version=v,
            throttle_time_ms=0,
            coordinators=[
                C(key=k, node_id=n, host=h, port=p, error_code=e, error_message=m)
                for k, e, m, n, h, p in rows
            ],
        )
    else:
        _k, e, m, n, h, p = rows[0]
        theirs = FindCoordinatorResponse(
            version=v, throttle_time_ms=0, error_code=e, error_message=m, node_id=n, host=h, port=p
        )
    return ours, theirs


def _create_topics(v: int) -> tuple[dm.CreateTopicsResponse, Any]:
    rows = [("t", 0, None, 3), ("t2", 36, "Topic 't2' already exists.", 1), ("bad!", 17, "illegal", 2)]
    ours = dm.CreateTopicsResponse(tuple(dm.CreatableTopicResult(*row) for row in rows))
    R = CreateTopicsResponse.CreatableTopicResult
    theirs = CreateTopicsResponse(
        version=v,
        throttle_time_ms=0,
        topics=[
            R(
                name=n,
                error_code=e,
                error_message=m,
                num_partitions=np if e == 0 else -1,  # Kafka reports the partitions of created topics only
                replication_factor=1 if e == 0 else -1,
                configs=[],
            )
            for n, e, m, np in rows
        ],
    )
    return ours, theirs


def _produce(v: int) -> tuple[dm.ProduceResponse, Any]:
    topics = [("t", [(0, 0, 41, 0, None), (1, 6, -1, -1, None)]), ("u", [(0, 2, -1, 5, "no records")])]
    ours = dm.ProduceResponse(
        tuple(dm.ProduceTopicResult(n, tuple(dm.ProducePartitionResult(*p) for p in ps)) for n, ps in topics)
    )
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    theirs = ProduceResponse(
        version=v,
        throttle_time_ms=0,
        responses=[
            T(
                name=n,
                partition_responses=[
                    P(
                        index=i,
                        error_code=e,
                        base_offset=b,
                        log_append_time_ms=-1,
                        log_start_offset=s,
                        record_errors=[],
                        error_message=m,
                    )
                    for i, e, b, s, m in ps
                ],
            )
            for n, ps in topics
        ],
    )
    return ours, theirs


def _list_offsets(v: int) -> tuple[dm.ListOffsetsResponse, Any]:
    topics = [("t", [(0, 0, -1, 17), (1, 0, 1700000000000, 4)]), ("u", [(0, 3, -1, -1)])]
    ours = dm.ListOffsetsResponse(
        tuple(
            dm.ListOffsetsTopicResult(n, tuple(dm.ListOffsetsPartitionResult(*p) for p in ps))
            for n, ps in topics
        )
    )
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    theirs = ListOffsetsResponse(
        version=v,
        throttle_time_ms=0,
        topics=[
            T(
                name=n,
                partitions=[
                    P(
                        partition_index=i,
                        error_code=e,
                        old_style_offsets=[o] if v == 0 and o >= 0 else [],  # v0: a list of offsets
                        timestamp=ts,
                        offset=o,
                        leader_epoch=-1 if o < 0 else 0,
                    )
                    for i, e, ts, o in ps
                ],
            )
            for n, ps in topics
        ],
    )
    return ours, theirs


def _fetch(v: int) -> tuple[dm.FetchResponse, Any]:
    topics = [("t", [(0, 0, 12, 0, b"\x00batch-bytes\x01"), (1, 1, 9, 2, b"")]), ("u", [(0, 6, -1, -1, b"")])]
    ours = dm.FetchResponse(
        0, tuple(dm.FetchTopicResult(n, tuple(dm.FetchPartitionResult(*p) for p in ps)) for n, ps in topics)
    )
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    theirs = FetchResponse(
        version=v,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            T(
                topic=n,
                partitions=[
                    P(
                        partition_index=i,
                        error_code=e,
                        high_watermark=hw,
                        last_stable_offset=hw,  # no transactions: everything below the high watermark is stable
                        log_start_offset=ls,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=recs,
                    )
                    for i, e, hw, ls, recs in ps
                ],
            )
            for n, ps in topics
        ],
    )
    return ours, theirs


def _init_producer_id(v: int) -> tuple[dm.InitProducerIdResponse, Any]:
    ours = dm.InitProducerIdResponse(0, 4242, 0)
    theirs = InitProducerIdResponse(
        version=v, throttle_time_ms=0, error_code=0, producer_id=4242, producer_epoch=0
    )
    return ours, theirs


CASES: dict[int, tuple[Callable[[int], tuple[Any, Any]], Callable[[kp.RequestFrame, Any], bytes]]] = {
    kp.METADATA: (_metadata, kp.metadata_response),
    kp.FIND_COORDINATOR: (_find_coordinator, kp.find_coordinator_response),
    kp.CREATE_TOPICS: (_create_topics, kp.create_topics_response),
    kp.PRODUCE: (_produce, kp.produce_response),
    kp.LIST_OFFSETS: (_list_offsets, kp.list_offsets_response),
    kp.FETCH: (_fetch, kp.fetch_response),
    kp.INIT_PRODUCER_ID: (_init_producer_id, kp.init_producer_id_response),
}


@pytest.mark.parametrize(
    ("api_key", "version"), [(k, v) for k in CASES for v in _versions(k)], ids=lambda x: str(x)
)
def test_data_plane_responses_are_byte_identical_to_kafka_python(api_key: int, version: int) -> None:
    build, encode = CASES[api_key]
    ours, theirs = build(version)
    assert encode(_frame(api_key, version), ours) == _reference(theirs)


@pytest.mark.parametrize("version", _versions(kp.API_VERSIONS))
@pytest.mark.parametrize("error", [E.NONE, E.INVALID_REQUEST])
def test_api_versions_response_is_byte_identical_to_kafka_python(version: int, error: E) -> None:
    A = ApiVersionsResponse.ApiVersion
    keys = [A(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(kp.ADVERTISED.items())]
    theirs = ApiVersionsResponse(version=version, error_code=error, api_keys=keys, throttle_time_ms=0)
    assert kp.api_versions_response(_frame(kp.API_VERSIONS, version), error) == _reference(theirs)


def test_fetch_below_v4_is_answered_with_a_top_level_error_and_no_topics() -> None:
    # The broker's answer to message-format v0/v1 fetches goes through the same encoder.
    for v in [v for v in _versions(kp.FETCH) if v < 4]:
        resp = dm.FetchResponse(E.UNSUPPORTED_FOR_MESSAGE_FORMAT, ())
        theirs = FetchResponse(version=v, throttle_time_ms=0, error_code=43, session_id=0, responses=[])
        assert kp.fetch_response(_frame(kp.FETCH, v), resp) == _reference(theirs)


# -- requests: kafka-python frames -> zkcoord values, with each version's defaults ------------------------------


def _decode(api_key: int, version: int, **fields: Any) -> kp.RequestFrame:
    return kp.decode_request(kp.encode_request(api_key, version, CORRELATION_ID, "c", **fields)[4:])


def test_metadata_request_reads_all_topics_and_auto_create_per_version() -> None:
    M = kp._CLASSES[kp.METADATA][0]
    for v in _versions(kp.METADATA):
        some = _decode(
            kp.METADATA, v, topics=[M.MetadataRequestTopic(name="a")], allow_auto_topic_creation=False
        )
        assert kp.metadata_request(some) == dm.MetadataRequest(v, ("a",), v < 4)
        empty = _decode(kp.METADATA, v, topics=[], allow_auto_topic_creation=True)
        assert kp.metadata_request(empty).topics == (None if v == 0 else ())
        if v >= 1:
            assert kp.metadata_request(_decode(kp.METADATA, v, topics=None)).topics is None


def test_find_coordinator_request_reads_one_key_or_a_batch() -> None:
    for v in _versions(kp.FIND_COORDINATOR):
        fields: dict[str, Any] = {"coordinator_keys": ["g1", "g2"]} if v >= 4 else {"key": "g1"}
        req = kp.find_coordinator_request(_decode(kp.FIND_COORDINATOR, v, key_type=1, **fields))
        assert req == dm.FindCoordinatorRequest(v, 1 if v >= 1 else 0, ("g1", "g2") if v >= 4 else ("g1",))


def test_create_topics_request_counts_manual_assignments() -> None:
    C = kp._CLASSES[kp.CREATE_TOPICS][0].CreatableTopic
    A = C.CreatableReplicaAssignment
    topics = [
        C(name="a", num_partitions=3, replication_factor=1, assignments=[], configs=[]),
        C(
            name="b",
            num_partitions=-1,
            replication_factor=-1,
            assignments=[A(partition_index=0, broker_ids=[1]), A(partition_index=1, broker_ids=[1])],
            configs=[],
        ),
    ]
    for v in _versions(kp.CREATE_TOPICS):
        req = kp.create_topics_request(
            _decode(kp.CREATE_TOPICS, v, topics=topics, timeout_ms=1000, validate_only=True)
        )
        assert req == dm.CreateTopicsRequest(
            v, (dm.CreatableTopic("a", 3, 1, 0), dm.CreatableTopic("b", -1, -1, 2)), v >= 1
        )


def test_produce_list_offsets_fetch_and_init_producer_id_requests() -> None:
    P = kp._CLASSES[kp.PRODUCE][0].TopicProduceData
    produce = _decode(
        kp.PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout_ms=100,
        topic_data=[P(name="t", partition_data=[P.PartitionProduceData(index=2, records=b"xyz")])],
    )
    assert kp.produce_request(produce) == dm.ProduceRequest(
        9, -1, (dm.ProduceTopic("t", (dm.ProducePartition(2, b"xyz"),)),)
    )
    L = kp._CLASSES[kp.LIST_OFFSETS][0].ListOffsetsTopic
    for v in _versions(kp.LIST_OFFSETS):
        lo = _decode(
            kp.LIST_OFFSETS,
            v,
            replica_id=-1,
            isolation_level=0,
            topics=[L(name="t", partitions=[L.ListOffsetsPartition(partition_index=1, timestamp=-2)])],
        )
        assert kp.list_offsets_request(lo) == dm.ListOffsetsRequest(
            v, (dm.ListOffsetsTopic("t", (dm.ListOffsetsPartition(1, -2),)),)
        )
    F = kp._CLASSES[kp.FETCH][0].FetchTopic
    part = F.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1024)
    for v in _versions(kp.FETCH):
        fetch = _decode(
            kp.FETCH,
            v,
            replica_id=-1,
            max_wait_ms=250,
            min_bytes=1,
            max_bytes=4096,
            topics=[F(topic="t", partitions=[part])],
        )
        assert kp.fetch_request(fetch) == dm.FetchRequest(
            v, 250, 1, 4096 if v >= 3 else 2**31 - 1, (dm.FetchTopic("t", (dm.FetchPartition(0, 5, 1024),)),)
        )
    for v in _versions(kp.INIT_PRODUCER_ID):
        init = _decode(kp.INIT_PRODUCER_ID, v, transactional_id="tx", transaction_timeout_ms=1000)
        assert kp.init_producer_id_request(init) == dm.InitProducerIdRequest(v, "tx")
