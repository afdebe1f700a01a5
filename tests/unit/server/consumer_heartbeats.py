"""Hypothesis strategies shared by the ConsumerGroupHeartbeat codec tests (the generic codec and the fast path):
any request value of versions 0-1, from the caller's strategies for names and owned partitions."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from zkcoord.group import consumer_messages as cm

i32 = st.integers(-(2**31), 2**31 - 1)
topic_id = st.binary(min_size=16, max_size=16).map(bytes.hex)


def heartbeats(
    name: st.SearchStrategy[str], owned: st.SearchStrategy[Any]
) -> st.SearchStrategy[cm.ConsumerGroupHeartbeatRequest]:
    """Any ConsumerGroupHeartbeat request; the regex field only at v1, where it exists."""

    @st.composite
    def draw_one(draw: st.DrawFn) -> cm.ConsumerGroupHeartbeatRequest:
        version = draw(st.sampled_from((0, 1)))
        return cm.ConsumerGroupHeartbeatRequest(
            api_version=version,
            group_id=draw(name),
            member_id=draw(name),
            member_epoch=draw(i32),
            instance_id=draw(st.none() | name),
            rack_id=draw(st.none() | name),
            rebalance_timeout_ms=draw(i32),
            subscribed_topic_names=draw(st.none() | st.lists(name, max_size=3).map(tuple)),
            subscribed_topic_regex=draw(st.none() | name) if version >= 1 else None,
            server_assignor=draw(st.none() | name),
            topic_partitions=draw(st.none() | owned),
        )

    return draw_one()
