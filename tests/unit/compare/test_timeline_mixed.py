"""The ownership timeline of a mixed-group run: members coloured by protocol family (blues for ZooKeeper members,
oranges for broker-protocol members) and labelled with their protocol; other runs keep one colour per member."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from migration.compare.report import _member_protocols, _plt, _protocol_colours, plot_timeline
from migration.compare.trace import RunMeta

PROTOCOLS = {
    "m0": "legacy-fast",
    "m1": "legacy-faithful",
    "m2": "classic-kafka-python",
    "m3": "classic-confluent",
}
MIXED = RunMeta(
    "r1", "rolling-migration", "mixed", "range", 0, ended_ms=4000, extra={"member_protocols": PROTOCOLS}
)


def test_member_protocols_come_from_mixed_runs_only() -> None:
    assert _member_protocols(MIXED) == PROTOCOLS
    plain = RunMeta("r2", "demo", "legacy-fast", "range", 0, extra={"member_protocols": PROTOCOLS})
    assert _member_protocols(plain) == {}


def test_families_get_their_own_hues() -> None:
    colours = _protocol_colours(_plt(), sorted(PROTOCOLS), PROTOCOLS)
    for member, protocol in PROTOCOLS.items():
        r, _, b, _ = colours[member]
        assert (b > r) if protocol.startswith("legacy") else (r > b), (member, colours[member])
    assert colours["m0"] != colours["m1"] and colours["m2"] != colours["m3"]


def test_timeline_draws_the_hand_over_in_both_hues(tmp_path: Path) -> None:
    intervals = [  # partition 0 goes from a ZooKeeper member to a broker-protocol member and back
        {"topic": "t", "partition": 0, "member": "m0", "start_ms": 0, "end_ms": 1000},
        {"topic": "t", "partition": 0, "member": "m2", "start_ms": 1000, "end_ms": 3000},
        {"topic": "t", "partition": 0, "member": "m1", "start_ms": 3000, "end_ms": 4000},
        {"topic": "t", "partition": 1, "member": "m3", "start_ms": 0, "end_ms": 4000},
    ]
    path = plot_timeline([(MIXED, intervals, [], [])], tmp_path / "timeline.png")
    with Image.open(path) as img:
        pixels = img.convert("RGB").getcolors(maxcolors=1 << 20) or []
    blue = sum(n for n, (r, g, b) in pixels if b > r + 60)
    orange = sum(n for n, (r, g, b) in pixels if r > b + 100 and g > b)
    assert blue > 2000 and orange > 2000, (blue, orange)
