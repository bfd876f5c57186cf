"""Live progress of a run on stderr while a CLI command waits for it.

Every ``interval`` seconds the run's workflow is asked where it stands: its
current details (``step 2 · tool charge_card``, ``step 2 · awaiting approval …``,
set by the workflow and shown by the Temporal UI too) and, when those are not
available, its ``run_state`` query. Only changes are printed. A failed or slow
query (no worker yet, the run just closed) is skipped, never an error.

Whether progress is shown or not, a wait that lasts longer than a few seconds
checks that some worker polls the task queue, and says so once on stderr when
none does (:class:`NoWorkerWarning`); the wait goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from datetime import timedelta
from typing import TextIO, cast

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from durable_agents._workers import worker_polling
from durable_agents.activities.contracts import RunState

NO_WORKER_AFTER = 5.0
"""Seconds a wait lasts before it checks that a worker polls the task queue."""
METADATA_QUERY = "__temporal_workflow_metadata"
QUERY_TIMEOUT = timedelta(seconds=2)


class Progress:
    """``async with Progress(client, session_id, enabled=…):`` around a wait."""

    def __init__(
        self,
        temporal: Client,
        session_id: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 0.5,
    ) -> None:
        self.temporal = temporal
        self.session_id = session_id
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.interval = interval
        self.shown: list[str] = []
        self._task: asyncio.Task | None = None
        self._started = 0.0

    async def __aenter__(self) -> Progress:
        if self.enabled:
            self._started = time.monotonic()
            self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def snapshot(self) -> str | None:
        """Where the run stands now, as one line (None when it cannot be asked)."""
        handle = self.temporal.get_workflow_handle(self.session_id)
        try:
            meta = await handle.query(METADATA_QUERY, result_type=WorkflowMetadata, rpc_timeout=QUERY_TIMEOUT)
            if meta.current_details:
                return meta.current_details
        except Exception:  # noqa: BLE001 - progress is best effort
            pass
        try:
            state = await handle.query("run_state", result_type=cast(type, RunState | None), rpc_timeout=QUERY_TIMEOUT)
        except Exception:  # noqa: BLE001
            return None
        if state is None:
            return None
        pending = state.pending_tool_calls
        doing = f"tools {', '.join(c.name for c in pending)}" if pending else "starting"
        return f"step {state.step_index} · {doing}"

    async def _poll(self) -> None:
        last = None
        while True:
            try:
                line = await self.snapshot()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                line = None
            if line and line != last:
                last = line
                self.shown.append(line)
                elapsed = time.monotonic() - self._started
                try:
                    print(f"  [{elapsed:5.1f}s] {self.session_id}: {line}", file=self.stream, flush=True)
                except BrokenPipeError:  # stderr's reader went away: the wait goes on without progress
                    return
            await asyncio.sleep(self.interval)


class NoWorkerWarning:
    """``async with NoWorkerWarning(client, task_queue, line):`` around a wait.

    After ``after`` seconds, and every ``every`` seconds from then on, asks
    Temporal whether a worker polls ``task_queue``; prints ``line`` when none
    does (once, and again only if a worker came and went). Best effort: a
    failed check is skipped.
    """

    def __init__(
        self,
        temporal: Client,
        task_queue: str,
        line: str,
        *,
        after: float = NO_WORKER_AFTER,
        every: float = 10.0,
        stream: TextIO | None = None,
    ) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.line = line
        self.after = after
        self.every = every
        self.stream = stream or sys.stderr
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> NoWorkerWarning:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        await asyncio.sleep(self.after)
        warned = False
        while True:
            try:
                polling = await worker_polling(self.temporal, self.task_queue)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - e.g. not allowed to describe the queue
                polling = None
            if polling is False and not warned:
                try:
                    print(self.line, file=self.stream, flush=True)
                except BrokenPipeError:
                    return
            if polling is not None:
                warned = not polling
            await asyncio.sleep(self.every)
