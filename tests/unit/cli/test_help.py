"""Every `zkcoord` sub-command's --help: each option has help text (with its default when it has one worth
showing), and each command ends with examples."""

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
        shown = action.default not in (None, False, argparse.SUPPRESS, [])
        if action.option_strings and shown and not isinstance(action, argparse._HelpAction):
            assert "default" in parser._get_formatter()._get_help_string(action).lower(), (
                action.option_strings
            )
    assert "examples:" in text, f"zkcoord {' '.join(path)} --help has no examples"
    example_lines = text.split("examples:", 1)[1].strip().splitlines()
    assert any(line.strip().startswith(f"zkcoord {path[0]}") for line in example_lines), example_lines
