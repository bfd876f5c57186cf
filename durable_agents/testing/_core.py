"""Crash-harness plumbing shared by worker subprocesses and the test process.

Everything that must survive a SIGKILL is written to JSON-lines files in one
log directory (``DURABLE_AGENTS_TESTING_DIR``), one small ``O_APPEND`` write per
record, so the logs of every worker incarnation end up in the same files:

- ``side_effects.jsonl``: what test tools did: ``{tool, session, tool_call_id,
  attempt, event: start|end, safe, recorded_before, pid}``;
- ``provider_calls.jsonl``: every model call: ``{session, position, step,
  model, stored_before, pid}`` (``position`` = messages the model saw);
- ``kills.jsonl``: every kill a worker did to itself at a crash window.

``recorded_before`` / ``stored_before`` are read from the worker's own store
at the moment of the call: ``True`` means a recorded tool result was executed
again, or a checkpointed model turn was generated again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from durable_agents.agent.tools import ToolContext
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.providers.base import ModelProvider, ModelRequest, ModelResponse
from durable_agents.providers.registry import BUILTIN_PROVIDERS, ProviderRegistry

LOG_DIR_ENV = "DURABLE_AGENTS_TESTING_DIR"
WINDOW_ENV = "DURABLE_AGENTS_CRASH_WINDOW"
SIDE_EFFECTS = "side_effects.jsonl"
PROVIDER_CALLS = "provider_calls.jsonl"
KILLS = "kills.jsonl"


class CrashWindow(StrEnum):
    """Named moments at which a crash-test worker kills itself (once per session)."""

    AFTER_MODEL_TURN_STORED = "after-model-turn-stored"
    """The assistant turn with tool calls is committed; no tool has started."""
    DURING_TOOL = "during-tool"
    """A tool is running (test tools call :func:`crash_point` halfway)."""
    AFTER_TOOL_BEFORE_RECORD = "after-tool-before-record"
    """A tool returned; its result is not recorded."""
    BETWEEN_RESULTS = "between-results"
    """The first result of a multi-call turn is committed, the next is not."""
    AFTER_LAST_RESULT = "after-last-result"
    """Every result of the turn is committed; the next model call has not happened."""
    DURING_CHECKPOINT_WRITE = "during-checkpoint-write"
    """Inside the store transaction that records a tool result, before its commit."""
    AFTER_INPUT_STORED = "after-input-stored"
    """The run's user input is committed (a store activity); no model call yet."""
    BEFORE_SUBAGENT_START = "before-subagent-start"
    """A sub-agent call's task is in the store (the start activity); its child run has not started."""
    AFTER_SUBAGENT_FINISHED = "after-subagent-finished"
    """A sub-agent's run has finished; the parent has not recorded the call's result."""
    AFTER_CONTEXT_SUMMARY_STORED = "after-context-summary-stored"
    """A ``SummarizeOlder`` policy's summary is committed; the turn's own model call has not happened."""


_state: dict[str, Any] = {"log_dir": None, "window": None, "store": None}


def configure(
    *, log_dir: str | Path | None = None, window: CrashWindow | str | None = None, store: CheckpointStore | None = None
) -> None:
    """Set the log directory, the crash window and the worker's store in this process
    (a worker subprocess started by :class:`WorkerProcess` does this itself)."""
    if log_dir is not None:
        _state["log_dir"] = Path(log_dir)
        (Path(log_dir) / "markers").mkdir(parents=True, exist_ok=True)
    if window is not None:
        _state["window"] = CrashWindow(window) if window else None
    if store is not None:
        _state["store"] = store


@contextlib.contextmanager
def configured(**settings: Any) -> Iterator[None]:
    """:func:`configure` for a block (an in-process worker in a test), then restore."""
    saved = dict(_state)
    configure(**settings)
    try:
        yield
    finally:
        _state.update(saved)


def log_dir() -> Path | None:
    found = _state["log_dir"] or os.environ.get(LOG_DIR_ENV)
    return Path(found) if found else None


def crash_window() -> CrashWindow | None:
    found = _state["window"] or os.environ.get(WINDOW_ENV)
    return CrashWindow(found) if found else None


def append_record(name: str, record: Mapping[str, Any]) -> None:
    """One JSON line, one ``write``: whole lines survive a SIGKILL of any writer."""
    folder = log_dir()
    if folder is None:
        return
    line = (json.dumps({**record, "pid": os.getpid(), "t": time.time()}) + "\n").encode()
    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_records(folder: str | Path, name: str) -> list[dict[str, Any]]:
    path = Path(folder) / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def crash_point(window: CrashWindow, session_id: str, **detail: Any) -> None:
    """SIGKILL this process if ``window`` is the armed one and this session was not
    killed there yet (a marker file keeps the fresh worker from killing itself again)."""
    folder = log_dir()
    if crash_window() != window or folder is None:
        return
    marker = folder / "markers" / f"{quote(session_id, safe='')}.{window.value}"  # a sub-agent's id has a /
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return
    append_record(KILLS, {"window": window.value, "session": session_id, **detail})
    os.kill(os.getpid(), signal.SIGKILL)


def record_side_effect(tool: str, ctx: ToolContext, event: str, *, safe: bool, **extra: Any) -> None:
    """Log a test tool's side effect (``start`` / ``end``) across processes."""
    store, recorded = _state["store"], None
    if store is not None and event == "start" and ctx.position is not None:
        recorded = store.tool_result(ctx.session_id, ctx.position) is not None
    append_record(
        SIDE_EFFECTS,
        {
            "tool": tool,
            "session": ctx.session_id,
            "tool_call_id": ctx.tool_call_id,
            "attempt": ctx.attempt,
            "event": event,
            "safe": safe,
            "recorded_before": recorded,
            **extra,
        },
    )


async def side_effect_tool(
    tool: str, ctx: ToolContext, *, safe: bool, seconds: float = 0.0, **result: Any
) -> dict[str, Any]:
    """The body of a crash-test tool: log ``start``, work for ``seconds`` (heartbeating,
    with :data:`CrashWindow.DURING_TOOL` armed halfway), log ``end``, return a result
    naming the call and the attempt that produced it."""
    record_side_effect(tool, ctx, "start", safe=safe)
    slices = max(1, round(seconds / 0.1))
    for i in range(slices):
        if i == slices // 2:
            crash_point(CrashWindow.DURING_TOOL, ctx.session_id, tool_call_id=ctx.tool_call_id)
        await asyncio.sleep(seconds / slices)
        ctx.heartbeat()
    record_side_effect(tool, ctx, "end", safe=safe)
    return {"tool_call_id": ctx.tool_call_id, "attempt": ctx.attempt, **result}


class RecordingProvider:
    """Wraps a provider kind; logs every model call to ``provider_calls.jsonl`` before
    making it (a paid call counts even if the worker dies during it)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._inner: ModelProvider | None = None

    async def generate(self, request: ModelRequest) -> ModelResponse:
        await self._record(request)
        assert self._inner is not None
        return await self._inner.generate(request)

    async def generate_stream(self, request: ModelRequest, on_text: Callable[[str], None]) -> ModelResponse:
        """Recorded like ``generate``; streamed when the provider streams."""
        await self._record(request)
        streaming = getattr(self._inner, "generate_stream", None)
        if streaming is None:
            assert self._inner is not None
            response = await self._inner.generate(request)
            on_text(response.message.content or "")
            return response
        return await streaming(request, on_text)

    async def _record(self, request: ModelRequest) -> None:
        if self._inner is None:
            self._inner = ProviderRegistry().get(self.kind)
        position = len(request.messages) if request.position is None else request.position
        store, stored = _state["store"], None
        if store is not None:
            header = await asyncio.to_thread(store.load_header, request.session_id)
            stored = header is not None and header.message_count > position
        append_record(
            PROVIDER_CALLS,
            {
                "session": request.session_id,
                "position": position,
                "step": request.step,
                "model": f"{self.kind}:{request.model}",
                "stored_before": stored,
            },
        )


def recording_providers() -> dict[str, RecordingProvider]:
    """``providers=`` for ``build_worker``: every provider kind, recorded."""
    return {kind: RecordingProvider(kind) for kind in BUILTIN_PROVIDERS}
