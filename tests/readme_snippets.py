"""The README's Python blocks, as a test reads and runs them.

Each ```python block in the README is preceded (blank lines aside) by a marker:

    <!-- readme-test: file=myapp/agents.py -->      a module of the user's project
    <!-- readme-test: client -->                     client code, run in order
    <!-- readme-test: skip reason="why" -->          a fragment that cannot run alone

An unmarked block, a marker without a block, or a skip without a reason is an
error, so a new snippet cannot go untested by accident.

Run as a script (``python -P tests/readme_snippets.py …``, cwd = the project),
this module is the client process: it imports every ``file=`` module, then runs
the ``client`` blocks in order in one namespace with top-level-await semantics
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
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*readme-test:(?P<args>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    kind: str  # "file" | "client" | "skip"
    code: str
    line: int
    """The README line of the block's first line of code (1-based)."""
    path: str | None = None
    reason: str | None = None

    @property
    def module(self) -> str:
        parts = list(PurePosixPath(self.path or "").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)


class ReadmeMarkerError(ValueError):
    """The README's blocks are not all marked correctly; the message lists each problem."""


def _parse_marker(args: str, where: str) -> tuple[str, str | None, str | None]:
    try:
        words = shlex.split(args)
    except ValueError as e:
        raise ReadmeMarkerError(f"{where}: unreadable readme-test marker ({e})") from None
    if words == ["client"]:
        return "client", None, None
    if words and words[0] == "skip":
        fields = dict(w.partition("=")[::2] for w in words[1:])
        reason = fields.get("reason", "").strip()
        if set(fields) != {"reason"} or not reason:
            raise ReadmeMarkerError(f'{where}: a skip needs a reason: <!-- readme-test: skip reason="…" -->')
        return "skip", None, reason
    if len(words) == 1 and words[0].startswith("file="):
        path = words[0][len("file=") :]
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or pure.suffix != ".py":
            raise ReadmeMarkerError(f"{where}: file= must be a relative path to a .py file, got {path!r}")
        return "file", path, None
    raise ReadmeMarkerError(
        f'{where}: unknown readme-test marker {args.strip()!r}: use file=<path>, client or skip reason="…"'
    )


def parse(text: str, name: str = "README.md") -> list[Block]:
    """Every Python block of ``text`` with its marker; raises ``ReadmeMarkerError`` listing all problems."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    marker: tuple[int, str] | None = None  # (line number, args) of a marker not yet used
    i = 0
    while i < len(lines):
        line = lines[i]
        found = MARKER.match(line)
        if found:
            if marker is not None:
                problems.append(f"{name}:{marker[0]}: readme-test marker without a python block after it")
            marker = (i + 1, found["args"])
            i += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            if line.strip() and marker is not None:
                problems.append(f"{name}:{marker[0]}: readme-test marker without a python block after it")
                marker = None
            i += 1
            continue
        indent, ticks, lang = fence["indent"], fence["fence"], fence["lang"].lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        body = [raw[len(indent) :] if raw.startswith(indent) else raw.lstrip() for raw in lines[i + 1 : end]]
        code = "\n".join(body) + "\n"
        if lang in PYTHON_LANGS:
            where = f"{name}:{i + 1}"
            if marker is None:
                problems.append(
                    f"{where}: python block without a readme-test marker "
                    '(<!-- readme-test: file=<path> | client | skip reason="…" --> on the line before it)'
                )
            else:
                try:
                    kind, path, reason = _parse_marker(marker[1], f"{name}:{marker[0]}")
                    blocks.append(Block(kind=kind, code=code, line=i + 2, path=path, reason=reason))
                except ReadmeMarkerError as e:
                    problems.append(str(e))
        elif marker is not None:
            problems.append(f"{name}:{marker[0]}: readme-test marker before a {lang or 'plain'} block")
        marker = None
        i = end + 1
    if marker is not None:
        problems.append(f"{name}:{marker[0]}: readme-test marker without a python block after it")
    if problems:
        raise ReadmeMarkerError("\n".join(problems))
    return blocks


def compile_block(block: Block, filename: str) -> types.CodeType:
    """The block's code, its line numbers those of the README (tracebacks point there)."""
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
            raise ReadmeMarkerError(f"two README blocks are file={block.path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code)
        written.append(target)
    return written


# -- the client process ---------------------------------------------------------------
def _summary(value: Any) -> Any:
    """A JSON-able view of what a block left behind (pydantic models dumped)."""
    from pydantic import BaseModel

    return value.model_dump(mode="json") if isinstance(value, BaseModel) else None


async def _run_client(readme: Path, trace_path: Path, block_timeout: float) -> None:
    blocks = parse(readme.read_text(), readme.name)
    for block in blocks:
        if block.kind == "file":
            importlib.import_module(block.module)  # a module no worker loads must import too
    namespace: dict[str, Any] = {"__name__": "__readme__", "__builtins__": __builtins__}
    trace: dict[str, Any] = {"blocks": []}
    for block in (b for b in blocks if b.kind == "client"):
        entry: dict[str, Any] = {"line": block.line, "code": block.code}
        trace["blocks"].append(entry)
        run = types.FunctionType(compile_block(block, str(readme)), namespace)()
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
    """Run the README's plain-temporalio worker entry point and one run through it."""
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
    """``client README TRACE TASK_QUEUE [--plain MODULE:FUNC SESSION TEXT]`` (cwd = the project)."""
    readme, trace_path, task_queue = Path(argv[0]), Path(argv[1]), argv[2]
    from durable_agents import AgentClient

    # The README connects with the default task queue; the test's worker has a
    # fresh one, so no other worker of the session's server takes its runs.
    AgentClient.connect.__func__.__kwdefaults__["task_queue"] = task_queue

    async def everything() -> None:
        await _run_client(readme, trace_path, block_timeout=90)
        if len(argv) > 3 and argv[3] == "--plain":
            address = os.environ["TEMPORAL_ADDRESS"]
            plain = await _run_plain(argv[4], address, f"{task_queue}-plain", argv[5], argv[6], timeout=90)
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
