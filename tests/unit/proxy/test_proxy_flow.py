"""A Link's flow control toward a broker that stops reading: what the proxy buffers stays bounded."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from typing import Any

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.protocol.producer import ProduceRequest, TxnOffsetCommitRequest, TxnOffsetCommitResponse

from zkcoord.group import consumer_messages as gcm
from zkcoord.proxy import forward
from zkcoord.server import kafka_protocol as kp


def produce_frame(acks: int, correlation_id: int) -> bytes:
    """A Produce v3 request with a ~30 KB client id, framed (size prefix included)."""
    req = ProduceRequest(version=3, transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[])
    req.with_header(correlation_id=correlation_id, client_id="c" * 30_000)
    return bytes(req.encode(header=True, framed=True))


def test_fire_and_forget_produce_waits_for_a_stalled_broker() -> None:
    """acks=0 frames get no answer, so only flow control bounds them: with the broker not reading, the Link
    stops reading the client once the socket toward the broker holds more than HIGH_WATER unsent bytes, and what
    it buffered stays under HIGH_WATER plus one receive buffer (without flow control every frame the client sent
    would pile up in the proxy's memory)."""
    frame = produce_frame(acks=0, correlation_id=1)
    frames = (64 << 20) // len(frame)  # 64 MiB: more than the kernel's loopback buffers hold
    asyncio.run(_stalled_broker(frame, frames))


async def _stalled_broker(frame: bytes, frames: int) -> None:
    received = bytearray()
    got_all = asyncio.Event()
    broker_conn: list[asyncio.StreamReader] = []
    broker_tx: list[asyncio.Transport] = []

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.pause_reading()  # type: ignore[attr-defined]
        broker_tx.append(writer.transport)  # type: ignore[arg-type]
        broker_conn.append(reader)
        await got_all.wait()
        writer.close()

    upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    links: set[asyncio.Task[None]] = set()
    made: list[forward.Link] = []

    stopped = asyncio.Event()  # the Link stopped reading the client because the broker's socket is full

    def make_link(transport: asyncio.Transport) -> forward.Link:
        link = forward.Link(("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, None, 1 << 20, 100)
        hold = link.client.hold

        def watched_hold(reason: str) -> None:
            hold(reason)
            if reason == "peer":
                stopped.set()

        link.client.hold = watched_hold  # type: ignore[method-assign]
        made.append(link)
        return link

    proxy = await forward.listen("127.0.0.1", 0, make_link, links)
    proxy_port = proxy.sockets[0].getsockname()[1]
    try:
        _, client = await asyncio.open_connection("127.0.0.1", proxy_port)
        for _ in range(frames):
            client.write(frame)  # the client's transport buffers what the proxy does not take
        async with asyncio.timeout(60):
            await stopped.wait()
        (link,) = made
        assert link.broker is not None and link.broker.transport is not None
        # Nothing is written toward the broker while the client is not read: this is the most the proxy held.
        unsent = link.broker.transport.get_write_buffer_size()
        assert "peer" in link.client.holds
        assert forward.HIGH_WATER < unsent <= forward.HIGH_WATER + forward.CHUNK, unsent
        assert client.transport.get_write_buffer_size() > 0  # the rest waits in the client, not the proxy
        # The broker reads again: every frame arrives, byte for byte, in order.
        broker_tx[0].resume_reading()
        want = len(frame) * frames
        async with asyncio.timeout(120):
            while len(received) < want:
                received += await broker_conn[0].read(1 << 20)
        assert received == frame * frames
        got_all.set()
        client.close()
    finally:
        got_all.set()
        for server in (proxy, upstream):
            server.close()
        for task in list(links):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)


class _Mixed:
    """The proxy's coordinator as a Link sees it: it coordinates the group "mixed" and answers each consumer-
    protocol request with GROUP_MAX_SIZE_REACHED (a marker: the real answers come from the group service)."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int]] = []  # (api key, correlation id) of the requests it answered

    def coordinates(self, group_id: str) -> bool:
        return group_id == "mixed"

    def answer(self, req: Any) -> bytes | None:
        self.asked.append((req.api_key, req.correlation_id))
        if req.api_key == kp.CONSUMER_GROUP_HEARTBEAT:
            return kp.error_response(req, kp.ErrorCode.GROUP_MAX_SIZE_REACHED)
        marked = (
            gcm.DescribedConsumerGroup(kp.ErrorCode.GROUP_MAX_SIZE_REACHED, g) for g in req.body.group_ids
        )
        return kp.consumer_group_response(req, gcm.ConsumerGroupDescribeResponse(tuple(marked)))

    def coordinators(self) -> list[tuple[int, str, int]]:
        return []


def heartbeat(corr: int, group: str) -> bytes:
    value = gcm.ConsumerGroupHeartbeatRequest(
        api_version=0, group_id=group, member_id="m", member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=("t",), topic_partitions=(),
    )  # fmt: skip
    return kp.encode_consumer_group_request(corr, "c", value)


def describe(corr: int, *groups: str) -> bytes:
    return kp.encode_consumer_group_request(corr, "c", gcm.ConsumerGroupDescribeRequest(0, groups))


@contextlib.asynccontextmanager
async def _proxy_in_front_of_a_recorder(
    local: _Mixed | None = None,
) -> AsyncIterator[tuple[asyncio.Queue[bytes], asyncio.StreamReader, asyncio.StreamWriter]]:
    """A broker that records every frame it receives, the proxy (coordinating the group "mixed") in front of it,
    and a client connection to the proxy: (frames the broker got, the client's reader, its writer)."""
    upstream_got: asyncio.Queue[bytes] = asyncio.Queue()

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                upstream_got.put_nowait(await reader.readexactly(size))

    upstream = await asyncio.start_server(broker, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    links: set[asyncio.Task[None]] = set()
    proxy = await forward.listen(
        "127.0.0.1",
        0,
        lambda t: forward.Link(
            ("127.0.0.1", up_port), lambda n, h, p: (h, p), {}, local or _Mixed(), 1 << 20
        ),
        links,
    )
    try:
        reader, client = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
        yield upstream_got, reader, client
    finally:
        for server in (proxy, upstream):
            server.close()


def test_consumer_protocol_requests_are_routed_by_group() -> None:
    """ConsumerGroupHeartbeat/Describe naming a group the proxy coordinates go to its coordinator (a Describe
    naming other groups too as well: the node answers those NOT_COORDINATOR), never to the broker; a Describe of
    other groups is forwarded; a heartbeat of another group, on a connection whose broker did not list the API
    (no ApiVersions seen: Tansu's case), is answered UNSUPPORTED_VERSION by the proxy, where the broker would
    close the connection."""
    asyncio.run(_routed())


async def _routed() -> None:
    local = _Mixed()
    async with _proxy_in_front_of_a_recorder(local) as (upstream_got, reader, client):
        client.write(
            heartbeat(1, "mixed")
            + describe(2, "mixed", "other")
            + heartbeat(3, "other")
            + describe(4, "other")
        )
        async with asyncio.timeout(30):
            answers = []
            for key in (kp.CONSUMER_GROUP_HEARTBEAT, kp.CONSUMER_GROUP_DESCRIBE, kp.CONSUMER_GROUP_HEARTBEAT):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answers.append(kp.decode_consumer_group_response(key, 0, await reader.readexactly(size)))
            forwarded = await upstream_got.get()
        (corr1, hb), (corr2, desc), (corr3, other) = answers
        assert local.asked == [(kp.CONSUMER_GROUP_HEARTBEAT, 1), (kp.CONSUMER_GROUP_DESCRIBE, 2)]
        assert (corr1, hb.error_code) == (1, kp.ErrorCode.GROUP_MAX_SIZE_REACHED)
        assert corr2 == 2 and all(g.error_code == kp.ErrorCode.GROUP_MAX_SIZE_REACHED for g in desc.groups)
        assert (corr3, other.error_code) == (3, kp.UNSUPPORTED_VERSION)
        assert "other" in other.error_message and "group.protocol=classic" in other.error_message
        assert kp.peek_header(forwarded) == (kp.CONSUMER_GROUP_DESCRIBE, 0, 4)  # the only one the broker saw
        assert upstream_got.empty()
        client.close()


def test_txn_offset_commit_and_offset_delete_for_a_proxy_group_are_refused_not_forwarded() -> None:
    """TxnOffsetCommit/OffsetDelete naming a group the proxy coordinates would write the cluster's offsets of a
    group it does not coordinate there: the proxy answers UNSUPPORTED_VERSION per partition instead; the same
    requests for another group still reach the broker."""
    asyncio.run(_offset_writes_refused())


def txn_commit(corr: int, group: str) -> bytes:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    req = TxnOffsetCommitRequest(version=3, transactional_id="tx", group_id=group, producer_id=1, producer_epoch=0,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                          committed_metadata="")])])  # fmt: skip
    req.with_header(correlation_id=corr, client_id="c")
    return bytes(req.encode(header=True, framed=True))


def offset_delete(corr: int, group: str) -> bytes:
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    req = OffsetDeleteRequest(version=0, group_id=group,
                              topics=[T(name="t", partitions=[T.OffsetDeleteRequestPartition(partition_index=1)])])  # fmt: skip
    req.with_header(correlation_id=corr, client_id="c")
    return bytes(req.encode(header=True, framed=True))


async def _offset_writes_refused() -> None:
    async with _proxy_in_front_of_a_recorder() as (upstream_got, reader, client):
        client.write(
            txn_commit(1, "mixed")
            + offset_delete(2, "mixed")
            + txn_commit(3, "other")
            + offset_delete(4, "other")
        )
        async with asyncio.timeout(30):
            frames = []
            for _ in range(2):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frames.append(await reader.readexactly(size))
            forwarded = [await upstream_got.get() for _ in range(2)]
        txn = TxnOffsetCommitResponse.decode(frames[0], version=3, header=True)
        deleted = OffsetDeleteResponse.decode(frames[1], version=0, header=True)
        assert txn.header.correlation_id == 1
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in txn.topics] == [
            ("t", [(0, kp.UNSUPPORTED_VERSION)])]  # fmt: skip
        assert (deleted.header.correlation_id, deleted.error_code) == (2, kp.UNSUPPORTED_VERSION)
        assert [[p.partition_index for p in t.partitions] for t in deleted.topics] == [[1]]
        assert [kp.peek_header(f) for f in forwarded] == [
            (kp.TXN_OFFSET_COMMIT, 3, 3),
            (kp.OFFSET_DELETE, 0, 4),
        ]
        client.close()
