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
- ``history_decisions``: the decisions of history entries, as rows of numbered
  lists; an entry names its list and how many rows it has. A save that adds
  decisions adds their rows only (a header carries every decision of its
  session: issue 42); one whose decisions are not the newest entry's plus more
  starts another list. The session's row keeps its decisions in its header.
- ``store_meta``: the store's identity (``store_id``, made with the store).
- ``tool_markers``: per (session, transcript position of the result): start
  counts that make at-most-once tools detectable, and recorded results (the
  first one for a position wins). Keyed by position, never by the model's call
  id, which models reuse.
- ``events``: each session's event log, deleted with the session (unless its
  history is kept) and by ``prune`` with it.

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
import math
import secrets
import threading
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.events import StoredEvent
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    Decision,
    HistoryEntry,
    Message,
    Role,
    RunError,
    SessionSummary,
    ToolCall,
)
from durable_agents.checkpoint.stores._common import (
    batch_prefix,
    check_in_batch,
    cutoff_of,
    fresh_transcript_base,
    gc_paused,
    header_texts,
    history_entries,
    now,
    past_batch,
    session_list_query,
    stale_marker_cut,
    stamped,
    transcript_token,
)
from durable_agents.checkpoint.stores._subagents import prune_keep, subagent_sessions
from durable_agents.checkpoint.stores.base import (
    DEFAULT_HISTORY_LIMIT,
    Admit,
    CheckpointStore,
    ToolCallStart,
    TranscriptTail,
    call_in_turn,
    last_turn_messages,
)
from durable_agents.checkpoint.waiting import WaitingHeader, WaitingSession

Header = TypeVar("Header", CheckpointHeader, WaitingHeader, Decision)

_UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, transcript_id, header, agent, status, step_index, message_count,"
    " approval_id, updated_at, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
    " transcript_id = excluded.transcript_id, header = excluded.header, agent = excluded.agent,"
    " status = excluded.status, step_index = excluded.step_index, message_count = excluded.message_count,"
    " approval_id = excluded.approval_id, updated_at = excluded.updated_at, last_error = excluded.last_error"
)


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


_PARSED_HEADERS = 256
"""Sessions whose last header read a store keeps parsed."""


def _plain(value: Any) -> bool:
    """Whether ``value`` reads back from JSON as it is (JSON's own types; no tuple, no
    non-string key, no other object): a header written with one is kept parsed as written."""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


class SqlStore(CheckpointStore):
    """``CheckpointStore`` over the tables above, for any SQL ``dialect``."""

    dialect: ClassVar[Dialect]
    migrations: ClassVar[list[str]]
    """Schema scripts (statements separated by ``;``), applied in order, never edited."""

    def __init__(self, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.history_limit = history_limit
        self._lock = threading.RLock()
        self._cur: Any = None
        self._committed: list[Callable[[], None]] = []
        """What to do once the open transaction commits (kept in memory only what it wrote)."""
        self._store_id: str | None = None
        self._parsed: dict[str, tuple[str, CheckpointHeader]] = {}
        """The last header read of recent sessions, with its stored text (:meth:`_parse_header`)."""
        self._parsed_lock = threading.Lock()
        self._lists: dict[str, tuple[int, list[str]]] = {}
        """The decision list each recent session's history entries were last written with here, and
        its rows' texts, once written (under ``_parsed_lock``; the rows of a list an entry counts
        never change, and a list's id is never used again)."""
        self._texts: dict[str, tuple[tuple[Decision, ...], tuple[str, ...]]] = {}
        """The decisions of each recent session's last save here, and their texts (``_bodies``)."""

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
            committed: list[Callable[[], None]] = []
            with self._transaction(write=write) as cur:
                self._cur, self._committed = cur, committed
                try:
                    if write and session_id is not None:
                        self._lock_session(session_id)
                    yield cur
                finally:
                    self._cur = None
            for then in committed:  # (what the transaction wrote is the store's now)
                then()

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
        """The header stored as ``raw``. A session's activities read its header several times a
        step, often unchanged since the last read: the text read last is kept with what it
        parsed to, and read again as a copy (a header's size grows with its decisions: issue 42)."""
        with self._parsed_lock:
            kept = self._parsed.get(session_id)
        if kept is not None and kept[0] == raw:
            return kept[1].model_copy()
        header = self._parse(CheckpointHeader, raw, session_id)
        self._keep_parsed(session_id, raw, header)
        return header.model_copy()

    def _keep_parsed(self, session_id: str, raw: str, header: CheckpointHeader) -> None:
        with self._parsed_lock:
            self._parsed.pop(session_id, None)
            if len(self._parsed) >= _PARSED_HEADERS:
                del self._parsed[next(iter(self._parsed))]
            self._parsed[session_id] = (raw, header)

    def _parse(self, model: type[Header], raw: str, session_id: str) -> Header:
        try:
            return model.model_validate_json(raw)
        except ValueError as e:
            raise StoreCorruptError(f"checkpoint of session {session_id!r} in {self.where} cannot be read: {e}") from e

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        with self._open(write=False):
            rows = self._run(
                "SELECT saved_at, transcript_id, header, decision_list, decision_count FROM checkpoint_history"
                " WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, self.dialect.no_limit if limit is None else limit),
            ).fetchall()
            lists: dict[int, list[Decision]] = {}
            parsed = [
                (self._history_header(h, session_id, lists, d, n), t, self.dialect.from_db_time(s))
                for s, t, h, d, n in rows
            ]
            return history_entries(parsed, lambda t, n: self._read_messages(session_id, t, 0, n))

    def _history_header(
        self, raw: str, session_id: str, lists: dict[int, list[Decision]], list_id: int | None, count: int | None
    ) -> CheckpointHeader:
        """A history entry's header, its decisions read from its list (``lists``: those read)."""
        header = self._parse_header(raw, session_id)
        if list_id is None or count is None:  # (no decisions, or an entry written with them in its header)
            return header
        if list_id not in lists:
            rows = self._run(
                "SELECT idx, body FROM history_decisions WHERE session_id = ? AND list_id = ? ORDER BY idx",
                (session_id, list_id),
            ).fetchall()
            if [i for i, _ in rows[:count]] != list(range(count)):
                raise StoreCorruptError(
                    f"history of session {session_id!r} in {self.where}: decision list {list_id} has "
                    f"{len(rows)} rows, an entry names {count}; the store is damaged"
                )
            lists[list_id] = [self._parse(Decision, body, session_id) for _, body in rows]
        return header.model_copy(update={"decisions": lists[list_id][:count]})

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

    # -- writes: transcripts and the history ring ----------------------------------
    # The private methods here run inside the write transaction a public one opened.
    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        header = stamped(header, start, messages)
        with self._open(header.session_id):
            row = self._session_row(header.session_id, lock=True)
            self._append(row, header, start, [m.to_json() for m in messages])

    def append_new(self, header: CheckpointHeader, start: int, messages: list[Message]) -> bool:
        header = stamped(header, start, messages)
        with self._open(header.session_id):
            row = self._session_row(header.session_id, lock=True)
            if row is not None and row[1] > start:  # another writer's message is there: it stands
                return False
            self._append(row, header, start, [m.to_json() for m in messages])
        return True

    def _append(self, row: tuple[int, int] | None, header: CheckpointHeader, start: int, bodies: list[str]) -> None:
        sid = header.session_id
        transcript_id, existing, changed = self._transcript_for(row, sid, start, bodies)
        cut = stale_marker_cut(row[1] if row else 0, header.message_count, changed)
        if cut is not None:
            self._run("DELETE FROM tool_markers WHERE session_id = ? AND position >= ?", (sid, cut))
        new = [(sid, transcript_id, start + i, b) for i, b in enumerate(bodies) if start + i not in existing]
        if new:
            self._cur.executemany(self.dialect.sql("INSERT INTO messages VALUES (?, ?, ?, ?)"), new)
        self._write_header(header, transcript_id)

    def _transcript_for(
        self, row: tuple[int, int] | None, session_id: str, start: int, bodies: list[str]
    ) -> tuple[int, set[int], list[int]]:
        """The transcript to write ``bodies`` at ``start`` into, the positions it
        already holds, and the positions whose stored message ``bodies`` change."""
        if row is None:
            if start:
                raise ValueError(f"session {session_id!r} does not exist; cannot write at {start}")
            return self._fresh_transcript_id(session_id), set(), []
        transcript_id, count = row
        if start > count:
            raise ValueError(f"session {session_id!r} has {count} messages; cannot write at {start}")
        # Every row already at these positions counts, also ones past the current
        # count (a shorter save keeps them for older history entries).
        existing = dict(
            self._run(
                "SELECT position, body FROM messages WHERE session_id = ? AND transcript_id = ?"
                " AND position >= ? AND position < ?",
                (session_id, transcript_id, start, start + len(bodies)),
            ).fetchall()
        )
        changed = sorted(pos for pos, body in existing.items() if body != bodies[pos - start])
        if not changed:
            return transcript_id, set(existing), []
        # An earlier message changes: the old rows stay for history entries.
        fresh = self._fresh_transcript_id(session_id)
        self._run(
            "INSERT INTO messages SELECT session_id, ?, position, body FROM messages"
            " WHERE session_id = ? AND transcript_id = ? AND position < ?",
            (fresh, session_id, transcript_id, start),
        )
        return fresh, set(), changed

    def _fresh_transcript_id(self, session_id: str) -> int:
        row = self._run("SELECT MAX(transcript_id) FROM messages WHERE session_id = ?", (session_id,)).fetchone()
        return row[0] + 1 if row[0] is not None else fresh_transcript_base()

    def _write_header(self, header: CheckpointHeader, transcript_id: int) -> None:
        """Make ``header`` the session's latest save and add it to the history ring.

        A hook with this signature: ``durable_agents.testing.CrashingSqliteStore``
        overrides it to crash while a checkpoint write is in flight.
        """
        saved_at = self.dialect.to_db_time(header.updated_at)  # type: ignore[arg-type]
        replaced = None
        if self.history_limit <= 0:  # no history: only a replaced transcript leaves rows nobody reads
            replaced = self._run(
                "SELECT transcript_id FROM sessions WHERE session_id = ? AND transcript_id <> ?",
                (header.session_id, transcript_id),
            ).fetchone()
        decisions = header.decisions  # (kept as rows for the history: its keys leave them out)
        bodies = None if decisions is None else self._bodies(header.session_id, decisions)
        raw, key = header_texts(header, bodies)
        self._run(
            _UPSERT_SESSION,
            (
                header.session_id,
                transcript_id,
                raw,
                header.agent,
                header.status.value,
                header.step_index,
                header.message_count,
                header.approval_id,
                saved_at,
                header.last_error.to_json() if header.last_error else None,
            ),
        )
        if _plain(header.business_state) and _plain(header.output):  # it reads back as it is: kept parsed
            self._keep_parsed(header.session_id, raw, header.model_copy())
        if self.history_limit <= 0:
            if replaced is not None:  # (collecting on every save would read the whole transcript)
                self._collect_garbage(header.session_id)
        else:
            self._add_history_entry(header, key, bodies, transcript_id, saved_at)

    def _add_history_entry(
        self, header: CheckpointHeader, key: str, bodies: list[str] | None, transcript_id: int, saved_at: object
    ) -> None:
        sid = header.session_id
        newest = self._run(  # (compared in the database: the header's text is not read back)
            "SELECT seq, header = ?, transcript_id, decision_list, decision_count FROM checkpoint_history"
            " WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (key, sid),
        ).fetchone()
        listed = self._decision_list(sid, bodies, newest)
        if newest is not None and newest[1] and newest[2] == transcript_id and (newest[3], newest[4]) == listed:
            return  # the same save again (a retried activity): no new entry
        seq = newest[0] + 1 if newest else 1
        self._run(
            "INSERT INTO checkpoint_history (session_id, seq, step, saved_at, status, transcript_id, header,"
            " decision_list, decision_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, seq, header.step_index, saved_at, header.status.value, transcript_id, key, *listed),
        )
        dropped = self._run(
            "DELETE FROM checkpoint_history WHERE session_id = ? AND seq <= ? RETURNING transcript_id, decision_list",
            (sid, seq - self.history_limit),
        ).fetchall()
        if any(t != transcript_id or (d is not None and d != listed[0]) for t, d in dropped):
            self._collect_garbage(sid)

    def _decision_list(
        self, session_id: str, bodies: list[str] | None, newest: tuple[Any, ...] | None
    ) -> tuple[int | None, int | None]:
        """The decision list and count of a new history entry whose decisions are ``bodies``: the
        newest entry's list with the rows added since, when its decisions are theirs plus more;
        else a new list. (None, None): the header has no decisions list."""
        if bodies is None:
            return None, None
        list_id, count = (newest[3], newest[4]) if newest is not None else (None, None)
        if (
            isinstance(list_id, int)
            and isinstance(count, int)
            and len(bodies) >= count
            and bodies[:count] == self._list_rows(session_id, list_id, count)  # theirs, and more
        ):
            self._add_decision_rows(session_id, list_id, count, bodies)
            return list_id, len(bodies)
        while True:  # a new list's id is random (as a transcript's first): ids are never used twice
            fresh = fresh_transcript_base()
            taken = "SELECT 1 FROM history_decisions WHERE session_id = ? AND list_id = ?"
            if self._run(taken, (session_id, fresh)).fetchone() is None:
                break
        self._add_decision_rows(session_id, fresh, 0, bodies)
        return fresh, len(bodies)

    def _bodies(self, session_id: str, decisions: list[Decision]) -> list[str]:
        """Each decision's text (``to_json()``): those this store wrote for the session last
        time, the same objects (a decision never changes: it is frozen), are not serialized
        again."""
        with self._parsed_lock:
            objects, texts = self._texts.get(session_id, ((), ()))
        same = 0
        for kept, decision in zip(objects, decisions, strict=False):
            if kept is not decision:
                break
            same += 1
        bodies = [*texts[:same], *(d.to_json() for d in decisions[same:])]
        with self._parsed_lock:
            self._texts.pop(session_id, None)
            if len(self._texts) >= _PARSED_HEADERS:
                del self._texts[next(iter(self._texts))]
            self._texts[session_id] = (tuple(decisions), tuple(bodies))
        return bodies

    def _list_rows(self, session_id: str, list_id: int, count: int) -> list[str]:
        """The first ``count`` rows of a decision list (known from this store's last write of it)."""
        with self._parsed_lock:
            kept = self._lists.get(session_id)
        if kept is not None and kept[0] == list_id and len(kept[1]) >= count:
            return kept[1][:count]
        rows = self._run(
            "SELECT body FROM history_decisions WHERE session_id = ? AND list_id = ? AND idx < ? ORDER BY idx",
            (session_id, list_id, count),
        ).fetchall()
        return [body for (body,) in rows]

    def _add_decision_rows(self, session_id: str, list_id: int, start: int, bodies: list[str]) -> None:
        if len(bodies) > start:  # (rows past the newest entry's count belong to no entry: replaced)
            self._cur.executemany(
                self.dialect.sql(
                    "INSERT INTO history_decisions VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (session_id, list_id, idx) DO UPDATE SET body = excluded.body"
                ),
                [(session_id, list_id, i, bodies[i]) for i in range(start, len(bodies))],
            )
        self._committed.append(lambda: self._keep_list(session_id, list_id, bodies))

    def _keep_list(self, session_id: str, list_id: int, bodies: list[str]) -> None:
        with self._parsed_lock:
            self._lists.pop(session_id, None)
            if len(self._lists) >= _PARSED_HEADERS:
                del self._lists[next(iter(self._lists))]
            self._lists[session_id] = (list_id, bodies)

    def _collect_garbage(self, session_id: str) -> None:
        """Drop transcripts and decision lists that neither the session nor its history points at."""
        self._run(
            "DELETE FROM messages WHERE session_id = ? AND transcript_id NOT IN ("
            " SELECT transcript_id FROM sessions WHERE session_id = ?"
            " UNION SELECT transcript_id FROM checkpoint_history WHERE session_id = ?)",
            (session_id, session_id, session_id),
        )
        self._run(
            "DELETE FROM history_decisions WHERE session_id = ? AND list_id NOT IN ("
            " SELECT decision_list FROM checkpoint_history WHERE session_id = ? AND decision_list IS NOT NULL)",
            (session_id, session_id),
        )

    # -- tool markers (keyed by the result's transcript position) ------------------
    def tool_result(self, session_id: str, position: int) -> Message | None:
        with self._open(write=False):
            row = self._run(
                "SELECT result FROM tool_markers WHERE session_id = ? AND position = ?", (session_id, position)
            ).fetchone()
        return Message.model_validate_json(row[0]) if row and row[0] else None

    def tool_started(self, session_id: str, position: int) -> int:
        with self._open():
            return self._start(session_id, position)

    def _start(self, session_id: str, position: int) -> int:
        row = self._run(
            "INSERT INTO tool_markers VALUES (?, ?, 1, ?, NULL) ON CONFLICT (session_id, position)"
            " DO UPDATE SET starts = tool_markers.starts + 1 RETURNING starts",
            (session_id, position, self.dialect.to_db_time(now())),
        ).fetchone()
        return row[0] - 1

    def begin_tool_call(
        self, session_id: str, position: int, call: ToolCall, turn_position: int | None, admit: Admit | None
    ) -> ToolCallStart:
        # one transaction: a write one only when the start may be recorded in it
        with self._open(write=admit is not None):
            recorded = self.tool_result(session_id, position)
            row = self._run("SELECT header, transcript_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
            header = None if row is None else self._parse_header(row[0], session_id)
            if recorded is not None or header is None:
                return ToolCallStart(recorded, header, call, None)
            if turn_position is not None:
                [turn] = self._read_messages(session_id, row[1], turn_position, turn_position + 1)
                call = call_in_turn(turn, turn_position, position)
            if admit is None or not admit(call, header):
                return ToolCallStart(None, header, call, None)
            return ToolCallStart(None, header, call, self._start(session_id, position))

    def tool_unstarted(self, session_id: str, position: int) -> None:
        with self._open():
            self._run(
                "UPDATE tool_markers SET starts = starts - 1"
                " WHERE session_id = ? AND position = ? AND result IS NULL AND starts > 0",
                (session_id, position),
            )

    def record_tool_result(
        self, session_id: str, position: int, message: Message, batch_start: int, batch_size: int
    ) -> int:
        check_in_batch(position, batch_start, batch_size)
        body = message.to_json()
        with self._open(session_id):
            row = self._run(
                "SELECT transcript_id, message_count, header FROM sessions WHERE session_id = ?"
                + self.dialect.row_lock,
                (session_id,),
            ).fetchone()
            (kept,) = self._run(  # the first recorded result wins: the one kept is returned
                "INSERT INTO tool_markers VALUES (?, ?, 0, ?, ?) ON CONFLICT (session_id, position)"
                " DO UPDATE SET result = COALESCE(tool_markers.result, excluded.result) RETURNING result",
                (session_id, position, self.dialect.to_db_time(now()), body),
            ).fetchone()
            if row is None:
                raise StoreCorruptError(f"session {session_id!r} vanished from {self.where} mid-run")
            known = {kept: message} if kept == body else {}  # (a result recorded before: parsed from its row)
            return self._advance_results(row, session_id, batch_start, batch_size, {position: kept}, known)

    def _advance_results(
        self,
        row: tuple[int, int, str],
        session_id: str,
        batch_start: int,
        batch_size: int,
        results: dict[int, str],
        known: dict[str, Message],
    ) -> int:
        """Append the batch's recorded results that extend the transcript in position order
        (``results``: those known already; the batch's others are read when it has more)."""
        header = self._parse_header(row[2], session_id)
        count = header.message_count
        if batch_size > 1:
            results = results | dict(
                self._run(
                    "SELECT position, result FROM tool_markers WHERE session_id = ? AND result IS NOT NULL"
                    " AND position >= ? AND position < ?",
                    (session_id, batch_start, batch_start + batch_size),
                ).fetchall()
            )
        if past_batch(session_id, self.where, count, batch_start, batch_size, results):
            return batch_start + batch_size
        new = batch_prefix(session_id, self.where, count, batch_start, batch_size, results)
        if new:
            messages = [known.get(body) or Message.model_validate_json(body) for body in new]
            updated = header.model_copy(update={"message_count": count + len(new), "updated_at": None})
            self._append((row[0], row[1]), stamped(updated, count, messages), count, new)
        return count + len(new)

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

    # -- event log (table ``events``) ----------------------------------------------
    # One row per event: (session, ``seq`` = its offset from 1, optional key, time,
    # body). Appends hold the session's write lock, so offsets are dense and keys
    # unique per session; a keyed event already in the log keeps its offset.
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
