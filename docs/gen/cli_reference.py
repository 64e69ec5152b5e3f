"""The CLI reference, generated from the `kohaku` command's argparse parsers."""

from __future__ import annotations

import argparse
from pathlib import Path

from kohaku_assets.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """name -> (parser, one-line help) of a parser's subcommands (argparse keeps them on its
    subparsers action; it has no public accessor)."""
    out: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out[name] = (sub, helps.get(name, ""))
    return out


def _default(value: object) -> str:
    text = str(value)
    root = str(REPO)
    if text.startswith(root):  # the checkout's own path: show it relative
        text = text[len(root) + 1 :] or "."
    return text


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(default)s" in text:
        text = text.replace("%(default)s", _default(action.default))
    return text.replace("|", "\\|")


def options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | default | what it does |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(f"`{s}`" for s in action.option_strings)
            if action.nargs != 0:
                name += f" `{action.metavar or action.dest.upper()}`"
        else:
            name = f"`{action.metavar or action.dest}`" + (" (optional)" if action.nargs in ("?", "*") else "")
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            name += " (" + " \\| ".join(f"`{c}`" for c in action.choices) + ")"
        default = ""
        if action.option_strings and action.nargs != 0 and action.default not in (None, "", argparse.SUPPRESS):
            default = f"`{_default(action.default)}`"
        rows.append(f"| {name} | {default} | {_help(action)} |")
    return rows if len(rows) > 2 else []


def command_section(name: str, parser: argparse.ArgumentParser, summary: str, level: int = 2) -> list[str]:
    usage = " ".join(parser.format_usage().split())
    lines = [f"{'#' * level} `{name}`", "", summary, "", "```", usage, "```", ""]
    if parser.description and parser.description != summary:
        lines += [parser.description, ""]
    lines += options_table(parser)
    for sub_name, (sub, sub_help) in _subcommands(parser).items():
        lines += ["", *command_section(f"{name} {sub_name}", sub, sub_help, level + 1)]
    return lines


def page() -> str:
    parser = build_parser()
    lines = [
        "# CLI reference",
        "",
        "Generated from the `kohaku` command's argparse parsers (`kohaku_assets/cli/`); "
        "`kohaku COMMAND --help` prints the same. `--lake` and `--corpus` take their defaults from "
        "`$KOHAKU_LAKE` and `$KOHAKU_CORPUS` when set (shown here as the checkout's `data_lake/`).",
        "",
        "```",
        " ".join(parser.format_usage().split()),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    subs = _subcommands(parser)
    lines += [f"| [`kohaku {n}`](#kohaku-{n}) | {h} |" for n, (_p, h) in subs.items()]
    for name, (sub, summary) in subs.items():
        lines += ["", *command_section(f"kohaku {name}", sub, summary)]
    return "\n".join(lines) + "\n"
