"""PostgreSQL store: for workers on several machines sharing one database.

The same tables and semantics as ``SqliteStore`` (see sqlite.py): ``sessions``
(latest header), ``messages`` (transcript rows shared by history entries),
``checkpoint_history`` (the ring) and ``tool_calls``. Bodies are TEXT holding
the camelCase JSON (TEXT rather than JSONB: JSONB rejects ``\\u0000``, which
tool output may contain; cast ``header::jsonb`` to query it).

Writers of one session serialize on a transaction-scoped advisory lock keyed
by the session id (it also covers a session's first save, when there is no
row to lock yet) and lock the session row ``FOR UPDATE``. Use a database or
schema of its own (``?options=-csearch_path%3Dagents``): the table names are
generic. Connection failures raise ``StoreUnavailableError`` naming the URL
without its password; the next call reconnects.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_agents.checkpoint.errors import ConfigurationError, StoreCorruptError, StoreUnavailableError
from durable_agents.checkpoint.format import CheckpointHeader, CheckpointStatus, HistoryEntry, Message, SessionSummary
from durable_agents.checkpoint.stores._common import (
    batch_prefix,
    cutoff_of,
    header_key,
    history_entries,
    now,
    past_batch,
    session_list_query,
    stamped,
)
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore

MIGRATIONS: list[str] = [
    """
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        transcript_id INTEGER NOT NULL,
        header TEXT NOT NULL,
        agent TEXT,
        status TEXT NOT NULL,
        step_index INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        approval_id TEXT,
        updated_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX sessions_updated_at ON sessions (updated_at);
    CREATE TABLE messages (
        session_id TEXT NOT NULL,
        transcript_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, transcript_id, position)
    );
    CREATE TABLE tool_calls (
        session_id TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        starts INTEGER NOT NULL,
        first_started_at TIMESTAMPTZ NOT NULL,
        result TEXT,
        PRIMARY KEY (session_id, tool_call_id)
    );
    CREATE TABLE checkpoint_history (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        step INTEGER NOT NULL,
        saved_at TIMESTAMPTZ NOT NULL,
        status TEXT NOT NULL,
        transcript_id INTEGER NOT NULL,
        header TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX checkpoint_history_saved_at ON checkpoint_history (saved_at);
    """,
]
_MIGRATION_LOCK = 0x6475726162  # pg_advisory_xact_lock key while migrating


def redact(url: str) -> str:
    """The URL (or key=value conninfo) without its password."""
    url = re.sub(r"^([a-z][a-z0-9+.-]*://[^:/?#@]*):[^@/?#]*@", r"\1:***@", url, flags=re.I)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)", r"\1***", url, flags=re.I)


class PostgresStore(CheckpointStore):
    def __init__(self, url: str, *, history_limit: int = DEFAULT_HISTORY_LIMIT, connect_timeout: float = 10) -> None:
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
        except ImportError as e:
            raise ConfigurationError("PostgresStore needs psycopg: pip install 'durable-agents[postgres]'") from e
        self._psycopg = psycopg
        self.url = url
        self.safe_url = redact(url)
        self.history_limit = history_limit
        self.connect_timeout = connect_timeout
        try:
            password = conninfo_to_dict(url).get("password")
        except psycopg.Error:
            raise ConfigurationError(f"invalid PostgreSQL URL {self.safe_url}") from None
        self._secrets = [str(password)] if password else []
        self._lock = threading.RLock()
        self._conn: Any = None
        self._migrate()

    def __repr__(self) -> str:
        return f"PostgresStore({self.safe_url!r}, history_limit={self.history_limit})"

    # -- connection ---------------------------------------------------------
    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """A cursor inside one transaction (the connection is reopened when lost)."""
        pg = self._psycopg
        with self._lock:
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._conn = pg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
                with self._conn.transaction(), self._conn.cursor() as cur:
                    yield cur
            except (pg.OperationalError, pg.InterfaceError) as e:
                if self._conn is not None and (self._conn.closed or self._conn.broken):
                    self._conn = None
                reason = self._scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
                raise StoreUnavailableError(f"PostgreSQL store {self.safe_url} is unavailable: {reason}") from None

    def _migrate(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = cur.execute("SELECT version FROM schema_version").fetchone()
            for version in range(row[0] if row else 0, len(MIGRATIONS)):
                cur.execute(MIGRATIONS[version])
                cur.execute("DELETE FROM schema_version")
                cur.execute("INSERT INTO schema_version VALUES (%s)", (version + 1,))

    # -- reads ------------------------------------------------------------
    def _parse_header(self, raw: str, session_id: str) -> CheckpointHeader:
        try:
            return CheckpointHeader.model_validate_json(raw)
        except ValueError as e:
            raise StoreCorruptError(
                f"checkpoint of session {session_id!r} in {self.safe_url} cannot be read: {e}"
            ) from e

    def load_header(self, session_id: str) -> CheckpointHeader | None:
        with self._tx() as cur:
            row = cur.execute("SELECT header FROM sessions WHERE session_id = %s", (session_id,)).fetchone()
        return None if row is None else self._parse_header(row[0], session_id)

    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        with self._tx() as cur:
            row = cur.execute(
                "SELECT transcript_id, message_count FROM sessions WHERE session_id = %s", (session_id,)
            ).fetchone()
            if row is None:
                return []
            return self._read_messages(cur, session_id, row[0], start, row[1] if end is None else end)

    def _read_messages(self, cur: Any, session_id: str, transcript_id: int, start: int, end: int) -> list[Message]:
        rows = cur.execute(
            "SELECT body FROM messages WHERE session_id = %s AND transcript_id = %s"
            " AND position >= %s AND position < %s ORDER BY position",
            (session_id, transcript_id, start, end),
        ).fetchall()
        if len(rows) != max(end - start, 0):
            raise StoreCorruptError(
                f"session {session_id!r} in {self.safe_url}: expected messages {start}..{end - 1}, "
                f"found {len(rows)}; the store is damaged"
            )
        return [Message.model_validate_json(body) for (body,) in rows]

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        with self._tx() as cur:
            rows = cur.execute(
                "SELECT saved_at, transcript_id, header FROM checkpoint_history"
                " WHERE session_id = %s ORDER BY seq DESC LIMIT %s",
                (session_id, limit),
            ).fetchall()
            parsed = [(self._parse_header(h, session_id), t, s.astimezone(UTC)) for s, t, h in rows]
            return history_entries(parsed, lambda t, n: self._read_messages(cur, session_id, t, 0, n))

    def tool_result(self, session_id: str, tool_call_id: str) -> Message | None:
        with self._tx() as cur:
            row = cur.execute(
                "SELECT result FROM tool_calls WHERE session_id = %s AND tool_call_id = %s", (session_id, tool_call_id)
            ).fetchone()
        return Message.model_validate_json(row[0]) if row and row[0] else None

    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]:
        query, params = session_list_query(status, agent, "%s")
        with self._tx() as cur:
            rows = cur.execute(query, params).fetchall()
        return [
            SessionSummary(
                session_id=r[0],
                agent=r[1],
                status=r[2],
                step_index=r[3],
                message_count=r[4],
                approval_id=r[5],
                updated_at=r[6].astimezone(UTC),
            )
            for r in rows
        ]

    # -- writes -----------------------------------------------------------
    def _lock_session(self, cur: Any, session_id: str) -> tuple[int, int] | None:
        """Serialize this session's writers (across machines); its (transcript, count) row."""
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (session_id,))
        return cur.execute(
            "SELECT transcript_id, message_count FROM sessions WHERE session_id = %s FOR UPDATE", (session_id,)
        ).fetchone()

    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        header = stamped(header, start, messages)
        with self._tx() as cur:
            row = self._lock_session(cur, header.session_id)
            self._append(cur, row, header, start, [m.to_json() for m in messages])

    def _append(
        self, cur: Any, row: tuple[int, int] | None, header: CheckpointHeader, start: int, bodies: list[str]
    ) -> None:
        sid = header.session_id
        if row is None:
            if start:
                raise ValueError(f"session {sid!r} has no messages; cannot write at {start}")
            transcript_id, existing = self._fresh_transcript_id(cur, sid), {}
        else:
            transcript_id, count = row
            if start > count:
                raise ValueError(f"session {sid!r} has {count} messages; cannot write at {start}")
            # Every row already at these positions counts, also ones past the current
            # count (a shorter save keeps them for older history entries).
            existing = dict(
                cur.execute(
                    "SELECT position, body FROM messages WHERE session_id = %s AND transcript_id = %s"
                    " AND position >= %s AND position < %s",
                    (sid, transcript_id, start, start + len(bodies)),
                ).fetchall()
            )
            if any(body != bodies[pos - start] for pos, body in existing.items()):
                old, transcript_id, existing = transcript_id, self._fresh_transcript_id(cur, sid), {}
                cur.execute(
                    "INSERT INTO messages SELECT session_id, %s, position, body FROM messages"
                    " WHERE session_id = %s AND transcript_id = %s AND position < %s",
                    (transcript_id, sid, old, start),
                )
        new = [(sid, transcript_id, start + i, b) for i, b in enumerate(bodies) if start + i not in existing]
        if new:
            cur.executemany("INSERT INTO messages VALUES (%s, %s, %s, %s)", new)
        self._write_header(cur, header, transcript_id)

    @staticmethod
    def _fresh_transcript_id(cur: Any, session_id: str) -> int:
        row = cur.execute("SELECT MAX(transcript_id) FROM messages WHERE session_id = %s", (session_id,)).fetchone()
        return (row[0] or 0) + 1

    def _write_header(self, cur: Any, header: CheckpointHeader, transcript_id: int) -> None:
        sid, saved_at, key = header.session_id, header.updated_at, header_key(header)
        cur.execute(
            "INSERT INTO sessions VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id)"
            " DO UPDATE SET transcript_id = excluded.transcript_id, header = excluded.header,"
            " agent = excluded.agent, status = excluded.status, step_index = excluded.step_index,"
            " message_count = excluded.message_count, approval_id = excluded.approval_id,"
            " updated_at = excluded.updated_at",
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
            self._collect_garbage(cur, sid)
            return
        newest = cur.execute(
            "SELECT seq, header, transcript_id FROM checkpoint_history WHERE session_id = %s ORDER BY seq DESC LIMIT 1",
            (sid,),
        ).fetchone()
        if newest is not None and newest[1] == key and newest[2] == transcript_id:
            return  # the same save again (a retried activity): no new entry
        seq = newest[0] + 1 if newest else 1
        cur.execute(
            "INSERT INTO checkpoint_history VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (sid, seq, header.step_index, saved_at, header.status.value, transcript_id, key),
        )
        dropped = cur.execute(
            "DELETE FROM checkpoint_history WHERE session_id = %s AND seq <= %s RETURNING transcript_id",
            (sid, seq - self.history_limit),
        ).fetchall()
        if any(t != transcript_id for (t,) in dropped):
            self._collect_garbage(cur, sid)

    @staticmethod
    def _collect_garbage(cur: Any, session_id: str) -> None:
        """Drop transcripts that neither the session nor its history points at."""
        cur.execute(
            "DELETE FROM messages WHERE session_id = %s AND transcript_id NOT IN ("
            " SELECT transcript_id FROM sessions WHERE session_id = %s"
            " UNION SELECT transcript_id FROM checkpoint_history WHERE session_id = %s)",
            (session_id, session_id, session_id),
        )

    def tool_started(self, session_id: str, tool_call_id: str) -> int:
        with self._tx() as cur:
            row = cur.execute(
                "INSERT INTO tool_calls VALUES (%s, %s, 1, %s, NULL) ON CONFLICT (session_id, tool_call_id)"
                " DO UPDATE SET starts = tool_calls.starts + 1 RETURNING starts",
                (session_id, tool_call_id, now()),
            ).fetchone()
        return row[0] - 1

    def record_tool_result(self, session_id: str, message: Message, batch_start: int, batch: list[str]) -> int:
        with self._tx() as cur:
            row = self._lock_session(cur, session_id)
            cur.execute(
                "INSERT INTO tool_calls VALUES (%s, %s, 0, %s, %s) ON CONFLICT (session_id, tool_call_id)"
                " DO UPDATE SET result = COALESCE(tool_calls.result, excluded.result)",
                (session_id, message.tool_call_id, now(), message.to_json()),
            )
            if row is None:
                raise StoreCorruptError(f"session {session_id!r} vanished from {self.safe_url} mid-run")
            header = self._parse_header(
                cur.execute("SELECT header FROM sessions WHERE session_id = %s", (session_id,)).fetchone()[0],
                session_id,
            )
            count = header.message_count
            results = dict(
                cur.execute(
                    "SELECT tool_call_id, result FROM tool_calls WHERE session_id = %s AND result IS NOT NULL"
                    " AND tool_call_id = ANY(%s)",
                    (session_id, batch),
                ).fetchall()
            )
            if past_batch(session_id, self.safe_url, count, batch_start, batch, results):
                return batch_start + len(batch)
            new = batch_prefix(session_id, self.safe_url, count, batch_start, batch, results)
            if new:
                messages = [Message.model_validate_json(b) for b in new]
                updated = header.model_copy(update={"message_count": count + len(new), "updated_at": None})
                self._append(cur, row, stamped(updated, count, messages), count, new)
        return count + len(new)

    # -- management ---------------------------------------------------------
    def delete(self, session_id: str, keep_history: bool = False) -> None:
        with self._tx() as cur:
            self._lock_session(cur, session_id)
            cur.execute("DELETE FROM sessions WHERE session_id = %s", (session_id,))
            cur.execute("DELETE FROM tool_calls WHERE session_id = %s", (session_id,))
            if not keep_history:
                cur.execute("DELETE FROM checkpoint_history WHERE session_id = %s", (session_id,))
            self._collect_garbage(cur, session_id)

    def prune(self, older_than: timedelta | datetime) -> int:
        cutoff = cutoff_of(older_than)
        with self._tx() as cur:
            gone = [
                r[0]
                for r in cur.execute(
                    "DELETE FROM sessions WHERE updated_at < %s RETURNING session_id", (cutoff,)
                ).fetchall()
            ]
            touched = {
                r[0]
                for r in cur.execute(
                    "DELETE FROM checkpoint_history WHERE saved_at < %s RETURNING session_id", (cutoff,)
                ).fetchall()
            }
            if gone:
                cur.execute("DELETE FROM tool_calls WHERE session_id = ANY(%s)", (gone,))
            for sid in set(gone) | touched:
                self._collect_garbage(cur, sid)
        return len(gone)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
