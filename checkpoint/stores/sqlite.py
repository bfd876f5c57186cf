"""SQLite store: the embedded default.

Layout (schema migrations are append-only, so older files keep opening):

- ``sessions``: one row per session, the latest checkpoint header.
- ``messages``: transcript rows keyed by (session, transcript, position).
  Saves that only add messages write only the new rows; history entries
  point at a transcript and a message count, so they share rows instead of
  copying the transcript (history storage is linear in session length).
  A save that changes an earlier message starts a new transcript id.
- ``checkpoint_history``: the ring of the newest ``history_limit`` saves.
- ``tool_calls``: start markers that make at-most-once tools detectable.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    HistoryEntry,
    Message,
    SessionSummary,
)
from durable_agents.checkpoint.stores._common import batch_prefix, history_entries, past_batch, session_list_query
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore
from durable_agents.checkpoint.stores.sqlite_schema import MIGRATIONS


def _now() -> datetime:
    return datetime.now(UTC)


def _header_key(header: CheckpointHeader) -> str:
    """The header as stored, without its timestamp (so retries compare equal)."""
    return header.model_copy(update={"updated_at": None}).to_json()


class SqliteStore(CheckpointStore):
    def __init__(self, path: str | Path, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.path = str(path)
        self.history_limit = history_limit
        self._lock = threading.RLock()
        if self.path != ":memory:":
            _create_private_file(Path(self.path))
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreCorruptError(
                f"SQLite store {self.path} cannot be opened ({e}); it is not a durable-agents "
                "store or it is damaged: move it aside and start with a fresh file, or restore a backup"
            ) from e

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, history_limit={self.history_limit})"

    # -- schema -----------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self._db.execute("SELECT version FROM schema_version").fetchone()
            current = row[0] if row else 0
            for version in range(current, len(MIGRATIONS)):
                with self._transaction():
                    for statement in MIGRATIONS[version].split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                    self._db.execute("DELETE FROM schema_version")
                    self._db.execute("INSERT INTO schema_version VALUES (?)", (version + 1,))

    # -- reads ------------------------------------------------------------
    def load_header(self, session_id: str) -> CheckpointHeader | None:
        with self._lock:
            row = self._db.execute("SELECT header FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        if row is None:
            return None
        return self._parse_header(row[0], session_id)

    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        with self._lock:
            row = self._db.execute(
                "SELECT transcript_id, message_count FROM sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return []
            transcript_id, count = row
            return self._read_messages(session_id, transcript_id, start, count if end is None else end)

    def _read_messages(self, session_id: str, transcript_id: int, start: int, end: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT position, body FROM messages WHERE session_id = ? AND transcript_id = ?"
            " AND position >= ? AND position < ? ORDER BY position",
            (session_id, transcript_id, start, end),
        ).fetchall()
        if len(rows) != max(end - start, 0):
            raise StoreCorruptError(
                f"session {session_id!r} in {self.path}: expected messages {start}..{end - 1}, "
                f"found {len(rows)}; the store is damaged"
            )
        return [Message.model_validate_json(body) for _, body in rows]

    def _parse_header(self, raw: str, session_id: str) -> CheckpointHeader:
        try:
            return CheckpointHeader.model_validate_json(raw)
        except ValueError as e:
            raise StoreCorruptError(f"checkpoint of session {session_id!r} in {self.path} cannot be read: {e}") from e

    # -- writes -----------------------------------------------------------
    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        if header.message_count != start + len(messages):
            raise ValueError(
                f"header.message_count={header.message_count} but start+len(messages)={start + len(messages)}"
            )
        saved_at = header.updated_at or _now()
        header = header.model_copy(update={"updated_at": saved_at})
        bodies = [m.to_json() for m in messages]
        with self._transaction():
            transcript_id = self._write_messages(header.session_id, start, bodies)
            self._write_header(header, transcript_id)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction (re-entrant: inner uses join the outer one)."""
        with self._lock:
            if self._db.in_transaction:
                yield
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _write_messages(self, session_id: str, start: int, bodies: list[str]) -> int:
        row = self._db.execute(
            "SELECT transcript_id, message_count FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            if start > 0:
                raise ValueError(f"session {session_id!r} does not exist; cannot write at {start}")
            transcript_id = self._fresh_transcript_id(session_id)
        else:
            transcript_id, count = row
            if start > count:
                raise ValueError(f"session {session_id!r} has {count} messages; cannot write at {start}")
            # Rows past the current count may still be read by older history
            # entries (after a shorter save), so compare every row we would replace.
            overlap = self._db.execute(
                "SELECT position, body FROM messages WHERE session_id = ? AND transcript_id = ?"
                " AND position >= ? AND position < ? ORDER BY position",
                (session_id, transcript_id, start, start + len(bodies)),
            ).fetchall()
            if any(body != bodies[pos - start] for pos, body in overlap):
                # An earlier message changes: keep the old rows for history entries.
                transcript_id = self._copy_prefix(session_id, transcript_id, start)
        self._db.executemany(
            "INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?)",
            [(session_id, transcript_id, start + i, body) for i, body in enumerate(bodies)],
        )
        return transcript_id

    def _fresh_transcript_id(self, session_id: str) -> int:
        row = self._db.execute("SELECT MAX(transcript_id) FROM messages WHERE session_id = ?", (session_id,)).fetchone()
        return (row[0] or 0) + 1

    def _copy_prefix(self, session_id: str, transcript_id: int, end: int) -> int:
        new_id = self._fresh_transcript_id(session_id)
        self._db.execute(
            "INSERT INTO messages SELECT session_id, ?, position, body FROM messages"
            " WHERE session_id = ? AND transcript_id = ? AND position < ?",
            (new_id, session_id, transcript_id, end),
        )
        return new_id

    def _write_header(self, header: CheckpointHeader, transcript_id: int) -> None:
        sid = header.session_id
        saved_at = header.updated_at.timestamp()  # type: ignore[union-attr]
        key = _header_key(header)
        self._db.execute(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                sid,
                transcript_id,
                header.to_json(),
                header.agent,
                header.status.value,
                header.step_index,
                header.message_count,
                header.approval_id,
                saved_at,
            ),
        )
        if self.history_limit <= 0:
            self._collect_garbage(sid)
            return
        newest = self._db.execute(
            "SELECT seq, header, transcript_id FROM checkpoint_history WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (sid,),
        ).fetchone()
        if newest is not None and newest[1] == key and newest[2] == transcript_id:
            return  # the same save again (a retried activity): no new entry
        seq = (newest[0] + 1) if newest else 1
        self._db.execute(
            "INSERT INTO checkpoint_history VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, seq, header.step_index, saved_at, header.status.value, transcript_id, key),
        )
        dropped = self._db.execute(
            "DELETE FROM checkpoint_history WHERE session_id = ? AND seq <= ? RETURNING transcript_id",
            (sid, seq - self.history_limit),
        ).fetchall()
        if any(t != transcript_id for (t,) in dropped):
            self._collect_garbage(sid)

    def _collect_garbage(self, session_id: str) -> None:
        """Drop transcripts that neither the session nor its history points at."""
        self._db.execute(
            "DELETE FROM messages WHERE session_id = ? AND transcript_id NOT IN ("
            " SELECT transcript_id FROM sessions WHERE session_id = ?"
            " UNION SELECT transcript_id FROM checkpoint_history WHERE session_id = ?)",
            (session_id, session_id, session_id),
        )

    def tool_started(self, session_id: str, tool_call_id: str) -> int:
        with self._lock:
            row = self._db.execute(
                "INSERT INTO tool_calls VALUES (?, ?, 1, ?, NULL) ON CONFLICT DO UPDATE"
                " SET starts = starts + 1 RETURNING starts",
                (session_id, tool_call_id, _now().timestamp()),
            ).fetchone()
        return row[0] - 1

    def tool_result(self, session_id: str, tool_call_id: str) -> Message | None:
        with self._lock:
            row = self._db.execute(
                "SELECT result FROM tool_calls WHERE session_id = ? AND tool_call_id = ?",
                (session_id, tool_call_id),
            ).fetchone()
        return Message.model_validate_json(row[0]) if row and row[0] else None

    def record_tool_result(self, session_id: str, message: Message, batch_start: int, batch: list[str]) -> int:
        with self._transaction():
            self._db.execute(
                "INSERT INTO tool_calls VALUES (?, ?, 0, ?, ?) ON CONFLICT DO UPDATE"
                " SET result = COALESCE(result, excluded.result)",
                (session_id, message.tool_call_id, _now().timestamp(), message.to_json()),
            )
            return self._advance_results(session_id, batch_start, batch)

    def _advance_results(self, session_id: str, batch_start: int, batch: list[str]) -> int:
        header = self.load_header(session_id)
        if header is None:
            raise StoreCorruptError(f"session {session_id!r} vanished from {self.path} mid-run")
        count = header.message_count
        rows = (
            dict(
                self._db.execute(
                    f"SELECT tool_call_id, result FROM tool_calls WHERE session_id = ? AND result IS NOT NULL"
                    f" AND tool_call_id IN ({','.join('?' * len(batch))})",
                    (session_id, *batch),
                ).fetchall()
            )
            if batch
            else {}
        )
        if past_batch(session_id, self.path, count, batch_start, batch, rows):
            return batch_start + len(batch)
        new = [
            Message.model_validate_json(body)
            for body in batch_prefix(session_id, self.path, count, batch_start, batch, rows)
        ]
        if new:
            self.append(header.model_copy(update={"message_count": count + len(new), "updated_at": None}), count, new)
        return count + len(new)

    # -- public management ---------------------------------------------------
    def delete(self, session_id: str, keep_history: bool = False) -> None:
        with self._transaction():
            self._db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            self._db.execute("DELETE FROM tool_calls WHERE session_id = ?", (session_id,))
            if not keep_history:
                self._db.execute("DELETE FROM checkpoint_history WHERE session_id = ?", (session_id,))
            self._collect_garbage(session_id)

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        with self._lock:
            rows = self._db.execute(
                "SELECT saved_at, transcript_id, header FROM checkpoint_history"
                " WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, -1 if limit is None else limit),
            ).fetchall()
            parsed = [(self._parse_header(h, session_id), t, datetime.fromtimestamp(s, UTC)) for s, t, h in rows]
            return history_entries(parsed, lambda t, n: self._read_messages(session_id, t, 0, n))

    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]:
        query, params = session_list_query(status, agent, "?")
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
        return [
            SessionSummary(
                session_id=r[0],
                agent=r[1],
                status=r[2],
                step_index=r[3],
                message_count=r[4],
                approval_id=r[5],
                updated_at=datetime.fromtimestamp(r[6], UTC),
            )
            for r in rows
        ]

    def prune(self, older_than: timedelta | datetime) -> int:
        cutoff = older_than if isinstance(older_than, datetime) else _now() - older_than
        ts = cutoff.timestamp()
        with self._transaction():
            gone = [
                r[0]
                for r in self._db.execute(
                    "DELETE FROM sessions WHERE updated_at < ? RETURNING session_id", (ts,)
                ).fetchall()
            ]
            touched = {
                r[0]
                for r in self._db.execute(
                    "DELETE FROM checkpoint_history WHERE saved_at < ? RETURNING session_id", (ts,)
                ).fetchall()
            }
            for sid in set(gone) | touched:
                self._db.execute("DELETE FROM tool_calls WHERE session_id = ? AND ?", (sid, sid in gone))
                self._collect_garbage(sid)
        return len(gone)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _create_private_file(path: Path) -> None:
    """Store files are readable by their owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
