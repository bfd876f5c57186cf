"""The SQL stores' event log (table ``events``, see the schema modules).

One row per event: (session, ``seq`` = its offset from 1, optional key, time,
body). Appends hold the session's write lock, so offsets are dense and keys
unique per session; a keyed event already in the log keeps its offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from durable_agents.checkpoint.events import StoredEvent
from durable_agents.checkpoint.stores._common import now

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from durable_agents.checkpoint.stores._sql import Dialect


class SqlEvents:
    dialect: ClassVar[Dialect]
    _cur: Any

    if TYPE_CHECKING:

        def _open(self, session_id: str | None = None, *, write: bool = True) -> AbstractContextManager[Any]: ...
        def _run(self, query: str, params: tuple[Any, ...] | list[Any] = ()) -> Any: ...

    def append_events(self, session_id: str, events: list[tuple[str | None, str]]) -> list[int]:
        if not events:
            return []
        at = self.dialect.to_db_time(now())
        offsets: list[int] = []
        with self._open(session_id):
            last = self._run("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()[0] or 0
            for key, body in events:
                if key is not None:
                    found = self._run(
                        "SELECT seq FROM events WHERE session_id = ? AND event_key = ?", (session_id, key)
                    ).fetchone()
                    if found is not None:
                        offsets.append(int(found[0]))
                        continue
                last += 1
                self._run(
                    "INSERT INTO events (session_id, seq, event_key, created_at, body) VALUES (?, ?, ?, ?, ?)",
                    (session_id, last, key, at, body),
                )
                offsets.append(last)
        return offsets

    def read_events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        with self._open(write=False):
            rows = self._run(
                "SELECT seq, event_key, body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (session_id, after, self.dialect.no_limit if limit is None else limit),
            ).fetchall()
        return [StoredEvent(offset=int(seq), key=key, body=body) for seq, key, body in rows]

    def last_event_offset(self, session_id: str) -> int:
        with self._open(write=False):
            row = self._run("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
        return int(row[0] or 0)

    def _delete_events(self, session_ids: list[str]) -> None:
        """Inside a write transaction: the logs of sessions that are gone."""
        if session_ids:
            self._cur.executemany(
                self.dialect.sql("DELETE FROM events WHERE session_id = ?"), [(sid,) for sid in session_ids]
            )
