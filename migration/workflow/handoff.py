"""`zkcoord migrate handoff`: moves a group the proxies coordinate (no ZooKeeper member left) to the cluster's own
coordinator while it runs, journaled in the migrate workflow's journal and resumable from its hand-off znode.

Steps (docs/proxy.md "Hand-off"): refuse while ZooKeeper members or consumer-protocol (KIP-848) members remain
(checked again before the offsets are copied and before `forwarding` is written), and when the classic members
offer no protocol name in common (the cluster's coordinator would refuse some of them) → write `/zkcoord/handoffs/G` releasing
(the proxies make every member commit, revoke and leave, and admit none) → wait until the proxies' group has no
member → copy the group's committed offsets from the proxies' coordinator to the cluster's (the group is Empty
there) and read them back → set the znode forwarding (the point of no return: the proxies forward the group's
requests, FindCoordinator included, to the cluster) → wait until the cluster's coordinator has the members.
Run again after any failure: each step starts from what the znode and the two coordinators show.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migration.workflow.runner import Journal
from zkcoord.bridge.membership import read_members
from zkcoord.bridge.mixed_policy import CONSUMER_KIND, classic_marker, offered_protocols, registered_kind
from zkcoord.bridge.policy import TopicPartition
from zkcoord.errors import MalformedZnode, ZkcoordError
from zkcoord.legacy import paths
from zkcoord.legacy.codecs import BrokerRegistration
from zkcoord.proxy.upstream import PLAINTEXT, UpstreamLoginFailed, UpstreamSecurity
from zkcoord.server import kafka_protocol as kp
from zkcoord.zk.handoff import Handoff, Phase, handoff_path, read_handoff, write_handoff
from zkcoord.zk.mixed_group import read_ids
from zkcoord.zk.registrations import PROXIES, proxy_bootstraps
from zkcoord.zk.registry import read_broker_data

STEP = "handoff"
MAX_FRAME = 64 * 1024 * 1024  # a DescribeGroups or FindCoordinator answer; anything larger is refused
CORRELATION_ID = 7  # one request per connection


class HandoffRefused(ZkcoordError):
    """The hand-off cannot start or go on; nothing was changed by this run (the reason says what to do)."""


@dataclass
class HandoffOutcome:
    group: str
    ok: bool
    lines: list[str] = field(default_factory=list)


# -- the wire: a FindCoordinator v0 / DescribeGroups v0 of our own (Tansu answers these; its DescribeGroups with
#    authorized operations does not parse in kafka-python's admin client), over the connection --command-config
#    asks for: TLS and a PLAIN or SCRAM login as the proxy makes them upstream (zkcoord.proxy.upstream) -------------


def _ask(
    address: tuple[str, int],
    api_key: int,
    timeout_s: float,
    security: UpstreamSecurity = PLAINTEXT,
    **fields: Any,
) -> Any:
    """One request and its answer on a new connection (TLS and SASL login as `security` says); ConnectionError
    naming the address for anything that goes wrong, within `timeout_s` in all."""
    host, port = address
    try:
        return asyncio.run(asyncio.wait_for(_exchange(address, api_key, security, fields), timeout_s))
    except TimeoutError:
        raise ConnectionError(
            f"{host}:{port} gave no {security.protocol} answer within {timeout_s:g} s"
        ) from None
    except (OSError, EOFError, UpstreamLoginFailed) as exc:  # asyncio.IncompleteReadError is an EOFError
        raise ConnectionError(
            f"{host}:{port} over {security.protocol}: {exc or type(exc).__name__}"
        ) from None


async def _exchange(address: tuple[str, int], api_key: int, security: UpstreamSecurity, fields: Any) -> Any:
    reader, writer = await security.connect(*address)
    try:
        writer.write(kp.encode_request(api_key, 0, CORRELATION_ID, "zkcoord-migrate", **fields))
        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        if not 4 <= size <= MAX_FRAME:
            raise ConnectionError(f"answered a frame of {size} bytes")
        frame = await reader.readexactly(size)
        try:
            correlation_id, resp = kp.decode_response(api_key, 0, frame)
        except (
            Exception
        ) as exc:  # kafka-python's decoder: struct errors, ValueError... for a malformed answer
            raise ConnectionError(f"answered a frame that does not decode: {exc!r}") from None
        if correlation_id != CORRELATION_ID:
            raise ConnectionError(f"answered correlation id {correlation_id}, not {CORRELATION_ID}")
        return resp
    finally:
        writer.close()
        with contextlib.suppress(Exception):  # the TLS close_notify, within the caller's deadline
            await writer.wait_closed()


def cluster_group(
    bootstrap: tuple[str, int], group: str, timeout_s: float = 10.0, security: UpstreamSecurity = PLAINTEXT
) -> tuple[str, list[str]]:
    """(state, member ids) of `group` in the coordinator the cluster names for it."""
    found = _ask(bootstrap, kp.FIND_COORDINATOR, timeout_s, security, key=group)
    if found.error_code != 0:
        raise ConnectionError(f"FindCoordinator for {group}: error {found.error_code}")
    described = _ask((found.host, found.port), kp.DESCRIBE_GROUPS, timeout_s, security, groups=[group])
    (one,) = described.groups
    if one.error_code != 0:
        raise ConnectionError(f"DescribeGroups {group}: error {one.error_code}")
    return one.group_state, sorted(m.member_id for m in one.members)


# -- the cluster's one-protocol rule --------------------------------------------------------------------------------


def common_protocols(offered: Mapping[str, Sequence[str] | None]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the protocol names every member of known names offers, in the first such member's order; the members whose
    names are unknown), of `offered`: member -> the names its JoinGroup offered, or None when not known. A
    classic group in Kafka's coordinator takes one protocol all its members support
    (core/src/main/scala/kafka/coordinator/group/GroupMetadata.scala, `supportsProtocols` / `candidateProtocols`
    / `selectProtocol`) and refuses a joining member that offers none of them INCONSISTENT_GROUP_PROTOCOL, so an
    empty first item with any member known means the cluster would refuse some of the members.

    >>> common_protocols({"a": ["range", "cooperative-sticky"], "b": ["cooperative-sticky"], "c": None})
    (('cooperative-sticky',), ('c',))
    >>> common_protocols({"a": ["range"], "b": ["cooperative-sticky"]})
    ((), ())
    """
    known = [list(names) for names in offered.values() if names is not None]
    unknown = tuple(m for m, names in offered.items() if names is None)
    if not known:
        return (), unknown
    rest = [set(names) for names in known[1:]]
    first = dict.fromkeys(known[0])  # its order, each name once
    return tuple(n for n in first if all(n in names for names in rest)), unknown


# -- where the two coordinators are ---------------------------------------------------------------------------------


def cluster_bootstrap(zk: Any, protocol: str = "PLAINTEXT") -> tuple[str, int]:
    """The first live broker's endpoint of `protocol` (--command-config's security.protocol) in /brokers/ids (read
    only)."""
    for node, data in sorted(read_broker_data(zk).items()):
        try:
            endpoint = BrokerRegistration.decode(paths.broker_path(node), data).endpoint_for(protocol)
        except MalformedZnode:
            continue
        if endpoint is not None:
            return endpoint
    raise HandoffRefused(
        f"no broker with a {protocol} endpoint in /brokers/ids: give --bootstrap HOST:PORT, or --command-config "
        "FILE with the security.protocol of the brokers' listener"
    )


# -- the command ---------------------------------------------------------------------------------------------------


class Handoffs:
    """`run(group)` for `migrate handoff`. `store_for(bootstrap, group)` returns a BrokerOffsetStore-like object
    (read_offsets, write_offsets, describe, close) connected as --command-config says; `security` is that same
    file's TLS and SASL login for the FindCoordinator/DescribeGroups asked of the cluster here."""

    def __init__(
        self,
        zk: Any,
        journal: Journal,
        store_for: Callable[[str, str], Any],
        bootstrap: str | None = None,
        timeout_s: float = 120.0,
        poll_s: float = 0.1,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        security: UpstreamSecurity = PLAINTEXT,
        request_timeout_s: float = 10.0,
    ) -> None:
        self.zk = zk
        self.security = security
        self.request_timeout_s = request_timeout_s
        self.journal = journal
        self.store_for = store_for
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.clock_ms = clock_ms
        self._proxies: Any = None

    def _note(self, group: str, event: str, old: str, new: str, **detail: Any) -> None:
        self.journal.append(
            group,
            {
                "ts_ms": self.clock_ms(),
                "step": STEP,
                "event": event,
                "from": old,
                "to": new,
                "detail": detail,
            },
        )

    def _cluster(self) -> tuple[str, int]:
        if self.bootstrap:
            if self.bootstrap in proxy_bootstraps(self.zk):
                # The proxies answer FindCoordinator of their groups themselves: the "cluster's coordinator" asked
                # there would be the one the group leaves (a member of it was reported as the cluster's).
                raise HandoffRefused(
                    f"--bootstrap {self.bootstrap} is a zkcoord proxy (announced under {PROXIES}), not a broker of "
                    "your cluster: give one of your brokers, or leave --bootstrap out (the first in /brokers/ids)"
                )
            host, _, port = self.bootstrap.rpartition(":")
            return host, int(port)
        return cluster_bootstrap(self.zk, self.security.protocol)

    def _cluster_group(self, group: str) -> tuple[str, list[str]]:
        """cluster_group through --bootstrap (or /brokers/ids), a failure named as a refusal of this run."""
        bootstrap = self._cluster()
        try:
            return cluster_group(bootstrap, group, self.request_timeout_s, self.security)
        except ConnectionError as exc:
            raise HandoffRefused(
                f"asking the cluster's coordinator about {group} (bootstrap {bootstrap[0]}:{bootstrap[1]}) "
                f"failed: {exc}{_secured_hint(self.security)}; run again"
            ) from None

    def _wait(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise HandoffRefused(
                    f"timed out after {self.timeout_s:.0f} s waiting for {what}; run again to resume"
                )
            time.sleep(self.poll_s)  # a poll of the coordinators at a bounded rate, not a synchronisation

    def run(self, group: str) -> HandoffOutcome:
        lines: list[str] = []
        handoff, version = read_handoff(self.zk, group)
        if handoff is None:
            self._refuse_legacy(group)
            self._refuse_consumer_protocol(group)
            lines.extend(self._refuse_split(group))
            members = len(self._proxy_members(group))
            if members == 0:
                self._refuse_unknown(group)
            state, cluster_members = self._cluster_group(group)
            if cluster_members:
                raise HandoffRefused(
                    f"the cluster's own group {group} already has {len(cluster_members)} member(s) "
                    f"({state}): its offsets cannot be written there while it runs"
                )
            handoff = Handoff(group, Phase.RELEASING, self.clock_ms(), members)
            self._note(group, "begin", "proxy", Phase.RELEASING.value, members=members)
            version = write_handoff(self.zk, handoff, -1)
            lines.append(
                f"group {group}: hand-off begun ({handoff_path(group)} releasing): the proxies make its "
                f"{members} member(s) release everything and admit none"
            )
        if handoff.phase is Phase.RELEASING:
            self._wait(
                f"the proxies' group {group} to have no member", lambda: not self._proxy_members(group)
            )
            lines.append(f"group {group}: every member released its partitions (the proxies' group is empty)")
            # DescribeGroups lists broker-protocol members only: a legacy member started since the hand-off began
            # would consume while the offsets are copied. Checked again before the point of no return.
            self._refuse_legacy(group, resumable=True)
            copied = self._copy_offsets(group)
            lines.append(
                f"group {group}: {len(copied)} committed offset(s) written to the cluster's coordinator and "
                "read back equal"
            )
            self._refuse_legacy(group, resumable=True)
            self._refuse_consumer_protocol(group, resumable=True)
            forwarding = Handoff(group, Phase.FORWARDING, self.clock_ms(), handoff.members)
            version = write_handoff(self.zk, forwarding, version)
            self._note(group, "forwarding", Phase.RELEASING.value, Phase.FORWARDING.value,
                       offsets={f"{tp.topic}-{tp.partition}": o for tp, o in sorted(copied.items())})  # fmt: skip
            lines.append(
                f"group {group}: forwarding (the point of no return): the proxies send its requests, "
                "FindCoordinator included, to the cluster's coordinator"
            )
            handoff = forwarding
        want = handoff.members
        seen: list[tuple[str, list[str]]] = []

        def joined() -> bool:
            seen[:] = [self._cluster_group(group)]
            state, ids = seen[0]
            return len(ids) >= want and (want == 0 or state == "Stable")

        self._wait(f"{want} member(s) in the cluster's own group {group}", joined)
        state, ids = seen[0] if seen else ("", [])
        self._note(group, "done", Phase.FORWARDING.value, "cluster", members=ids)
        lines.append(
            f"group {group}: handed off: the cluster's coordinator has it ({state}, {len(ids)} member(s))"
        )
        lines.append(
            "  members may now be restarted with bootstrap.servers = the cluster's brokers, at leisure; going "
            "back is the barrier way (docs/proxy.md 'Hand-off')"
        )
        return HandoffOutcome(group, True, lines)

    def _refuse_unknown(self, group: str) -> None:
        """Refuse a group the proxies know nothing of (no member, no committed offset) and ZooKeeper neither (no
        /consumers/G): most likely a mistyped id, and a hand-off would forward that id to the cluster for good."""
        read = self._proxy_store(group).read_offsets()
        if read.request_error is not None:
            raise HandoffRefused(
                f"reading {group}'s offsets from the proxies failed: {read.request_error}; run again"
            )
        if not read.offsets and self.zk.exists(paths.group_path(group)) is None:
            raise HandoffRefused(
                f"the proxies' coordinator has no member and no committed offset for {group}, and there is no "
                f"/consumers/{group}: is the group id right? (`zkcoord legacy list --zk ...` lists the groups); "
                "nothing was written"
            )

    def _refuse_legacy(self, group: str, resumable: bool = False) -> None:
        """Refuse while the group has ZooKeeper (legacy) members: they read /consumers, which neither the proxies'
        DescribeGroups nor the cluster's coordinator show."""
        legacy = [m.consumer_id for m in read_members(self.zk, group) if m.protocol == "legacy"]
        if legacy:
            then = "; then run again to resume the hand-off" if resumable else ""
            raise HandoffRefused(
                f"{len(legacy)} ZooKeeper member(s) remain ({', '.join(legacy)}): a legacy member reads "
                "/consumers, which the cluster's coordinator does not see; replace them by broker-protocol "
                f"members first (zkcoord migrate status shows the next one){then}"
            )

    def _refuse_consumer_protocol(self, group: str, resumable: bool = False) -> None:
        """Refuse while the group has consumer-protocol (KIP-848) members: a ZooKeeper-era cluster's coordinator
        has no ConsumerGroupHeartbeat (Tansu 0.6.0 closes the connection on one, Kafka before 3.7 does not list
        it), so such a member could not rejoin there and would keep what it holds while the cluster's coordinator
        gave it to others; handing it off as a classic member is not possible either (its group.protocol is its
        own configuration). The mixed-group bridge registers it in /consumers/G/ids like a classic member; the
        proxies' DescribeGroups lists the classic members only, so a registered broker-protocol member missing
        there is a consumer-protocol one (a classic member between its registration and its join is refused too,
        harmlessly: run again)."""
        registered = {
            marker["member_id"]: marker.get("client_id", "")
            for data in read_ids(self.zk, group).values()
            if (marker := classic_marker(data)) is not None and "member_id" in marker
        }
        if not registered:
            return
        classic = {m["member_id"] for m in self._proxy_members(group)}
        consumers = sorted(
            f"{client} ({member})" for member, client in registered.items() if member not in classic
        )
        if consumers:
            then = "; then run again to resume the hand-off" if resumable else ""
            raise HandoffRefused(
                f"{len(consumers)} consumer-protocol (KIP-848) member(s) remain ({', '.join(consumers)}): the "
                "cluster's coordinator may not serve ConsumerGroupHeartbeat (a ZooKeeper-era broker does not), so "
                "they could not rejoin there; restart them with group.protocol=classic first"
                f"{then}"
            )

    def _refuse_split(self, group: str) -> list[str]:
        """Refuse, before anything is written, a group whose classic members offer no protocol name in common:
        after the point of no return they rejoin the cluster's coordinator, which takes one protocol every member
        offers (`common_protocols`) and answers a member offering none of the group's INCONSISTENT_GROUP_PROTOCOL,
        fatal for kafka-python and librdkafka (it stops consuming). A bridged group hosts them whatever names they
        offer (the coordinator computes the shares itself), so such a group runs fine until the hand-off. Members
        registered by a zkcoord before the registration's `protocols` key are unknown: the refusal needs a proven
        empty intersection of the known ones; the unknown ones are named in the output (restarting them records
        their names). Returns those output lines."""
        members = {m["member_id"] for m in self._proxy_members(group)}
        offered: dict[str, tuple[str, ...] | None] = {}
        for data in read_ids(self.zk, group).values():
            marker = classic_marker(data)
            if (
                marker is None
                or registered_kind(marker) == CONSUMER_KIND
                or marker.get("member_id") not in members
            ):
                continue
            offered[f"{marker.get('client_id', '')} ({marker['member_id']})"] = offered_protocols(data)
        common, unknown = common_protocols(offered)
        known = {m: names for m, names in sorted(offered.items()) if names is not None}
        if known and not common:
            each = "; ".join(f"{m} offers {', '.join(names)}" for m, names in known.items())
            raise HandoffRefused(
                f"the cluster's coordinator would refuse some of {group}'s members: a classic group there takes "
                f"one protocol (assignor) name every member offers, and its members share none ({each}); a member "
                "offering none of the group's is refused INCONSISTENT_GROUP_PROTOCOL, fatal for kafka-python and "
                "librdkafka (it would stop consuming after the point of no return). Restart the odd members with "
                "a common assignor listed (e.g. partition.assignment.strategy=range,cooperative-sticky; "
                "kafka-python: partition_assignment_strategy=(RangePartitionAssignor, CooperativeStickyAssignor)), "
                "then run again; nothing was written"
            )
        if not unknown:
            return []
        return [
            f"group {group}: {len(unknown)} member(s) registered without their offered protocol names (by an "
            f"older zkcoord: {', '.join(sorted(unknown))}), not checked against the cluster's one-protocol rule "
            f"({'the others share ' + ', '.join(common) if common else 'no other member is known'})"
        ]

    def _proxy_store(self, group: str) -> Any:
        """The proxies' coordinator (one admin connection per run, bootstrapped on the live proxy nodes that
        coordinate `group`)."""
        if self._proxies is None:
            proxies = proxy_bootstraps(self.zk, group)
            if not proxies:
                raise HandoffRefused(
                    f"no running proxy node coordinates {group} (none under {PROXIES} whose --bridge-zk-groups "
                    "matches it): the hand-off moves a group from the proxies' coordinator to the cluster's"
                )
            self._proxies = self.store_for(",".join(proxies), group)
        return self._proxies

    def close(self) -> None:
        if self._proxies is not None:
            self._proxies.close()
            self._proxies = None

    def _proxy_members(self, group: str) -> list[dict[str, Any]]:
        try:
            return list(self._proxy_store(group).describe()["members"])
        except ZkcoordError:
            raise
        except Exception as exc:  # the client library's own errors: named, and the run can be repeated
            raise HandoffRefused(
                f"DescribeGroups {group} through the proxies ({', '.join(proxy_bootstraps(self.zk, group))}) "
                f"failed: {exc!r}{_secured_hint(self.security)}; run again"
            ) from None

    def _copy_offsets(self, group: str) -> dict[TopicPartition, int]:
        source = self._proxy_store(group)
        host, port = self._cluster()
        target = self.store_for(f"{host}:{port}", group)
        try:
            read = source.read_offsets()
            if read.request_error is not None or read.errors:
                raise HandoffRefused(f"reading {group}'s offsets from the proxies failed: "
                                     f"{read.request_error or dict(read.errors)}")  # fmt: skip
            offsets = dict(read.offsets)
            reply = target.write_offsets(offsets)
            failed = {tp: e for tp, e in reply.errors if e is not None}
            if failed:
                raise HandoffRefused(f"the cluster's coordinator refused {group}'s offsets: {failed}")
            back = target.read_offsets(list(offsets))
            differ = {tp: (o, back.offsets.get(tp)) for tp, o in offsets.items() if back.offsets.get(tp) != o}
            if back.request_error is not None or differ:
                raise HandoffRefused(
                    f"{group}'s offsets read back from the cluster differ (written, read): "
                    f"{back.request_error or differ}"
                )
            self._note(group, "offsets", Phase.RELEASING.value, Phase.RELEASING.value, count=len(offsets))
            return offsets
        finally:
            target.close()


def _secured_hint(security: UpstreamSecurity) -> str:
    """What to check when a connection fails: the listener's security against --command-config's."""
    if security.protocol == "PLAINTEXT":
        return (
            " (connected in PLAINTEXT: a TLS or SASL listener needs --command-config FILE with its "
            "security.protocol and credentials)"
        )
    return f" (connected with --command-config's security.protocol={security.protocol})"
