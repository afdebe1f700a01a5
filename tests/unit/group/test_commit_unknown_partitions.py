"""The existence check of OffsetCommit (Kafka's KafkaApis, before the coordinator): which partitions it refuses,
what the coordinator is sent, and the merged answer, for any request and any view of the cluster's topics."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import ErrorCode
from zkcoord.group import messages as gm
from zkcoord.group.offsets import unknown_partitions, with_unknown_partitions, without_partitions

NAMES = ("a", "b", "c")
requests = st.builds(
    lambda topics: gm.OffsetCommitRequest(8, "g", -1, "", tuple(topics)),
    st.lists(
        st.builds(
            lambda name, parts: gm.OffsetCommitRequestTopic(
                name, tuple(gm.OffsetCommitRequestPartition(p, 10 + p) for p in parts)
            ),
            st.sampled_from(NAMES),
            st.lists(st.integers(-2, 6), max_size=5),
        ),
        max_size=4,
    ),
)
clusters = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 5))  # topic -> partition count


@settings(max_examples=300, deadline=None)
@given(requests, clusters, st.sampled_from([0, int(ErrorCode.ILLEGAL_GENERATION)]))
def test_refused_are_exactly_the_partitions_the_cluster_lacks_and_the_rest_is_the_coordinators(
    req: gm.OffsetCommitRequest, cluster: dict[str, int], coordinator_code: int
) -> None:
    unknown = unknown_partitions(req, cluster.get)
    asked = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    assert unknown == {(n, p) for n, p in asked if not 0 <= p < cluster.get(n, 0)}
    known = without_partitions(req, unknown)
    sent = [] if known is None else [(t.name, p.partition_index) for t in known.topics for p in t.partitions]
    assert sent == [tp for tp in asked if tp not in unknown]  # in order, nothing else, no empty topic
    assert known is None or all(t.partitions for t in known.topics)
    answered = None
    if known is not None:  # the coordinator answers every partition it is sent
        answered = gm.OffsetCommitResponse(
            tuple(
                gm.OffsetCommitResponseTopic(
                    t.name,
                    tuple(
                        gm.OffsetCommitResponsePartition(p.partition_index, coordinator_code)
                        for p in t.partitions
                    ),
                )
                for t in known.topics
            )
        )
    merged = with_unknown_partitions(req, answered, unknown)
    got = [(t.name, p.partition_index, p.error_code) for t in merged.topics for p in t.partitions]
    refused = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert got == [(n, p, refused if (n, p) in unknown else coordinator_code) for n, p in asked]


def test_a_request_the_cluster_has_whole_is_passed_on_as_it_is() -> None:
    req = gm.OffsetCommitRequest(
        8, "g", 1, "m", (gm.OffsetCommitRequestTopic("a", (gm.OffsetCommitRequestPartition(0, 5),)),)
    )
    assert unknown_partitions(req, {"a": 1}.get) == frozenset()
    assert without_partitions(req, frozenset()) == req
