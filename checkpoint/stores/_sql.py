"""The SQL stores' one algorithm; ``SqliteStore`` and ``PostgresStore`` add a dialect.

Tables (each backend's schema module creates them, append-only migrations):

- ``sessions``: one row per session, the latest checkpoint header.
- ``messages``: transcript rows keyed by (session, transcript, position).
  Saves that only add messages write only the new rows; history entries
  point at a transcript and a message count, so they share rows instead of
  copying the transcript (history storage is linear in session length).
  A save that changes an earlier message starts a new transcript id, the
  unchanged prefix copied. The id (with the header's ``sessionUid``) is the
  transcript's token (``load_transcript_tail``); a session's first id is
  random, so a session deleted and saved again does not repeat one.
- ``checkpoint_history``: the ring of the newest ``history_limit`` saves.
- ``store_meta``: the store's identity (``store_id``, made with the store).
- ``tool_markers``: per (session, transcript position of the result): start
  counts that make at-most-once tools detectable, and recorded results (the
  first one for a position wins). Keyed by position, never by the model's call
  id, which models reuse.
- ``events``: each session's event log (``_sql_events.py``), deleted with the
  session (unless its history is kept) and by ``prune`` with it.

The SQL is written once with ``?`` placeholders. A backend supplies a
:class:`Dialect` (placeholder, time column type, row locks, "no limit") and
three hooks: a transaction (connection handling, error mapping, and for a
file the check that it is still the one opened), a lock that serializes one
session's writers, and a lock for migrations. Calls on one
store object are serialized by its lock; the open transaction's cursor is kept
on the store while it runs, so helper methods need no cursor argument.
"""

from __future__ import annotations

import json
import secrets
import threading
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    HistoryEntry,
    Message,
    Role,
    RunError,
    SessionSummary,
)
from durable_agents.checkpoint.stores._common import (
    cutoff_of,
    gc_paused,
    history_entries,
    now,
    session_list_query,
    transcript_token,
)
from durable_agents.checkpoint.stores._sql_events import SqlEvents
from durable_agents.checkpoint.stores._sql_writes import SqlWrites
from durable_agents.checkpoint.stores._subagents import prune_keep, subagent_sessions
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore, TranscriptTail
from durable_agents.checkpoint.transcript import last_turn_messages
from durable_agents.checkpoint.waiting import WaitingHeader, WaitingSession

Header = TypeVar("Header", CheckpointHeader, WaitingHeader)


@dataclass(frozen=True)
class Dialect:
    """What the SQL of one database engine spells differently."""

    mark: str
    """The parameter placeholder the driver expects."""
    no_limit: object
    """The ``LIMIT`` value that means every row."""
    row_lock: str
    """Appended to a SELECT of the session row inside a write (``" FOR UPDATE"``)."""
    to_db_time: Callable[[datetime], object]
    from_db_time: Callable[[Any], datetime]

    def sql(self, query: str) -> str:
        return query if self.mark == "?" else query.replace("?", self.mark)


class SqlStore(SqlEvents, SqlWrites, CheckpointStore):
    """``CheckpointStore`` over the four tables above, for any SQL ``dialect``."""

    dialect: ClassVar[Dialect]
    migrations: ClassVar[list[str]]
    """Schema scripts (statements separated by ``;``), applied in order, never edited."""

    def __init__(self, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.history_limit = history_limit
        self._lock = threading.RLock()
        self._cur: Any = None
        self._store_id: str | None = None

    @property
    def store_id(self) -> str:
        assert self._store_id is not None, "read by _migrate when the store opens"
        return self._store_id

    @property
    def where(self) -> str:
        """The store as named in errors: its ``location``."""
        return self.location

    # -- backend hooks --------------------------------------------------------
    @property
    @abstractmethod
    def location(self) -> str:
        """An absolute path, or a URL without its password."""

    @abstractmethod
    def _transaction(self, *, write: bool) -> AbstractContextManager[Any]:
        """One transaction; yields a cursor with ``execute``/``executemany``."""

    def _lock_session(self, session_id: str) -> None:
        """Serialize the writers of one session until the transaction ends."""

    def _lock_schema(self) -> None:
        """Serialize migrations until the transaction ends."""

    # -- transactions -----------------------------------------------------------
    @contextmanager
    def _open(self, session_id: str | None = None, *, write: bool = True) -> Iterator[Any]:
        """A transaction (an inner use joins the open one); writers of ``session_id`` wait."""
        with self._lock:
            if self._cur is not None:
                yield self._cur
                return
            with self._transaction(write=write) as cur:
                self._cur = cur
                try:
                    if write and session_id is not None:
                        self._lock_session(session_id)
                    yield cur
                finally:
                    self._cur = None

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._open(write=False):
            yield

    def _run(self, query: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self._cur.execute(self.dialect.sql(query), params)

    def _migrate(self) -> None:
        with self._open():
            self._lock_schema()
            self._run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self._run("SELECT version FROM schema_version").fetchone()
            current = row[0] if row else 0
            for script in self.migrations[current:]:
                for statement in script.split(";"):
                    if statement.strip():
                        self._run(statement)
            if current < len(self.migrations):
                self._run("DELETE FROM schema_version")
                self._run("INSERT INTO schema_version VALUES (?)", (len(self.migrations),))
            self._store_id = self._read_store_id()

    def _read_store_id(self) -> str:
        """The store's id, made the first time (under the migration lock, so once)."""
        row = self._run("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()
        if row is not None:
            return str(row[0])
        store_id = secrets.token_hex(16)
        self._run("INSERT INTO store_meta VALUES ('store_id', ?)", (store_id,))
        return store_id

    # -- reads ------------------------------------------------------------
    def load_header(self, session_id: str) -> CheckpointHeader | None:
        with self._open(write=False):
            row = self._run("SELECT header FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return None if row is None else self._parse_header(row[0], session_id)

    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        with self._open(write=False):
            row = self._session_row(session_id)
            if row is None:
                return []
            transcript_id, count = row
            return self._read_messages(session_id, transcript_id, start, count if end is None else end)

    def load_transcript_tail(self, session_id: str, start: int = 0) -> TranscriptTail | None:
        with self._open(write=False):  # one snapshot: the header and the rows of its transcript
            row = self._run("SELECT header, transcript_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            header = self._parse_header(row[0], session_id)
            messages = self._read_messages(session_id, row[1], start, max(start, header.message_count))
        return TranscriptTail(header=header, token=transcript_token(header, row[1]), start=start, messages=messages)

    def _session_row(self, session_id: str, *, lock: bool = False) -> tuple[int, int] | None:
        """The session's (transcript id, message count); ``lock`` holds the row for a write."""
        query = "SELECT transcript_id, message_count FROM sessions WHERE session_id = ?"
        row = self._run(query + (self.dialect.row_lock if lock else ""), (session_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def _read_messages(self, session_id: str, transcript_id: int, start: int, end: int) -> list[Message]:
        rows = self._run(
            "SELECT body FROM messages WHERE session_id = ? AND transcript_id = ?"
            " AND position >= ? AND position < ? ORDER BY position",
            (session_id, transcript_id, start, end),
        ).fetchall()
        if len(rows) != max(end - start, 0):
            raise StoreCorruptError(
                f"session {session_id!r} in {self.where}: expected messages {start}..{end - 1}, "
                f"found {len(rows)}; the store is damaged"
            )
        return [Message.model_validate_json(body) for (body,) in rows]

    def _parse_header(self, raw: str, session_id: str) -> CheckpointHeader:
        return self._parse(CheckpointHeader, raw, session_id)

    def _parse(self, model: type[Header], raw: str, session_id: str) -> Header:
        try:
            return model.model_validate_json(raw)
        except ValueError as e:
            raise StoreCorruptError(f"checkpoint of session {session_id!r} in {self.where} cannot be read: {e}") from e

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        with self._open(write=False):
            rows = self._run(
                "SELECT saved_at, transcript_id, header FROM checkpoint_history"
                " WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, self.dialect.no_limit if limit is None else limit),
            ).fetchall()
            parsed = [(self._parse_header(h, session_id), t, self.dialect.from_db_time(s)) for s, t, h in rows]
            return history_entries(parsed, lambda t, n: self._read_messages(session_id, t, 0, n))

    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]:
        query, params = session_list_query(status, agent, "?")
        with self._open(write=False):
            rows = self._run(query, params).fetchall()
        return [
            SessionSummary(
                session_id=r[0],
                agent=r[1],
                status=r[2],
                step_index=r[3],
                message_count=r[4],
                approval_id=r[5],
                updated_at=self.dialect.from_db_time(r[6]),
                last_error=RunError.model_validate_json(r[7]) if r[7] else None,
            )
            for r in rows
        ]

    def waiting_sessions(self, agent: str | None = None) -> list[WaitingSession]:
        # Two queries for any number of sessions: the headers, and each transcript's last
        # message (a paused turn's, unless results of its earlier calls follow it: then
        # that session's end is read again, from its turn).
        where = " WHERE s.status = ?" + (" AND s.agent = ?" if agent is not None else "")
        params = [CheckpointStatus.AWAITING_APPROVAL.value, *([agent] if agent is not None else [])]
        with self._open(write=False), gc_paused():  # one snapshot
            headers = self._run(
                "SELECT s.session_id, s.header FROM sessions s" + where + " ORDER BY s.updated_at DESC", params
            ).fetchall()
            last = dict(
                self._run(
                    "SELECT s.session_id, m.body FROM sessions s JOIN messages m ON m.session_id = s.session_id"
                    " AND m.transcript_id = s.transcript_id AND m.position = s.message_count - 1" + where,
                    params,
                ).fetchall()
            )
            found = []
            for session_id, raw in headers:
                header = self._parse(WaitingHeader, raw, session_id)
                body = last.get(session_id)
                turn = [Message.model_validate_json(body)] if body is not None else []
                if not turn or turn[0].role != Role.ASSISTANT:
                    turn = last_turn_messages(self, header)
                found.append(WaitingSession(header, turn))
        return found

    def tool_result(self, session_id: str, position: int) -> Message | None:
        with self._open(write=False):
            row = self._run(
                "SELECT result FROM tool_markers WHERE session_id = ? AND position = ?", (session_id, position)
            ).fetchone()
        return Message.model_validate_json(row[0]) if row and row[0] else None

    # -- run input -------------------------------------------------------------
    def put_run_input(self, session_id: str, token: str, messages: list[Message]) -> None:
        body = json.dumps([m.to_dict() for m in messages])
        with self._open():
            self._run("DELETE FROM run_inputs WHERE session_id = ? AND token = ?", (session_id, token))
            self._run(
                "INSERT INTO run_inputs (session_id, token, created_at, body) VALUES (?, ?, ?, ?)",
                (session_id, token, self.dialect.to_db_time(now()), body),
            )

    def run_input(self, session_id: str, token: str) -> list[Message] | None:
        with self._open(write=False):
            row = self._run(
                "SELECT body FROM run_inputs WHERE session_id = ? AND token = ?", (session_id, token)
            ).fetchone()
        return [Message.model_validate(m) for m in json.loads(row[0])] if row else None

    def drop_run_input(self, session_id: str, token: str) -> None:
        with self._open():
            self._run("DELETE FROM run_inputs WHERE session_id = ? AND token = ?", (session_id, token))

    # -- management ---------------------------------------------------------
    def delete(self, session_id: str, keep_history: bool = False) -> None:
        for sid in [*reversed(subagent_sessions(self, session_id)), session_id]:  # its sub-agents' too
            self._delete_one(sid, keep_history)

    def _delete_one(self, session_id: str, keep_history: bool) -> None:
        with self._open(session_id):
            self._session_row(session_id, lock=True)
            self._run("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            self._run("DELETE FROM tool_markers WHERE session_id = ?", (session_id,))
            self._run("DELETE FROM run_inputs WHERE session_id = ?", (session_id,))
            if not keep_history:
                self._run("DELETE FROM checkpoint_history WHERE session_id = ?", (session_id,))
                self._delete_events([session_id])
            self._collect_garbage(session_id)

    def prune(
        self, older_than: timedelta | datetime, *, keep: Collection[str] = (), include_waiting: bool = False
    ) -> int:
        keep = prune_keep(self, cutoff_of(older_than), keep, include_waiting)  # sub-agent sessions go with their parent
        cutoff = self.dialect.to_db_time(cutoff_of(older_than))
        with self._open():
            waiting = "" if include_waiting else f" AND status <> '{CheckpointStatus.AWAITING_APPROVAL.value}'"
            old = [r[0] for r in self._run(f"SELECT session_id FROM sessions WHERE updated_at < ?{waiting}", (cutoff,))]
            kept = set(keep)
            gone = [sid for sid in old if sid not in kept]
            for sid in gone:
                self._run("DELETE FROM sessions WHERE session_id = ?", (sid,))
            touched = {
                r[0]
                for r in self._run("DELETE FROM checkpoint_history WHERE saved_at < ? RETURNING session_id", (cutoff,))
            }
            self._run("DELETE FROM run_inputs WHERE created_at < ?", (cutoff,))  # never started
            if gone:
                self._cur.executemany(
                    self.dialect.sql("DELETE FROM tool_markers WHERE session_id = ?"), [(sid,) for sid in gone]
                )
            self._delete_events(gone)
            for sid in sorted(set(gone) | touched):
                self._collect_garbage(sid)
        return len(gone)
