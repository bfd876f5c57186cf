"""The Python blocks of the README and of the docs' pages, as a test reads and runs them.

Each ```python block in a page is preceded (blank lines aside) by a marker:

    <!-- readme-test: file=myapp/agents.py -->      a module of the user's project
    <!-- readme-test: client -->                     client code, run in order
    <!-- readme-test: skip reason="why" -->          a fragment that cannot run alone

A ```toml block may be a file of the project too (``file=pyproject.toml``: its pytest
settings, say); every other marker goes before a python block, except these, before a
```sh block:

    <!-- readme-test: temporal-cli -->                      ``temporal`` commands
    <!-- readme-test: cli -->                               ``durable-agents`` commands
    <!-- readme-test: shell-synopsis reason="why" -->       not commands to type as they are

``temporal_cli_blocks`` returns a page's ``temporal-cli`` blocks (README.md,
docs/tutorial.md, the wire contract page), which
tests/outside_clients/test_doc_cli_snippets.py runs; ``cli_blocks`` its ``cli`` blocks,
which tests/test_readme.py runs against the tour's worker. Each command of either is
shell-split (backslash-continued lines joined, ``# comments`` dropped); a ``cli`` command's
program is ``durable-agents`` or ``.venv/bin/durable-agents`` (read as ``durable-agents``),
and a ``cli`` block holds no placeholder (``<id>``, ``…``, ``[--optional]``, ``a | b``).
``cli_blocks`` is strict: an unmarked sh block with a ``durable-agents`` command is an
error there (mark it ``cli``, or ``shell-synopsis`` with the reason it does not run).

An unmarked python block, a marker without its block (or before another kind of
block), or a skip without a reason is an error, so a new snippet cannot go
untested by accident.

Several pages may make one project (``parse_pages``): their blocks in the order of
the pages, a page's in its order. Run as a script (``python -P tests/readme_snippets.py
…``, cwd = the project), this module is the client process: it imports every ``file=``
module of its pages, then runs the ``client`` blocks in order in one namespace with top-level-await semantics
(as ``python -m asyncio`` does), and writes what each block left in ``result``
to a JSON trace. It imports nothing from ``tests``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import inspect
import json
import os
import re
import shlex
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

PYTHON_LANGS = frozenset({"python", "py", "python3"})
FILE_LANGS = {".py": "python", ".toml": "toml"}
"""What a ``file=`` block may hold, by the file's suffix: the block's language."""
SHELL_LANGS = frozenset({"sh", "bash", "shell"})
CLI_MARKER = "temporal-cli"
DA_CLI_MARKER = "cli"
SYNOPSIS_MARKER = "shell-synopsis"
SHELL_MARKERS = frozenset({CLI_MARKER, DA_CLI_MARKER, SYNOPSIS_MARKER})
"""The markers that go before a sh block."""
DA_PROGRAMS = frozenset({"durable-agents", ".venv/bin/durable-agents"})
"""How a ``cli`` block may name the program: both run the installed ``durable-agents``."""
DA_COMMAND = re.compile(r"(?:^|[\s/])durable-agents(?:\s|$)")
PLACEHOLDER = re.compile(r"<\w[\w-]*>|…")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*readme-test:(?P<args>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    kind: str  # "file" | "client" | "skip"
    code: str
    line: int
    """The page's line of the block's first line of code (1-based)."""
    path: str | None = None
    reason: str | None = None
    doc: str = "README.md"
    """The page the block is on, as its messages and tracebacks name it."""

    @property
    def is_python(self) -> bool:
        """Python code (every block but a ``file=`` block of another language, e.g. toml)."""
        return self.kind != "file" or PurePosixPath(self.path or "").suffix == ".py"

    @property
    def module(self) -> str:
        parts = list(PurePosixPath(self.path or "").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)


@dataclass(frozen=True)
class CliBlock:
    """A ``temporal-cli`` or ``cli`` block: its commands, each a shell-split argv
    (``["temporal", …]``, ``["durable-agents", …]``)."""

    commands: list[list[str]]
    lines: list[int]
    """The Markdown line each command starts on (1-based), one per command."""
    line: int
    """The Markdown line of the block's first line (1-based)."""
    kind: str = CLI_MARKER
    """``temporal-cli`` or ``cli``."""
    doc: str = "README.md"


class ReadmeMarkerError(ValueError):
    """A page's blocks are not all marked correctly; the message lists each problem."""


def _parse_marker(args: str, where: str) -> tuple[str, str | None, str | None]:
    try:
        words = shlex.split(args)
    except ValueError as e:
        raise ReadmeMarkerError(f"{where}: unreadable readme-test marker ({e})") from None
    if words == ["client"]:
        return "client", None, None
    if words in ([CLI_MARKER], [DA_CLI_MARKER]):
        return words[0], None, None
    if words and words[0] in ("skip", SYNOPSIS_MARKER):
        fields = dict(w.partition("=")[::2] for w in words[1:])
        reason = fields.get("reason", "").strip()
        if set(fields) != {"reason"} or not reason:
            raise ReadmeMarkerError(
                f'{where}: a {words[0]} needs a reason: <!-- readme-test: {words[0]} reason="…" -->'
            )
        return words[0], None, reason
    if len(words) == 1 and words[0].startswith("file="):
        path = words[0][len("file=") :]
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or pure.suffix not in FILE_LANGS:
            raise ReadmeMarkerError(f"{where}: file= must be a relative path to a .py or .toml file, got {path!r}")
        return "file", path, None
    raise ReadmeMarkerError(
        f'{where}: unknown readme-test marker {args.strip()!r}: use file=<path>, client, skip reason="…" '
        f'(python blocks) or {CLI_MARKER}, {DA_CLI_MARKER}, {SYNOPSIS_MARKER} reason="…" (sh blocks)'
    )


def _what_follows(args: str) -> str:
    """The kind of block a marker's arguments ask for, for messages: ``python`` or ``sh``."""
    try:
        words = shlex.split(args)
        return "sh" if words and words[0] in SHELL_MARKERS else "python"
    except ValueError:
        return "python"


def _placeholder(word: str) -> bool:
    """A word that stands for something to fill in or choose: ``<id>``, ``…``, ``[--json]``, ``|``."""
    if word == "|" or PLACEHOLDER.search(word):
        return True
    if word.startswith("[") or word.endswith("]"):
        try:
            json.loads(word)
        except ValueError:
            return True
    return False


def _split_commands(code: str, first_line: int, name: str, problems: list[str], kind: str = CLI_MARKER) -> CliBlock:
    """A shell block's commands: backslash-continued lines joined, ``# comments`` dropped."""
    commands: list[list[str]] = []
    lines: list[int] = []
    pending, start = "", first_line
    for offset, raw in enumerate(code.splitlines()):
        if not pending:
            start = first_line + offset
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        pending += raw
        try:
            words = shlex.split(pending, comments=True)
        except ValueError as e:
            problems.append(f"{name}:{start}: unreadable shell command ({e})")
            words = []
        if words and kind == CLI_MARKER and words[0] != "temporal":
            problems.append(f"{name}:{start}: a {CLI_MARKER} block runs temporal commands only, not {words[0]!r}")
        elif words and kind == DA_CLI_MARKER and words[0] not in DA_PROGRAMS:
            problems.append(
                f"{name}:{start}: a {DA_CLI_MARKER} block runs durable-agents commands only, not {words[0]!r}"
            )
        elif words and kind == DA_CLI_MARKER and (held := [w for w in words if _placeholder(w)]):
            problems.append(
                f"{name}:{start}: a {DA_CLI_MARKER} block holds commands as typed, not placeholders {held} "
                f'(a synopsis is <!-- readme-test: {SYNOPSIS_MARKER} reason="…" -->)'
            )
        elif words:
            commands.append(["durable-agents", *words[1:]] if kind == DA_CLI_MARKER else words)
            lines.append(start)
        pending = ""
    if pending.strip():
        problems.append(f"{name}:{start}: the block ends inside a backslash-continued command")
    if not commands:
        problems.append(f"{name}:{first_line}: a {kind} block without a command")
    return CliBlock(commands=commands, lines=lines, line=first_line, kind=kind, doc=name)


def _runs_durable_agents(code: str) -> bool:
    """Whether a shell block holds a ``durable-agents`` command (comments aside)."""
    return any(DA_COMMAND.search(line.split("#", 1)[0]) for line in code.splitlines())


def _scan(text: str, name: str, strict_cli: bool = False) -> tuple[list[Block], list[CliBlock], list[str]]:
    """The marked blocks of a Markdown text: python blocks, shell blocks (``temporal-cli`` and
    ``cli``), problems; ``strict_cli``: an unmarked sh block of ``durable-agents`` commands is one."""
    lines = text.splitlines()
    blocks: list[Block] = []
    cli_blocks: list[CliBlock] = []
    problems: list[str] = []
    marker: tuple[int, str] | None = None  # (line number, args) of a marker not yet used

    def no_block_after(marker: tuple[int, str]) -> str:
        return f"{name}:{marker[0]}: readme-test marker without a {_what_follows(marker[1])} block after it"

    i = 0
    while i < len(lines):
        line = lines[i]
        found = MARKER.match(line)
        if found:
            if marker is not None:
                problems.append(no_block_after(marker))
            marker = (i + 1, found["args"])
            i += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            if line.strip() and marker is not None:
                problems.append(no_block_after(marker))
                marker = None
            i += 1
            continue
        indent, ticks, lang = fence["indent"], fence["fence"], fence["lang"].lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        body = [raw[len(indent) :] if raw.startswith(indent) else raw.lstrip() for raw in lines[i + 1 : end]]
        code = "\n".join(body) + "\n"
        parsed: tuple[str, str | None, str | None] | None = None
        if marker is not None:
            try:
                parsed = _parse_marker(marker[1], f"{name}:{marker[0]}")
            except ReadmeMarkerError as e:
                problems.append(str(e))
        file_lang = FILE_LANGS[PurePosixPath(parsed[1] or "").suffix] if parsed and parsed[0] == "file" else None
        if marker is not None and file_lang not in (None, "python"):
            # a file of another language (file=pyproject.toml): its block is in that language
            if lang != file_lang:
                problems.append(f"{name}:{marker[0]}: file={parsed and parsed[1]} goes before a {file_lang} block")
            else:
                blocks.append(Block(kind="file", code=code, line=i + 2, path=parsed and parsed[1], doc=name))
        elif lang in PYTHON_LANGS:
            if marker is None:
                problems.append(
                    f"{name}:{i + 1}: python block without a readme-test marker "
                    '(<!-- readme-test: file=<path> | client | skip reason="…" --> on the line before it)'
                )
            elif parsed is not None and parsed[0] in SHELL_MARKERS:
                problems.append(f"{name}:{marker[0]}: a {parsed[0]} marker goes before a sh block, not a python block")
            elif parsed is not None:
                kind, path, reason = parsed
                blocks.append(Block(kind=kind, code=code, line=i + 2, path=path, reason=reason, doc=name))
        elif marker is not None and parsed is not None:
            if parsed[0] not in SHELL_MARKERS:
                problems.append(
                    f"{name}:{marker[0]}: readme-test marker before a {lang or 'plain'} block "
                    f"(file=, client and skip mark python blocks; {CLI_MARKER}, {DA_CLI_MARKER} and "
                    f"{SYNOPSIS_MARKER} mark sh blocks)"
                )
            elif lang not in SHELL_LANGS:
                problems.append(f"{name}:{marker[0]}: a {parsed[0]} marker before a {lang or 'plain'} block, not sh")
            elif parsed[0] != SYNOPSIS_MARKER:
                cli_blocks.append(_split_commands(code, i + 2, name, problems, parsed[0]))
        elif marker is None and strict_cli and lang in SHELL_LANGS and _runs_durable_agents(code):
            problems.append(
                f"{name}:{i + 1}: sh block of durable-agents commands without a readme-test marker "
                f'(<!-- readme-test: {DA_CLI_MARKER} --> to run it, or {SYNOPSIS_MARKER} reason="…" if it is '
                "not meant to be typed as it is)"
            )
        marker = None
        i = end + 1
    if marker is not None:
        problems.append(no_block_after(marker))
    return blocks, cli_blocks, problems


def parse(text: str, name: str = "README.md") -> list[Block]:
    """Every Python block of ``text`` with its marker (and every ``file=`` block of another
    language); raises ``ReadmeMarkerError`` listing all problems."""
    blocks, _, problems = _scan(text, name)
    if problems:
        raise ReadmeMarkerError("\n".join(problems))
    return blocks


def parse_pages(pages: list[Path], root: Path) -> list[Block]:
    """The Python blocks of several pages that make one project, in the order of ``pages``
    (each named by its path under ``root``); raises ``ReadmeMarkerError`` listing every problem."""
    blocks: list[Block] = []
    problems: list[str] = []
    for page in pages:
        found, _, wrong = _scan(page.read_text(), page.relative_to(root).as_posix())
        blocks += found
        problems += wrong
    if problems:
        raise ReadmeMarkerError("\n".join(problems))
    return blocks


def temporal_cli_blocks(text: str, name: str = "README.md") -> list[CliBlock]:
    """The ``temporal-cli`` blocks of a Markdown text, each as its list of commands (shell-split:
    backslash-continued lines joined, ``# comments`` dropped); raises ``ReadmeMarkerError``
    listing every marker problem of the text."""
    _, cli_blocks, problems = _scan(text, name)
    if problems:
        raise ReadmeMarkerError("\n".join(problems))
    return [b for b in cli_blocks if b.kind == CLI_MARKER]


def cli_blocks(text: str, name: str = "README.md") -> list[CliBlock]:
    """The ``cli`` blocks of a Markdown text, each as its list of ``durable-agents`` commands;
    raises ``ReadmeMarkerError`` listing every marker problem, an unmarked sh block of
    ``durable-agents`` commands among them."""
    _, found, problems = _scan(text, name, strict_cli=True)
    if problems:
        raise ReadmeMarkerError("\n".join(problems))
    return [b for b in found if b.kind == DA_CLI_MARKER]


def compile_block(block: Block, filename: str) -> types.CodeType:
    """The block's code, its line numbers those of its page (tracebacks point there)."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if block.kind == "client" else 0
    return compile("\n" * (block.line - 1) + block.code, filename, "exec", flags=flags, dont_inherit=True)


def write_project(blocks: list[Block], project: Path) -> list[Path]:
    """Write the ``file=`` blocks under ``project``; two blocks may not claim one path."""
    written: list[Path] = []
    for block in blocks:
        if block.kind != "file":
            continue
        target = project / (block.path or "")
        if target in written:
            raise ReadmeMarkerError(f"two blocks are file={block.path} (the second on {block.doc}:{block.line})")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code)
        written.append(target)
    return written


# -- the client process ---------------------------------------------------------------
def _summary(value: Any) -> Any:
    """A JSON-able view of what a block left behind (pydantic models dumped)."""
    from pydantic import BaseModel

    return value.model_dump(mode="json") if isinstance(value, BaseModel) else None


async def _run_client(pages: list[Path], root: Path, trace_path: Path, block_timeout: float) -> None:
    blocks = parse_pages(pages, root)
    for block in blocks:
        if block.kind == "file" and block.is_python:
            importlib.import_module(block.module)  # a module no worker loads must import too
    namespace: dict[str, Any] = {"__name__": "__readme__", "__builtins__": __builtins__}
    trace: dict[str, Any] = {"blocks": []}
    for block in (b for b in blocks if b.kind == "client"):
        entry: dict[str, Any] = {"doc": block.doc, "line": block.line, "code": block.code}
        trace["blocks"].append(entry)
        run = types.FunctionType(compile_block(block, str(root / block.doc)), namespace)()
        if inspect.isawaitable(run):
            await asyncio.wait_for(run, block_timeout)
        entry["result"] = _summary(namespace.get("result"))
        trace_path.write_text(json.dumps(trace, indent=1, default=str))
    trace["namespace"] = {
        name: dumped
        for name, value in namespace.items()
        if not name.startswith("_") and (dumped := _summary(value)) is not None
    }
    trace_path.write_text(json.dumps(trace, indent=1, default=str))


async def _run_plain(spec: str, address: str, task_queue: str, session_id: str, text: str, timeout: float) -> dict:
    """Run the docs' plain-temporalio worker entry point and one run through it."""
    from temporalio.client import Client

    from durable_agents import AgentClient, DurableAgentsPlugin
    from durable_agents.checkpoint import SqliteStore

    module, _, attr = spec.partition(":")
    run_worker = getattr(importlib.import_module(module), attr)
    worker = asyncio.ensure_future(run_worker(address, task_queue))
    try:
        client = await Client.connect(address, plugins=[DurableAgentsPlugin()])
        agents = AgentClient(client, SqliteStore(".durable-agents/store.db"), task_queue)
        send = asyncio.ensure_future(agents.send("booker", text, session_id=session_id))
        done, _ = await asyncio.wait({send, worker}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if send not in done:
            if worker in done:
                worker.result()  # raises what stopped the worker
            raise TimeoutError(f"no outcome for {session_id} within {timeout} s")
        return send.result().model_dump(mode="json")
    finally:
        worker.cancel()  # Worker.run() shuts the worker down when cancelled
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(worker, 30)


def main(argv: list[str]) -> int:
    """``client ROOT PAGES TRACE TASK_QUEUE [--plain MODULE:FUNC SESSION TEXT]`` (cwd = the project;
    PAGES: the pages' paths under ROOT, joined by ``os.pathsep``)."""
    root, trace_path, task_queue = Path(argv[0]), Path(argv[2]), argv[3]
    pages = [root / page for page in argv[1].split(os.pathsep)]
    from durable_agents import AgentClient

    # The pages connect with the default task queue; the test's worker has a
    # fresh one, so no other worker of the session's server takes its runs.
    AgentClient.connect.__func__.__kwdefaults__["task_queue"] = task_queue

    async def everything() -> None:
        await _run_client(pages, root, trace_path, block_timeout=90)
        if len(argv) > 4 and argv[4] == "--plain":
            address = os.environ["TEMPORAL_ADDRESS"]
            plain = await _run_plain(argv[5], address, f"{task_queue}-plain", argv[6], argv[7], timeout=90)
            trace = json.loads(trace_path.read_text())
            trace["plain"] = plain
            trace_path.write_text(json.dumps(trace, indent=1, default=str))

    try:
        asyncio.run(everything())
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # like the CLI: Temporal's core threads may abort a finalizing interpreter
