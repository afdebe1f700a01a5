"""The data-plane APIs on the wire: one decoder per request and one encoder per response, so the broker reads
and writes only `zkcoord.server.messages` values; version differences are settled here.
"""

from __future__ import annotations

import uuid

from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsResponse
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from zkcoord.server import messages as dm
from zkcoord.server.kafka_protocol.common import bitfield
from zkcoord.server.kafka_protocol.frames import RequestFrame, encode


def metadata_request(req: RequestFrame) -> dm.MetadataRequest:
    b = req.body
    v = req.api_version
    names: tuple[str, ...] | None = None
    ids: tuple[uuid.UUID, ...] = ()
    if b.topics is not None and not (v == 0 and not b.topics):  # v0 asks for every topic by an empty list
        names = tuple(t.name for t in b.topics if t.name is not None)
        if v >= 10:
            ids = tuple(t.topic_id for t in b.topics if t.name is None and t.topic_id is not None)
    return dm.MetadataRequest(
        v,
        names,
        v < 4 or bool(b.allow_auto_topic_creation),
        8 <= v <= 10 and bool(b.include_cluster_authorized_operations),
        v >= 8 and bool(b.include_topic_authorized_operations),
        ids,
    )


_ZERO_UUID = uuid.UUID(int=0)


def metadata_response(req: RequestFrame, r: dm.MetadataResponse) -> bytes:
    cls = MetadataResponse
    B, T = cls.MetadataResponseBroker, cls.MetadataResponseTopic
    P = T.MetadataResponsePartition
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        brokers=[B(node_id=b.node_id, host=b.host, port=b.port, rack=None) for b in r.brokers],
        cluster_id=r.cluster_id,
        controller_id=r.controller_id,
        topics=[
            T(
                error_code=t.error_code,
                name=t.name,
                topic_id=t.topic_id or _ZERO_UUID,
                is_internal=t.internal,
                authorized_operations=bitfield(t.authorized_operations),
                partitions=[
                    P(
                        error_code=p.error_code,
                        partition_index=p.index,
                        leader_id=p.leader,
                        leader_epoch=0,
                        replica_nodes=list(p.replicas),
                        isr_nodes=list(p.replicas),
                        offline_replicas=[],
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
        authorized_operations=bitfield(r.cluster_authorized_operations),
    )
    return encode(req, resp)


def find_coordinator_request(req: RequestFrame) -> dm.FindCoordinatorRequest:
    b = req.body
    v = req.api_version
    keys = tuple(b.coordinator_keys or ()) if v >= 4 else (b.key,)
    return dm.FindCoordinatorRequest(v, b.key_type if v >= 1 else 0, keys)


def find_coordinator_response(req: RequestFrame, r: dm.FindCoordinatorResponse) -> bytes:
    cls = FindCoordinatorResponse
    if req.api_version >= 4:
        C = cls.Coordinator
        resp = cls(
            version=req.api_version,
            throttle_time_ms=0,
            coordinators=[
                C(
                    key=c.key,
                    node_id=c.node_id,
                    host=c.host,
                    port=c.port,
                    error_code=c.error_code,
                    error_message=c.error_message,
                )
                for c in r.coordinators
            ],
        )
    else:
        c = r.coordinators[0]
        resp = cls(
            version=req.api_version,
            throttle_time_ms=0,
            error_code=c.error_code,
            error_message=c.error_message,
            node_id=c.node_id,
            host=c.host,
            port=c.port,
        )
    return encode(req, resp)


def create_topics_request(req: RequestFrame) -> dm.CreateTopicsRequest:
    b = req.body
    v = req.api_version
    topics = tuple(
        dm.CreatableTopic(
            t.name,
            t.num_partitions,
            t.replication_factor,
            len(t.assignments or ()),
            tuple((c.name, c.value) for c in (t.configs or ())),
        )
        for t in b.topics
    )
    return dm.CreateTopicsRequest(v, topics, bool(b.validate_only) if v >= 1 else False)


def create_topics_response(req: RequestFrame, r: dm.CreateTopicsResponse) -> bytes:
    cls = CreateTopicsResponse
    R = cls.CreatableTopicResult
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        topics=[
            R(
                name=t.name,
                error_code=t.error_code,
                error_message=t.error_message,
                num_partitions=t.num_partitions if t.error_code == 0 else -1,
                replication_factor=1 if t.error_code == 0 else -1,
                configs=[],
                topic_config_error_code=t.topic_config_error_code,
                topic_id=t.topic_id or _ZERO_UUID,
            )
            for t in r.topics
        ],
    )
    return encode(req, resp)


def delete_topics_request(req: RequestFrame) -> dm.DeleteTopicsRequest:
    b = req.body
    return dm.DeleteTopicsRequest(req.api_version, tuple(b.topic_names or ()), int(b.timeout_ms))


def delete_topics_response(req: RequestFrame, r: dm.DeleteTopicsResponse) -> bytes:
    cls = DeleteTopicsResponse
    R = cls.DeletableTopicResult
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        responses=[R(name=t.name, error_code=t.error_code, error_message=t.error_message) for t in r.topics],
    )
    return encode(req, resp)


def produce_request(req: RequestFrame) -> dm.ProduceRequest:
    b = req.body
    topics = tuple(
        dm.ProduceTopic(t.name, tuple(dm.ProducePartition(p.index, p.records) for p in t.partition_data))
        for t in b.topic_data
    )
    return dm.ProduceRequest(req.api_version, b.acks, topics)


def produce_response(req: RequestFrame, r: dm.ProduceResponse) -> bytes:
    cls = ProduceResponse
    T = cls.TopicProduceResponse
    P = T.PartitionProduceResponse
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        responses=[
            T(
                name=t.name,
                partition_responses=[
                    P(
                        index=p.index,
                        error_code=p.error_code,
                        base_offset=p.base_offset,
                        log_append_time_ms=-1,
                        log_start_offset=p.log_start_offset,
                        record_errors=[],
                        error_message=p.error_message,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
    return encode(req, resp)


def list_offsets_request(req: RequestFrame) -> dm.ListOffsetsRequest:
    topics = tuple(
        dm.ListOffsetsTopic(
            t.name, tuple(dm.ListOffsetsPartition(p.partition_index, p.timestamp) for p in t.partitions)
        )
        for t in req.body.topics
    )
    return dm.ListOffsetsRequest(req.api_version, topics)


def list_offsets_response(req: RequestFrame, r: dm.ListOffsetsResponse) -> bytes:
    cls = ListOffsetsResponse
    T = cls.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    v0 = req.api_version == 0
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        topics=[
            T(
                name=t.name,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        old_style_offsets=[p.offset] if v0 and p.offset >= 0 else [],
                        timestamp=p.timestamp,
                        offset=p.offset,
                        leader_epoch=-1 if p.offset < 0 else 0,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
    return encode(req, resp)


def fetch_request(req: RequestFrame) -> dm.FetchRequest:
    b = req.body
    v = req.api_version
    topics = tuple(
        dm.FetchTopic(
            t.topic,
            tuple(
                dm.FetchPartition(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions
            ),
        )
        for t in b.topics
    )
    return dm.FetchRequest(
        v, b.max_wait_ms, b.min_bytes, b.max_bytes if v >= 3 else 2**31 - 1, topics, b.replica_id
    )


def fetch_response(req: RequestFrame, r: dm.FetchResponse) -> bytes:
    cls = FetchResponse
    T = cls.FetchableTopicResponse
    P = T.PartitionData
    resp = cls(
        version=req.api_version,
        throttle_time_ms=0,
        error_code=r.error_code,
        session_id=0,
        responses=[
            T(
                topic=t.topic,
                partitions=[
                    P(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.high_watermark,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=p.records,
                    )
                    for p in t.partitions
                ],
            )
            for t in r.topics
        ],
    )
    return encode(req, resp)


def init_producer_id_request(req: RequestFrame) -> dm.InitProducerIdRequest:
    return dm.InitProducerIdRequest(req.api_version, req.body.transactional_id)


def init_producer_id_response(req: RequestFrame, r: dm.InitProducerIdResponse) -> bytes:
    resp = InitProducerIdResponse(
        version=req.api_version,
        throttle_time_ms=0,
        error_code=r.error_code,
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
    )
    return encode(req, resp)
