"""The write half of ``SqlStore`` (see ``_sql.py``): transcripts, the history ring, tool results.

Every method here runs inside a write transaction that ``SqlStore._open``
began, through ``SqlStore._run``; the public ones open it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import CheckpointHeader, Message
from durable_agents.checkpoint.stores._common import (
    batch_prefix,
    check_in_batch,
    fresh_transcript_base,
    header_key,
    now,
    past_batch,
    stale_marker_cut,
    stamped,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from durable_agents.checkpoint.stores._sql import Dialect

_UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, transcript_id, header, agent, status, step_index, message_count,"
    " approval_id, updated_at, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
    " transcript_id = excluded.transcript_id, header = excluded.header, agent = excluded.agent,"
    " status = excluded.status, step_index = excluded.step_index, message_count = excluded.message_count,"
    " approval_id = excluded.approval_id, updated_at = excluded.updated_at, last_error = excluded.last_error"
)


class SqlWrites:
    """Writes of the SQL stores, over what ``SqlStore`` provides."""

    dialect: ClassVar[Dialect]
    history_limit: int
    _cur: Any

    if TYPE_CHECKING:

        @property
        def where(self) -> str: ...

        def _open(self, session_id: str | None = None, *, write: bool = True) -> AbstractContextManager[Any]: ...
        def _run(self, query: str, params: tuple[Any, ...] | list[Any] = ()) -> Any: ...
        def _session_row(self, session_id: str, *, lock: bool = False) -> tuple[int, int] | None: ...
        def _parse_header(self, raw: str, session_id: str) -> CheckpointHeader: ...

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
        self._run(
            _UPSERT_SESSION,
            (
                header.session_id,
                transcript_id,
                header.to_json(),
                header.agent,
                header.status.value,
                header.step_index,
                header.message_count,
                header.approval_id,
                saved_at,
                header.last_error.to_json() if header.last_error else None,
            ),
        )
        if self.history_limit <= 0:
            if replaced is not None:  # (collecting on every save would read the whole transcript)
                self._collect_garbage(header.session_id)
        else:
            self._add_history_entry(header, transcript_id, saved_at)

    def _add_history_entry(self, header: CheckpointHeader, transcript_id: int, saved_at: object) -> None:
        sid, key = header.session_id, header_key(header)
        newest = self._run(
            "SELECT seq, header, transcript_id FROM checkpoint_history WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (sid,),
        ).fetchone()
        if newest is not None and newest[1] == key and newest[2] == transcript_id:
            return  # the same save again (a retried activity): no new entry
        seq = newest[0] + 1 if newest else 1
        self._run(
            "INSERT INTO checkpoint_history VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, seq, header.step_index, saved_at, header.status.value, transcript_id, key),
        )
        dropped = self._run(
            "DELETE FROM checkpoint_history WHERE session_id = ? AND seq <= ? RETURNING transcript_id",
            (sid, seq - self.history_limit),
        ).fetchall()
        if any(t != transcript_id for (t,) in dropped):
            self._collect_garbage(sid)

    def _collect_garbage(self, session_id: str) -> None:
        """Drop transcripts that neither the session nor its history points at."""
        self._run(
            "DELETE FROM messages WHERE session_id = ? AND transcript_id NOT IN ("
            " SELECT transcript_id FROM sessions WHERE session_id = ?"
            " UNION SELECT transcript_id FROM checkpoint_history WHERE session_id = ?)",
            (session_id, session_id, session_id),
        )

    # -- tool markers (keyed by the result's transcript position) ------------------
    def tool_started(self, session_id: str, position: int) -> int:
        with self._open():
            row = self._run(
                "INSERT INTO tool_markers VALUES (?, ?, 1, ?, NULL) ON CONFLICT (session_id, position)"
                " DO UPDATE SET starts = tool_markers.starts + 1 RETURNING starts",
                (session_id, position, self.dialect.to_db_time(now())),
            ).fetchone()
        return row[0] - 1

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
        with self._open(session_id):
            row = self._session_row(session_id, lock=True)
            self._run(
                "INSERT INTO tool_markers VALUES (?, ?, 0, ?, ?) ON CONFLICT (session_id, position)"
                " DO UPDATE SET result = COALESCE(tool_markers.result, excluded.result)",
                (session_id, position, self.dialect.to_db_time(now()), message.to_json()),
            )
            if row is None:
                raise StoreCorruptError(f"session {session_id!r} vanished from {self.where} mid-run")
            return self._advance_results(row, session_id, batch_start, batch_size)

    def _advance_results(self, row: tuple[int, int], session_id: str, batch_start: int, batch_size: int) -> int:
        """Append the batch's recorded results that extend the transcript in position order."""
        raw = self._run("SELECT header FROM sessions WHERE session_id = ?", (session_id,)).fetchone()[0]
        header = self._parse_header(raw, session_id)
        count = header.message_count
        results: dict[int, str] = dict(
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
            messages = [Message.model_validate_json(body) for body in new]
            updated = header.model_copy(update={"message_count": count + len(new), "updated_at": None})
            self._append(row, stamped(updated, count, messages), count, new)
        return count + len(new)
