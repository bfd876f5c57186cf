"""A crash harness for durable agents: prove the guarantees with real process kills.

Use it for your own agents and tools:

1. Tools log their side effects with :func:`record_side_effect` (or run as
   :func:`side_effect_tool`), so "did it run twice?" is answerable across processes.
2. :class:`WorkerProcess` runs ``python -m durable_agents.testing worker`` — the
   regular ``build_worker`` over a :class:`CrashingSqliteStore` and recorded
   model providers — that SIGKILLs itself at a :class:`CrashWindow` (once per
   session), or that you kill at any moment with :meth:`WorkerProcess.kill`.
   Start a fresh one with :meth:`WorkerProcess.restart`; it finishes the run.
3. :func:`check_guarantees` checks the final transcript against the logs;
   :func:`infer_window` says where a kill landed, from the store state.

:func:`assert_replay` replays a dataset of recorded runs (``durable-agents export``)
against your changed agent and fails with the regression report past a threshold.

:class:`FailingStore` wraps any store so some writes raise (the n-th write, or
every write for a while), for "the store was unavailable" tests.

    worker = WorkerProcess(["app.agents:booker"], address=addr, store_url="sqlite:///s.db",
                           task_queue="crash", log_dir=logs, crash_window=CrashWindow.DURING_TOOL)
    await worker.start_ready(temporal)
    handle = await client.start("booker", "Book a table", session_id="s1")
    await worker.wait_exit()              # killed itself while the tool ran
    await worker.restart(temporal)        # a fresh worker finishes the run
    result = await client.result("s1", handle)
    check_guarantees(client.store.load("s1"), logs, logs)

A whole test (its pytest fixture and settings too), run as written by the project's own
tests: "Test your own agents against crashes" in docs/how-to/testing.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from durable_agents.activities.transcript import pending_tool_calls
from durable_agents.checkpoint.errors import StoreUnavailableError  # what FailingStore raises
from durable_agents.checkpoint.format import CheckpointStatus, Role
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.devserver import find_temporal_binary, find_test_server_binary
from durable_agents.testing._checks import GuaranteeSummary, GuaranteeViolation, check_guarantees
from durable_agents.testing._core import (
    KILLS,
    LOG_DIR_ENV,
    PROVIDER_CALLS,
    SIDE_EFFECTS,
    WINDOW_ENV,
    CrashWindow,
    RecordingProvider,
    configure,
    configured,
    crash_point,
    read_records,
    record_side_effect,
    recording_providers,
    side_effect_tool,
)
from durable_agents.testing._stores import CrashingSqliteStore, FailingStore
from durable_agents.testing._worker import WorkerProcess

if TYPE_CHECKING:
    from durable_agents.testing._replay import assert_replay

__all__ = [
    "KILLS",
    "LOG_DIR_ENV",
    "PROVIDER_CALLS",
    "SIDE_EFFECTS",
    "WINDOW_ENV",
    "CrashWindow",
    "CrashingSqliteStore",
    "FailingStore",
    "GuaranteeSummary",
    "GuaranteeViolation",
    "RecordingProvider",
    "StoreUnavailableError",
    "WorkerProcess",
    "assert_replay",
    "check_guarantees",
    "configure",
    "configured",
    "crash_point",
    "find_temporal_binary",
    "find_test_server_binary",
    "infer_window",
    "read_records",
    "record_side_effect",
    "recording_providers",
    "side_effect_tool",
]


def infer_window(
    store: CheckpointStore, session_id: str, log_dir: str | Path, pid: int, since: float | None = None
) -> str:
    """Where a kill of worker ``pid`` landed for ``session_id``, read from the store
    (and the logs) right after the kill: a :class:`CrashWindow` value, or
    ``before-run-start``, ``during-model-call``, ``finished``,
    ``awaiting-approval``, or ``idle`` (this incarnation, started at ``since``, had
    done nothing for the session yet: the run waited for a timeout or a retry).
    A kill inside a write transaction is not visible in committed state; it reads
    as the window before the write.
    """
    header = store.load_header(session_id)
    if header is None:
        return "before-run-start"
    if header.status != CheckpointStatus.IN_PROGRESS:
        return str(header.status.value)
    messages = store.load_messages(session_id, 0, header.message_count)
    effects = [r for r in read_records(log_dir, SIDE_EFFECTS) if r["session"] == session_id and r["pid"] == pid]
    model = [r for r in read_records(log_dir, PROVIDER_CALLS) if r["session"] == session_id and r["pid"] == pid]
    saved = header.updated_at.timestamp() if header.updated_at else 0.0
    if since is not None and not effects and not model and saved < since:
        return "idle"
    pending, _ = pending_tool_calls(messages)
    ids = {c.id for c in pending}
    if pending:
        if any(r["event"] == "end" and r["tool_call_id"] in ids for r in effects):
            return CrashWindow.AFTER_TOOL_BEFORE_RECORD.value
        if any(r["event"] == "start" and r["tool_call_id"] in ids for r in effects):
            return CrashWindow.DURING_TOOL.value
        if messages[-1].role == Role.ASSISTANT:
            return CrashWindow.AFTER_MODEL_TURN_STORED.value
        return CrashWindow.BETWEEN_RESULTS.value
    if any(r["position"] == len(messages) for r in model):
        return "during-model-call"
    if messages and messages[-1].role == Role.TOOL:
        return CrashWindow.AFTER_LAST_RESULT.value
    return CrashWindow.AFTER_INPUT_STORED.value


def __getattr__(name: str) -> Any:
    # loaded on first use: a crash-test worker process need not import the client and the replay worker
    if name != "assert_replay":
        raise AttributeError(f"module 'durable_agents.testing' has no attribute {name!r}")
    from durable_agents.testing._replay import assert_replay

    return assert_replay
