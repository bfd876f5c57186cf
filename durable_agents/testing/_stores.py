"""Stores for crash tests: one that kills its worker at a crash window, one whose
writes fail. Neither needs a hook in production code."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from durable_agents.activities.tools import CANCELLED
from durable_agents.checkpoint.errors import StoreUnavailableError
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    HistoryEntry,
    Message,
    Role,
    SessionSummary,
)
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.checkpoint.stores.sqlite import SqliteStore
from durable_agents.testing._core import CrashWindow, crash_point, crash_window

T = TypeVar("T")


class CrashingSqliteStore(SqliteStore):
    """A ``SqliteStore`` that SIGKILLs its own process at the store-side crash windows.

    The window comes from ``window=`` or ``DURABLE_AGENTS_CRASH_WINDOW``; each
    session is killed at most once per window (see :func:`crash_point`).
    """

    def __init__(self, path: str | Path, *, window: CrashWindow | str | None = None, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self._window = CrashWindow(window) if window else None
        self._local = threading.local()

    @property
    def window(self) -> CrashWindow | None:
        return self._window or crash_window()

    def _crash(self, window: CrashWindow, session_id: str, **detail: Any) -> None:
        if self.window == window:
            crash_point(window, session_id, **detail)

    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        super().append(header, start, messages)
        self._after_append(header, start, messages)

    def append_new(self, header: CheckpointHeader, start: int, messages: list[Message]) -> bool:
        written = super().append_new(header, start, messages)
        if written:
            self._after_append(header, start, messages)
        return written

    def _after_append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        last = messages[-1] if messages else None
        if last is not None and last.role == Role.ASSISTANT and last.tool_calls:
            self._crash(CrashWindow.AFTER_MODEL_TURN_STORED, header.session_id, position=start)
        if last is not None and last.role == Role.USER:
            self._crash(CrashWindow.AFTER_INPUT_STORED, header.session_id, position=start)
        if last is not None and last.summary is not None:
            self._crash(CrashWindow.AFTER_CONTEXT_SUMMARY_STORED, header.session_id, position=start)

    def put_run_input(self, session_id: str, token: str, messages: list[Message]) -> None:
        super().put_run_input(session_id, token, messages)  # in a worker: only a sub-agent's task
        self._crash(CrashWindow.BEFORE_SUBAGENT_START, session_id, token=token)

    def record_tool_result(
        self, session_id: str, position: int, message: Message, batch_start: int, batch_size: int
    ) -> int:
        fresh = message.content != CANCELLED and self.tool_result(session_id, position) is None
        if fresh and '"subagentSessionId"' in (message.content or ""):
            self._crash(CrashWindow.AFTER_SUBAGENT_FINISHED, session_id, position=position)
        if fresh:
            self._crash(
                CrashWindow.AFTER_TOOL_BEFORE_RECORD, session_id, position=position, tool_call_id=message.tool_call_id
            )
        self._local.recording = fresh
        try:
            count = super().record_tool_result(session_id, position, message, batch_start, batch_size)
        finally:
            self._local.recording = False
        done = count - batch_start
        if batch_size >= 2 and 1 <= done < batch_size:
            self._crash(CrashWindow.BETWEEN_RESULTS, session_id, recorded=done)
        if done == batch_size:
            self._crash(CrashWindow.AFTER_LAST_RESULT, session_id, recorded=done)
        return count

    def _write_header(self, header: CheckpointHeader, transcript_id: int) -> None:
        super()._write_header(header, transcript_id)
        if getattr(self._local, "recording", False) and self._db.in_transaction:
            self._crash(CrashWindow.DURING_CHECKPOINT_WRITE, header.session_id, message_count=header.message_count)


WRITE_METHODS = ("append", "record_tool_result", "tool_started")


class FailingStore(CheckpointStore):
    """Wraps a store; some writes raise the real
    :class:`~durable_agents.checkpoint.errors.StoreUnavailableError` (retryable), as
    ``PostgresStore`` does when its server is down.

    - ``fail_writes=[n, …]``: the n-th write call raises (1-based, counted over
      ``methods``) — the ``crashAfterToolResults`` idea;
    - ``outage_from=n, outage_seconds=s``: from the n-th write on, every write
      raises for ``s`` seconds (a store that is down for a while);
    - ``commit_then_fail=True``: the failing write lands first, then raises
      (the write succeeded but its acknowledgement was lost).

    ``failures`` lists ``(write number, method)`` of every raised write.
    """

    def __init__(
        self,
        inner: CheckpointStore,
        *,
        fail_writes: Iterable[int] = (),
        outage_from: int | None = None,
        outage_seconds: float = 0.0,
        commit_then_fail: bool = False,
        methods: Iterable[str] = WRITE_METHODS,
    ) -> None:
        self.inner = inner
        self.history_limit, self.durable = inner.history_limit, inner.durable
        self.fail_writes, self.methods = set(fail_writes), set(methods)
        self.outage_from, self.outage_seconds, self.commit_then_fail = outage_from, outage_seconds, commit_then_fail
        self.writes = 0
        self.failures: list[tuple[int, str]] = []
        self._down_until: float | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FailingStore({self.inner!r})"

    @property
    def store_id(self) -> str:
        return self.inner.store_id

    @property
    def location(self) -> str:
        return self.inner.location

    def _fails(self, method: str) -> int | None:
        with self._lock:
            if method not in self.methods:
                return None
            self.writes += 1
            n, now = self.writes, time.monotonic()
            if self.outage_from is not None and n >= self.outage_from and self._down_until is None:
                self._down_until = now + self.outage_seconds
            down = self._down_until is not None and now < self._down_until
            return n if n in self.fail_writes or down else None

    def _write(self, method: str, fn: Callable[..., T], *args: Any) -> T:
        n = self._fails(method)
        if n is not None and not self.commit_then_fail:
            self.failures.append((n, method))
            raise StoreUnavailableError(f"store unavailable: write #{n} ({method}) failed")
        result = fn(*args)
        if n is not None:
            self.failures.append((n, method))
            raise StoreUnavailableError(f"store unavailable: write #{n} ({method}) landed, its reply was lost")
        return result

    # writes
    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        self._write("append", self.inner.append, header, start, messages)

    def record_tool_result(
        self, session_id: str, position: int, message: Message, batch_start: int, batch_size: int
    ) -> int:
        return self._write(
            "record_tool_result", self.inner.record_tool_result, session_id, position, message, batch_start, batch_size
        )

    def tool_started(self, session_id: str, position: int) -> int:
        return self._write("tool_started", self.inner.tool_started, session_id, position)

    # everything else passes through
    def load_header(self, session_id: str) -> CheckpointHeader | None:
        return self.inner.load_header(session_id)

    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        return self.inner.load_messages(session_id, start, end)

    def tool_result(self, session_id: str, position: int) -> Message | None:
        return self.inner.tool_result(session_id, position)

    def delete(self, session_id: str, keep_history: bool = False) -> None:
        self.inner.delete(session_id, keep_history)

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        return self.inner.history(session_id, limit)

    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]:
        return self.inner.list_sessions(status=status, agent=agent)

    def prune(self, older_than: timedelta | datetime, **options: Any) -> int:
        return self.inner.prune(older_than, **options)

    def close(self) -> None:
        self.inner.close()
