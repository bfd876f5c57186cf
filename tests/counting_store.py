"""A real SQLite store that counts what the worker asks of it: round trips
(public calls, a call made inside another one not counted again) and the
messages it reads back from rows (each one a pydantic parse)."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from typing import Any

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Message

COUNTED = (
    "load",
    "load_header",
    "load_messages",
    "load_transcript_tail",
    "append",
    "append_new",
    "save",
    "tool_started",
    "tool_result",
    "begin_tool_call",
    "record_tool_result",
    "run_input",
    "drop_run_input",
    "put_run_input",
    "history",
)


class CountingStore(SqliteStore):
    """``calls``: round trips by method; ``parsed``: messages read from rows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.parsed = 0
        self._count_lock = threading.Lock()
        self._depth = threading.local()
        super().__init__(*args, **kwargs)

    def reset(self) -> None:
        with self._count_lock:
            self.calls.clear()
            self.parsed = 0
            self._commits_at_reset = self._commits

    def transactions(self) -> int:
        """Transactions committed since the last reset (a read's or a write's): each is a round
        trip to SQLite's locks and, for a write, a commit to its log."""
        return self._commits - getattr(self, "_commits_at_reset", 0)

    def round_trips(self) -> int:
        return sum(self.calls.values())

    def _read_messages(self, session_id: str, transcript_id: int, start: int, end: int) -> list[Message]:
        read = super()._read_messages(session_id, transcript_id, start, end)
        with self._count_lock:
            self.parsed += len(read)
        return read

    def tool_result(self, session_id: str, position: int) -> Message | None:
        found = super().tool_result(session_id, position)
        if found is not None:
            with self._count_lock:
                self.parsed += 1
        return found


def _counted(name: str) -> Any:
    inner = CountingStore.__dict__.get(name) or getattr(SqliteStore, name)

    @functools.wraps(inner)
    def call(self: CountingStore, *args: Any, **kwargs: Any) -> Any:
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            with self._count_lock:
                self.calls[name] += 1
        self._depth.n = depth + 1
        try:
            return inner(self, *args, **kwargs)
        finally:
            self._depth.n = depth

    return call


for _name in COUNTED:
    if hasattr(SqliteStore, _name):
        setattr(CountingStore, _name, _counted(_name))
