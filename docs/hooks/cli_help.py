"""A MkDocs hook: the CLI reference page's ``<!-- cli-help -->`` marker becomes each command's
``--help``, read from the installed parser when the site is built, so the page cannot fall
behind the CLI."""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-help -->"


def _help(parser: argparse.ArgumentParser) -> str:
    os.environ.setdefault("COLUMNS", "100")
    return parser.format_help().rstrip()


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return sorted(action.choices.items())
    return []


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from durable_agents.cli import build_parser

    parser = build_parser()
    parts = ["## durable-agents", "", "```text", _help(parser), "```", ""]
    for name, sub in _commands(parser):
        parts += [f"## {name}", "", "```text", _help(sub), "```", ""]
        for child, subsub in _commands(sub):  # a command's own sub-commands: `policy set`, `grants add`
            parts += [f"### {name} {child}", "", "```text", _help(subsub), "```", ""]
    return markdown.replace(MARKER, "\n".join(parts))
