"""Every Prometheus metric zkcoord exposes, defined once: `ServeMetrics` for `zkcoord serve`, `MemberMetrics`
for a legacy member. The edges feed them (the wire server, the group dispatcher, the legacy member runtime);
what already lives in state (groups, bridge counters, sessions) is read at scrape time, so the pure core never
sees this module. Each node or member has its own registry, so several can live in one process (tests).

Names follow Prometheus conventions (`_total` counters, `_seconds` histograms); docs/operations.md lists them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from zkcoord.api_keys import API_NAMES

GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
SESSION_STATES = ("CONNECTED", "SUSPENDED", "LOST")
# Request latency: most answers take under a millisecond; JoinGroup and long-poll Fetch wait seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


# A plain dict of Kafka's API names (zkcoord.api_keys), read per request.
_API_NAMES: dict[int, str] = dict(API_NAMES)


def api_name(api_key: int) -> str:
    """The `api` label: Kafka's name of the API, or its number for one the table lacks."""
    return _API_NAMES.get(api_key) or str(api_key)


def _error_codes(response: Any) -> list[int]:
    """The error codes of one group-API response: the top-level one, else one per partition or group."""
    code = getattr(response, "error_code", None)
    if code is not None:
        return [int(code)]
    codes: list[int] = []
    for topic in getattr(response, "topics", ()) or ():
        codes.extend(int(p.error_code) for p in getattr(topic, "partitions", ()))
    for item in getattr(response, "groups", ()) or ():
        if hasattr(item, "error_code"):
            codes.append(int(item.error_code))
    return codes or [0]


class ServeMetrics:
    """The metrics of one `zkcoord serve` node. Feed: `observe_request` (wire server, every request),
    `observe_group_response` (group dispatcher, every group-API answer). Read at scrape time: what
    `bind(node, bridge)` names."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "zkcoord_requests",
            "Kafka requests received, by API and API version",
            ["api", "version"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "zkcoord_request_duration_seconds",
            "Time from a decoded request to its response being ready, by API",
            ["api"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.group_responses = Counter(
            "zkcoord_group_responses",
            "Group-API answers by API and Kafka error code (0 = none); one per partition for OffsetCommit",
            ["api", "error"],
            registry=r,
        )
        self.rebalances = Counter(
            "zkcoord_group_rebalances",
            "Completed rebalances: JoinGroup answers that elected a leader",
            registry=r,
        )
        self.commits = Counter(
            "zkcoord_offset_commits",
            "Partition offsets committed successfully (rate() = commit rate)",
            registry=r,
        )
        self.commit_requests = Counter(
            "zkcoord_offset_commit_requests", "OffsetCommit requests answered without a top error", registry=r
        )
        self._node: Any = None
        self._bridge: Any = None
        self.registry.register(_NodeCollector(self))

    def bind(self, node: Any, bridge: Any = None) -> None:
        """What the scrape-time collector reads: the node (group services, cluster side), the bridge."""
        self._node = node
        self._bridge = bridge

    def observe_request(self, api_key: int, api_version: int, seconds: float) -> None:
        name = api_name(api_key)
        self.requests.labels(name, str(api_version)).inc()
        self.request_seconds.labels(name).observe(seconds)

    def observe_group_response(self, api_key: int, response: Any) -> None:
        name = api_name(api_key)
        codes = _error_codes(response)
        for code in codes:
            self.group_responses.labels(name, str(code)).inc()
        if name == "JoinGroup" and codes == [0] and getattr(response, "leader", None) == response.member_id:
            self.rebalances.inc()
        if name == "OffsetCommit":
            ok = sum(1 for c in codes if c == 0)
            self.commits.inc(ok)
            if ok:
                self.commit_requests.inc()

    def serve(self, host: str, port: int) -> MetricsServer:
        return MetricsServer.start(self.registry, host, port)

    # ---------------------------------------------------------------------------------------- scrape time

    def _groups_by_state(self) -> dict[str, int]:
        counts = dict.fromkeys(GROUP_STATES, 0)
        # A single node has one group service (`Node.groups`); a cluster node one per offsets partition it leads
        # (`Node.cluster.services`).
        single = getattr(self._node, "groups", None)
        services = [single] if single is not None else []
        cluster = getattr(self._node, "cluster", None)
        if cluster is not None:
            services.extend(list(cluster.services.values()))
        for service in services:
            for group in list(service.state.groups.values()):
                state = group.state.value
                counts[state] = counts.get(state, 0) + 1
        return counts

    def _zk_client(self) -> Any:
        cluster = getattr(self._node, "cluster", None)
        return getattr(getattr(cluster, "node", None), "client", None)


class _NodeCollector(Collector):
    def __init__(self, metrics: ServeMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Any]:
        m = self.m
        groups = GaugeMetricFamily(
            "zkcoord_groups", "Groups this node coordinates, by state", labels=["state"]
        )
        for state, n in sorted(m._groups_by_state().items()):
            groups.add_metric([state], n)
        yield groups
        bridge = m._bridge
        if bridge is not None:
            st = bridge.stats
            yield GaugeMetricFamily(
                "zkcoord_bridge_mirror_lag_partitions",
                "Committed partition offsets acknowledged but not yet mirrored to ZooKeeper",
                value=st.pending,
            )
            yield CounterMetricFamily(
                "zkcoord_bridge_mirror_failures",
                "Failed mirror write rounds (each retried)",
                value=st.mirror_failures,
            )
            yield CounterMetricFamily(
                "zkcoord_bridge_mirrored_partitions",
                "Partition offsets written to ZooKeeper",
                value=st.mirrored,
            )
            yield CounterMetricFamily(
                "zkcoord_bridge_fetch_failures",
                "OffsetFetches answered COORDINATOR_LOAD_IN_PROGRESS because ZooKeeper could not be read",
                value=st.fetch_failures,
            )
            yield _session_family("zkcoord_bridge_zookeeper_session", getattr(bridge.zk, "client", None))
        client = m._zk_client()
        if client is not None:
            yield _session_family("zkcoord_zookeeper_session", client)
            epoch = GaugeMetricFamily(
                "zkcoord_controller_epoch",
                "The cluster's /controller_epoch as this node last read it (-1: unknown)",
            )
            epoch.add_metric([], _controller_epoch(client))
            yield epoch


def _session_family(name: str, client: Any) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        name,
        "1 for the ZooKeeper session's current state (kazoo: CONNECTED, SUSPENDED, LOST)",
        labels=["state"],
    )
    current = str(getattr(client, "state", "LOST")) if client is not None else "LOST"
    for state in SESSION_STATES:
        family.add_metric([state], 1.0 if current == state else 0.0)
    return family


def _controller_epoch(client: Any) -> int:
    try:
        data, _stat = client.get("/controller_epoch")
        return int(data.decode("ascii").strip())
    except Exception:  # no session, no znode yet: a scrape must answer regardless
        return -1


class MemberMetrics:
    """The metrics of one legacy member (`zkcoord legacy consume --metrics-listen`), read at scrape time from
    the member's own counters (`LegacyConsumer.stats_snapshot()`, its owned partitions, its ZooKeeper client)."""

    def __init__(self, consumer: Any, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.consumer = consumer
        self.registry.register(_MemberCollector(consumer))

    def serve(self, host: str, port: int) -> MetricsServer:
        return MetricsServer.start(self.registry, host, port)


class _MemberCollector(Collector):
    def __init__(self, consumer: Any) -> None:
        self.c = consumer

    def collect(self) -> Iterator[Any]:
        c = self.c
        st = c.stats_snapshot()
        labels = ["group", "member"]
        ids = [c.group, c.consumer_id]

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=labels)
            family.add_metric(ids, value)
            return family

        yield counter(
            "zkcoord_legacy_rebalances",
            "Rebalances that ended with this member owning its share",
            st.rebalances,
        )
        yield counter(
            "zkcoord_legacy_rebalance_attempts", "Rebalance attempts (each retry counts)", st.attempts
        )
        yield counter(
            "zkcoord_legacy_rebalance_failed_attempts", "Rebalance attempts that failed", st.failed_attempts
        )
        yield counter(
            "zkcoord_legacy_commit_failures",
            "Offset-store outcomes that failed or were skipped",
            st.commit_failures,
        )
        duration = SummaryMetricFamily(
            "zkcoord_legacy_rebalance_duration_seconds",
            "Time from a rebalance's first attempt to owning the new share",
            labels=labels,
        )
        duration.add_metric(ids, count_value=st.rebalance_count, sum_value=st.rebalance_seconds)
        yield duration
        owned = GaugeMetricFamily(
            "zkcoord_legacy_owned_partitions", "Partitions this member owns in ZooKeeper", labels=labels
        )
        owned.add_metric(ids, len(c.owned()))
        yield owned
        requests = CounterMetricFamily(
            "zkcoord_legacy_zookeeper_requests",
            "ZooKeeper requests the member made, by operation",
            labels=[*labels, "op"],
        )
        for op, n in sorted(dict(getattr(getattr(c, "_zk", None), "requests", {}) or {}).items()):
            requests.add_metric([*ids, op], n)
        yield requests
        yield _session_family("zkcoord_legacy_zookeeper_session", getattr(c, "client", None))


class MetricsServer:
    """A /metrics HTTP endpoint on host:port (port 0 picks a free one: see `.port`) until `stop()`."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.host, self.port = server.server_address[:2]

    @classmethod
    def start(cls, registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
        from prometheus_client import start_http_server

        server, thread = start_http_server(port, addr=host, registry=registry)
        return cls(server, thread)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def timed(observe: Callable[[int, int, float], None], api_key: int, api_version: int) -> Callable[[], None]:
    """`done()` reports the time since this call: for a response that completes later than its request."""
    started = time.perf_counter()
    return lambda: observe(api_key, api_version, time.perf_counter() - started)


class GroupViewMetrics:
    """The one view of a group's two offset stores (`zkcoord legacy describe --watch S --metrics-listen`) as
    gauges, read at scrape time from the last view the watch loop read (zkcoord.cli.describe_json.SCHEMA).

    zkcoord_group_committed_offset{group,topic,partition,store}: store `zookeeper`, or `coordinator` (its own
    offsets) or `coordinator_bridged` (max(coordinator, ZooKeeper) through an offset bridge);
    zkcoord_group_log_end_offset{group,topic,partition}; zkcoord_group_lag{group,topic,partition,store}."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.view: dict[str, Any] | None = None
        self.registry.register(_GroupViewCollector(self))

    def update(self, view: dict[str, Any]) -> None:
        self.view = view

    def serve(self, host: str, port: int) -> MetricsServer:
        return MetricsServer.start(self.registry, host, port)


class _GroupViewCollector(Collector):
    def __init__(self, owner: GroupViewMetrics) -> None:
        self.owner = owner

    def collect(self) -> Iterator[Any]:
        labels = ["group", "topic", "partition"]
        offset = GaugeMetricFamily(
            "zkcoord_group_committed_offset",
            "A group's committed offset per partition in each offset store",
            labels=[*labels, "store"],
        )
        end = GaugeMetricFamily(
            "zkcoord_group_log_end_offset",
            "The partition's log end offset (its leader's answer)",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "zkcoord_group_lag",
            "Log end offset minus the committed offset, per store",
            labels=[*labels, "store"],
        )
        view = self.owner.view
        if view is not None:
            coordinator = (
                "coordinator_bridged" if view["coordinator"]["offsets"] == "bridged" else "coordinator"
            )
            for p in view["partitions"]:
                ids = [view["group"], p["topic"], str(p["partition"])]
                for store, off, behind in (
                    ("zookeeper", p["zookeeper_offset"], p["zookeeper_lag"]),
                    (coordinator, p["coordinator_offset"], p["coordinator_lag"]),
                ):
                    if off is not None:
                        offset.add_metric([*ids, store], off)
                    if behind is not None:
                        lag.add_metric([*ids, store], behind)
                if p["log_end_offset"] is not None:
                    end.add_metric(ids, p["log_end_offset"])
        yield offset
        yield end
        yield lag
