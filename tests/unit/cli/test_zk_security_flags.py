"""Every command that takes `--zk` takes the ZooKeeper security flags too (issue 15): the whole parser is
walked, so a command added (or a flag removed) without them fails here; and the flags a parent hands to a child
process read back into the same ZkAuth."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkcoord.cli import build_parser
from zkcoord.errors import ConfigError
from zkcoord.zk.auth_flags import FLAGS, NO_FLAGS, ZkSecurityFlags, add_arguments


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every leaf command of `parser` (sub-commands of sub-commands too), with its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from commands(child, (*path, name))


ALL = sorted(commands(build_parser()), key=lambda c: c[0])
SECURITY_FLAGS = ("--zk-jaas-config", "--zk-digest", "--zk-set-acl", "--zk-sasl-clientconfig")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


TAKING_ZK = [(path, parser) for path, parser in ALL if "--zk" in _options(parser)]


def test_the_commands_taking_zk_include_the_ones_that_start_child_processes() -> None:
    names = {" ".join(path) for path, _ in TAKING_ZK}
    assert {"serve", "demo", "compare run", "legacy consume", "migrate verify", "cluster describe"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize(("path", "parser"), TAKING_ZK, ids=[" ".join(p) for p, _ in TAKING_ZK])
def test_every_command_taking_zk_takes_the_zookeeper_security_flags(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    missing = [flag for flag in SECURITY_FLAGS if flag not in _options(parser)]
    assert missing == [], f"zkcoord {' '.join(path)} takes --zk but not {missing}"


def _parse(argv: list[str]) -> ZkSecurityFlags:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return ZkSecurityFlags.from_args(parser.parse_args(argv))


def test_the_flags_handed_to_a_child_read_back_into_the_same_settings(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        'Zk {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username="u" password="p";\n};\n'
    )
    given = _parse(["--zk-jaas-config", str(jaas), "--zk-sasl-clientconfig", "Zk", "--zk-digest", "d:x",
                    "--zk-set-acl"])  # fmt: skip
    child = _parse(list(given.argv()))
    assert child == given
    assert child.load() == given.load()
    assert child.load().principals == ("sasl:u", "digest:d")
    assert child.load().set_acl
    assert {f for f in given.argv() if f.startswith("--")} == set(FLAGS)
    assert NO_FLAGS.argv() == () and not NO_FLAGS.given
    assert _parse([]) == NO_FLAGS


def test_a_missing_jaas_file_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--zk-jaas-config .*nope.conf"):
        _parse(["--zk-jaas-config", str(tmp_path / "nope.conf")]).load()
