"""Every `zkcoord` sub-command's --help: each option has help text (with its default when it has one worth
showing), each command and each command group ends with examples; the help texts agree with each other (the
demo's report directory, one name per offsets file format) and a usage error is short."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from zkcoord.cli import build_parser, main


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    seen: set[int] = set()
    for name, sub in subs[0].choices.items():
        if id(sub) not in seen:  # aliases share one parser
            seen.add(id(sub))
            yield from commands(sub, (*path, name))


ALL = sorted(commands(build_parser()), key=lambda c: c[0])


def test_there_are_commands_to_check() -> None:
    assert len(ALL) >= 20, [p for p, _ in ALL]


@pytest.mark.parametrize(("path", "parser"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_option_has_help_and_the_command_has_examples(
    path: tuple[str, ...], parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*path, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    missing = [
        "/".join(a.option_strings) or a.dest
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction) and (not a.help or a.help == argparse.SUPPRESS)
    ]
    assert not missing, f"zkcoord {' '.join(path)}: options without help text: {missing}"
    for action in parser._actions:
        # identity, not `in`: 0 == False, and a default of 0 (e.g. --max-lag) is worth showing
        shown = not (
            action.default is None or action.default is False or action.default in (argparse.SUPPRESS, [])
        )
        if action.option_strings and shown and not isinstance(action, argparse._HelpAction):
            assert "default" in parser._get_formatter()._get_help_string(action).lower(), (
                action.option_strings
            )
    assert "examples:" in text, f"zkcoord {' '.join(path)} --help has no examples"
    example_lines = text.split("examples:", 1)[1].strip().splitlines()
    assert any(line.strip().startswith(f"zkcoord {path[0]}") for line in example_lines), example_lines


def groups(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser that has sub-commands (`zkcoord` itself, `zk`, `legacy`, `migrate`, ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if subs:
        yield path, parser
        for name, sub in subs[0].choices.items():
            yield from groups(sub, (*path, name))


GROUPS = sorted(groups(build_parser()), key=lambda c: c[0])


@pytest.mark.parametrize(("path", "parser"), GROUPS, ids=[" ".join(p) or "zkcoord" for p, _ in GROUPS])
def test_every_command_group_has_examples(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    assert len(GROUPS) >= 7  # zkcoord, zk, legacy, cluster, migrate, compare, security
    epilog = parser.epilog or ""
    assert "examples:" in epilog, f"zkcoord {' '.join(path)} --help has no examples"
    assert any(line.strip().startswith(" ".join(("zkcoord", *path))) for line in epilog.splitlines()[1:])


def _help(capsys: pytest.CaptureFixture[str], *path: str) -> str:
    with pytest.raises(SystemExit):
        main([*path, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: compare words


def test_help_texts_agree_with_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    assert "reports/demo-<date>-<time>" in _help(capsys, "demo")
    assert "report in reports/demo-<date>-<time>/" in _help(
        capsys,
    )
    assert "zkcoord-demo" not in _help(capsys)
    assert "tolerated |zk - broker| per partition, in offsets (default: 0)" in _help(
        capsys, "migrate", "verify"
    )
    # One name per offsets file format: ExportZkOffsets lines are `zk` wherever a --format takes them.
    names = set()
    for path, parser in ALL:
        for action in parser._actions:
            if "--format" in action.option_strings and action.choices and "jsonl" in action.choices:
                names.add((" ".join(path), tuple(action.choices)))
    assert {n for _, choices in names for n in choices} == {"zk", "jsonl", "parquet"}, names
    assert {p for p, _ in names} >= {"legacy export", "legacy import", "migrate export", "migrate import"}


def test_a_usage_error_is_short(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "zkcoord serve: error: the following arguments are required: --data-dir",
        "(options and examples: zkcoord serve --help)",
    ]


def test_migrate_bootstrap_says_which_coordinator_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    """plan/status take the coordinator the group moves to (the proxy, in front of a cluster); handoff takes a broker
    of the cluster (the proxy's address there would name the coordinator the group leaves)."""
    for step, says in (("plan", "`zkcoord proxy` in front of your cluster (default: none"),
                       ("handoff", "a broker of your cluster, whose own coordinator receives the group; not the proxy")):  # fmt: skip
        with pytest.raises(SystemExit):
            main(["migrate", step, "--help"])
        assert says in " ".join(capsys.readouterr().out.split())
