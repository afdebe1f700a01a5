"""What every `zkcoord` command shares: a parser class whose help shows each option's default and keeps the
examples epilog as written, and `--config FILE` (Kafka-style `name=value` properties named like the command's
flags) whose values stand in for flags not given on the command line; an unknown name is refused by name."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from zkcoord.errors import ConfigError

CONFIG_DEST = "config_file"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends "(default: X)" to an option's help unless it already says its default or has none worth
    showing (None, False, an empty list); the description and the examples epilog keep their line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text.lower()
            or default is None
            or default is False  # a flag: absent means off (0 is a default worth showing: `0 in (False,)`)
            or default == argparse.SUPPRESS
            or default == []
            or not action.option_strings
        ):
            return text
        if isinstance(default, tuple) and len(default) == 2:  # HOST:PORT values
            return f"{text} (default: {default[0]}:{default[1]})"
        return text + " (default: %(default)s)"


class ZkParser(argparse.ArgumentParser):
    """argparse with zkcoord's help formatter; sub-parsers made from it are ZkParsers too. A usage error is the
    error and where the help is, not the whole usage first (`serve`'s runs to 40 lines)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n(options and examples: {self.prog} --help)\n")


def examples(*lines: str) -> str:
    """An epilog of example command lines, each `command  # what it does` on its own line."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        dest=CONFIG_DEST,
        metavar="FILE",
        default=None,
        help="read options from a properties file: one name=value per line, names as the long flags without "
        "'--' (e.g. data-dir=/var/lib/zkcoord); '#' and '!' start comments; flags on the command line win",
    )


def read_properties(path: Path) -> list[tuple[int, str, str]]:
    """(line number, name, value) for each `name=value` (or `name: value`, Java-properties style) line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read: {exc.strerror or exc}") from exc
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ConfigError(f"{path}:{number}: expected name=value, got {raw!r}")
        out.append((number, line[:cut].strip(), line[cut + 1 :].strip()))
    return out


def _config_path(argv: Sequence[str]) -> str | None:
    for i, token in enumerate(argv):
        if token == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith("--config="):
            return token.split("=", 1)[1]
    return None


def leaf_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub-)parser that `argv` names, following sub-command names from the left."""
    current = parser
    for token in argv:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and token in subs[0].choices:
            current = subs[0].choices[token]
    return current


def apply_config(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """When `argv` has `--config FILE` for a command that accepts it, turn the file's values into that
    command's defaults (so command-line flags still win). Names are the long flags without '--'; a command
    with a repeatable `--property` takes any other name as a property (checked by its own validation)."""
    path = _config_path(argv)
    if path is None:
        return
    leaf = leaf_parser(parser, argv)
    by_name = {
        opt[2:]: action
        for action in leaf._actions
        for opt in action.option_strings
        if opt.startswith("--") and action.dest != CONFIG_DEST
    }
    if not any(a.dest == CONFIG_DEST for a in leaf._actions):
        return  # argparse reports --config as an unknown argument for this command
    properties = by_name.get("property")
    defaults: dict[str, Any] = {}
    extra_properties: list[str] = []
    unknown = []
    for number, name, value in read_properties(Path(path)):
        action = by_name.get(name)
        if action is None or name == "help":
            if properties is not None and isinstance(properties, argparse._AppendAction):
                extra_properties.append(f"{name}={value}")
            else:
                unknown.append(f"{name} (line {number})")
            continue
        defaults[action.dest] = _convert(action, name, value, path, number)
        action.required = False
    if unknown:
        known = ", ".join(sorted(n for n in by_name if n != "help"))
        raise ConfigError(f"--config {path}: unknown name(s): {', '.join(unknown)}; known: {known}")
    if extra_properties:
        assert properties is not None
        defaults[properties.dest] = [*defaults.get(properties.dest, []), *extra_properties]
    leaf.set_defaults(**defaults)


def _convert(action: argparse.Action, name: str, value: str, path: str, number: int) -> Any:
    where = f"{path}:{number}: {name}"
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        on = value.lower() == "true"
        return on if isinstance(action, argparse._StoreTrueAction) else not on
    if isinstance(action, argparse._AppendAction):
        return [_typed(action, v.strip(), where) for v in value.split(",") if v.strip()]
    if action.nargs in ("+", "*"):
        return [_typed(action, v, where) for v in value.split()]
    return _typed(action, value, where)


def _typed(action: argparse.Action, value: str, where: str) -> Any:
    converted: Any = value
    if action.type is not None and callable(action.type):
        try:
            converted = action.type(value)
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        except (TypeError, ValueError):
            kind = getattr(action.type, "__name__", "")
            raise ConfigError(f"{where}: invalid {kind} value: {value!r}") from None
    if action.choices is not None and converted not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ConfigError(f"{where}: {value!r} is not one of {choices}")
    return converted
