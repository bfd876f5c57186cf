"""File store: plain files in one directory (one host; several processes may share it).

Layout, ``<name>`` being the session id escaped into a safe file name:

- ``sessions/<name>.json``: the latest checkpoint's header (camelCase, with
  ``messageCount``) and the transcript of the message log it reads.
- ``messages/<name>.jsonl``: messages, append-only, one ``[transcript,
  position, message]`` line each. A save writes only new messages; changing
  a message already written starts a new transcript (the unchanged prefix
  copied), so older history entries keep reading their own messages.
  Messages are read from the end of the log back (a transcript's newest lines
  are its last), so reading a step's new messages costs them, not the log;
  ``(sessionUid, transcript)`` is the transcript's token, and a session's
  first transcript number is random (a re-created session repeats none).
- ``history/<name>.json``: the ring of the newest ``history_limit`` saves, each
  a header plus a transcript id; entries share the log, so history grows
  linearly with the session. A damaged file reads as no history and is
  rewritten by the next save.
- ``tools/<name>.d/<k>.jsonl``: tool start markers and results, append-only,
  each keyed by the transcript position of the call's result (``pos``), the
  positions ``256·k … 256·k+255`` in file ``k`` (a call reads its own file, not
  every marker of the session). Rewritten without the stale ones when a save
  drops or changes messages the checkpoint held. ``tools/<name>.jsonl``, one
  file per session written before, is still read (lines of the id-keyed
  format before it are ignored).
- ``events/<name>.jsonl``: the session's event log, append-only (``_file_events.py``).
- ``locks/<name>.lock``: ``flock`` target (writers exclusive, readers shared).
- ``store.json``: the store's identity (``storeId``), made once. Every write
  checks, before and after, that the directory and this file are the ones
  opened: a store deleted or replaced under a live handle raises
  ``StoreCorruptError`` naming the directory, and the write is not reported.

JSON files are replaced atomically (temp file in the same directory, fsync,
``os.replace``); a log is fsynced before the checkpoint that points into it, and
a torn last line left by a crash is skipped. Transcripts nothing points at any
more are dropped by rewriting the log.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from durable_agents.checkpoint.errors import StoreCorruptError, StoreDamageWarning
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    HistoryEntry,
    Message,
    SessionSummary,
)
from durable_agents.checkpoint.stores._common import (
    batch_prefix,
    check_in_batch,
    cutoff_of,
    header_key,
    history_entries,
    now,
    past_batch,
    stale_marker_cut,
    stamped,
    transcript_token,
)
from durable_agents.checkpoint.stores._file_events import FileEvents
from durable_agents.checkpoint.stores._file_records import EXT, FileRecords, Session
from durable_agents.checkpoint.stores._files import (
    check_identity,
    locked,
    open_identity,
    safe_name,
)
from durable_agents.checkpoint.stores._subagents import prune_keep, subagent_sessions
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, CheckpointStore, TranscriptTail

__all__ = ["FileStore", "safe_name"]


class FileStore(FileEvents, FileRecords, CheckpointStore):
    def __init__(self, directory: str | Path, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self.directory = Path(directory).absolute()
        self.history_limit = history_limit
        for sub in ("", *EXT):
            (self.directory / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._store_id, self._identity = open_identity(self.directory)

    @property
    def store_id(self) -> str:
        return self._store_id

    @property
    def location(self) -> str:
        return str(self.directory)

    def __repr__(self) -> str:
        return f"FileStore({str(self.directory)!r}, history_limit={self.history_limit})"

    @contextmanager
    def _locked(self, name: str, exclusive: bool = True) -> Iterator[None]:
        """A session's lock; a writer's (``exclusive``) also checks, before it
        writes and before it reports success, that this is still the store opened."""
        if exclusive:
            check_identity(self.directory, self._identity)
        with locked(self._path("locks", name), exclusive):
            if exclusive:
                check_identity(self.directory, self._identity)
            yield
            if exclusive:
                check_identity(self.directory, self._identity)

    # -- reads ------------------------------------------------------------
    def load_header(self, session_id: str) -> CheckpointHeader | None:
        current = self._read_session(safe_name(session_id))
        return current[0] if current else None

    def load(self, session_id: str) -> Checkpoint | None:
        with self._reading(session_id) as (name, current):
            if current is None:
                return None
            (header, t, _), count = current, current[0].message_count
            return header.with_messages(self._messages(name, self._read_log(name, {t: count})[t], 0, count))

    def load_messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        with self._reading(session_id) as (name, current):
            if current is None:
                return []
            end = current[0].message_count if end is None else end
            return self._messages(name, self._read_tail(name, current[1], start, end), start, end)

    def load_transcript_tail(self, session_id: str, start: int = 0) -> TranscriptTail | None:
        with self._reading(session_id) as (name, current):  # under the shared lock: one snapshot
            if current is None:
                return None
            header, t, _ = current
            count = header.message_count
            messages = (
                self._messages(name, self._read_tail(name, t, start, count), start, count) if start < count else []
            )
        return TranscriptTail(header=header, token=transcript_token(header, t), start=start, messages=messages)

    @contextmanager
    def _reading(self, session_id: str) -> Iterator[tuple[str, Session | None]]:
        name = safe_name(session_id)
        if not self._path("sessions", name).exists():
            yield name, None
            return
        with self._locked(name, exclusive=False):
            yield name, self._read_session(name)

    def history(self, session_id: str, limit: int | None = None) -> list[HistoryEntry]:
        name = safe_name(session_id)
        if not self._path("history", name).exists():
            return []
        with self._locked(name, exclusive=False):
            newest = list(reversed(self._read_history(name) or []))[:limit]
            rows = [(e["parsed"], e["transcript"], e["when"]) for e in newest]
            wanted: dict[int, int] = {}
            for header, t, _ in rows:
                wanted[t] = max(wanted.get(t, 0), header.message_count)
            log = self._read_log(name, wanted)
            return history_entries(rows, lambda t, n: self._messages(name, log[t], 0, n))

    def list_sessions(
        self, *, status: CheckpointStatus | None = None, agent: str | None = None
    ) -> list[SessionSummary]:
        found = []
        for path in (self.directory / "sessions").glob("*.json"):
            h = (self._session_or_warn(path.name[: -len(".json")]) or (None,))[0]
            if h and (status is None or h.status == CheckpointStatus(status)) and (agent is None or h.agent == agent):
                found.append(
                    SessionSummary(
                        session_id=h.session_id,
                        agent=h.agent,
                        status=h.status,
                        step_index=h.step_index,
                        message_count=h.message_count,
                        approval_id=h.approval_id,
                        updated_at=h.updated_at,
                        last_error=h.last_error,
                    )
                )
        return sorted(found, key=lambda s: s.updated_at, reverse=True)  # type: ignore[arg-type,return-value]

    def _session_or_warn(self, name: str) -> Session | None:
        """The session, or None with a ``StoreDamageWarning`` naming its file when
        that cannot be read: one damaged file must not hide the other sessions."""
        try:
            return self._read_session(name)
        except StoreCorruptError as e:
            warnings.warn(f"{e} (skipped; the other sessions are listed)", StoreDamageWarning, stacklevel=3)
            return None

    def tool_result(self, session_id: str, position: int) -> Message | None:
        for event in self._read_tools(safe_name(session_id), position, position + 1):
            if "result" in event:
                return Message.model_validate(event["result"])
        return None

    # -- writes -----------------------------------------------------------
    def append(self, header: CheckpointHeader, start: int, messages: list[Message]) -> None:
        header = stamped(header, start, messages)
        name = safe_name(header.session_id)
        with self._locked(name):
            self._append(name, header, start, [m.to_json() for m in messages])

    def append_new(self, header: CheckpointHeader, start: int, messages: list[Message]) -> bool:
        header = stamped(header, start, messages)
        name = safe_name(header.session_id)
        with self._locked(name):
            current = self._read_session(name)
            if current is not None and current[0].message_count > start:  # another writer's message stands
                return False
            self._append(name, header, start, [m.to_json() for m in messages])
        return True

    def _append(self, name: str, header: CheckpointHeader, start: int, bodies: list[str]) -> None:
        current, end, lines = self._read_session(name), start + len(bodies), []
        count = current[0].message_count if current else 0
        if start > count:
            raise ValueError(f"session {header.session_id!r} has {count} messages; cannot write at {start}")
        changed: list[int] = []
        if current is None:
            t, written, before = self._fresh_transcript(name), 0, set()
        else:
            _, t, written = current
            before = {t}
            overlap = min(written, end)  # positions already written, also past a shorter save's count
            old = self._read_log(name, {t: overlap})[t] if start < overlap else {}
            changed = [p for p in range(start, overlap) if old.get(p) != bodies[p - start]]
            if changed:
                # A written message changes: older history entries keep the old transcript.
                prefix = self._read_log(name, {t: start})[t] if start else {}
                self._messages(name, prefix, 0, start)  # all there and readable
                t, written = self._fresh_transcript(name), start
                lines = [f"[{t},{p},{prefix[p]}]" for p in range(start)]
        lines += [f"[{t},{p},{bodies[p - start]}]" for p in range(max(start, written), end)]
        if lines:
            self._append_lines(self._path("messages", name), lines)
        self._replace(
            self._path("sessions", name),
            {"checkpoint": header.to_dict(), "transcript": t, "written": max(written, end)},
        )
        cut = stale_marker_cut(count, header.message_count, changed)
        if cut is not None:
            self._drop_markers_from(name, cut)
        entries = self._read_history(name)
        damaged, entries = entries is None, entries or []
        before |= {e["transcript"] for e in entries}
        if damaged and self.history_limit <= 0:
            self._path("history", name).unlink()
        if self.history_limit > 0:
            key = json.loads(header_key(header))
            if not entries or entries[-1]["header"] != key or entries[-1]["transcript"] != t:
                entries.append(
                    {
                        "seq": entries[-1]["seq"] + 1 if entries else 1,
                        "transcript": t,
                        "header": key,
                        "savedAt": (header.updated_at or now()).isoformat(),
                    }
                )
                entries = entries[-self.history_limit :]
                self._write_history(name, entries)
        if damaged or before - {t} - {e["transcript"] for e in entries}:
            self._compact(name)

    def tool_started(self, session_id: str, position: int) -> int:
        name = safe_name(session_id)
        with self._locked(name):
            starts = self._starts(name, position)
            self._add_marker(name, {"pos": position, "start": now().isoformat()})
        return starts

    def _starts(self, name: str, position: int) -> int:
        events = self._read_tools(name, position, position + 1)
        return sum(1 for e in events if "start" in e) - sum(1 for e in events if "unstart" in e)

    def tool_unstarted(self, session_id: str, position: int) -> None:
        name = safe_name(session_id)
        with self._locked(name):
            events = self._read_tools(name, position, position + 1)
            if self._starts(name, position) > 0 and not any("result" in e for e in events):
                self._add_marker(name, {"pos": position, "unstart": now().isoformat()})

    def record_tool_result(
        self, session_id: str, position: int, message: Message, batch_start: int, batch_size: int
    ) -> int:
        check_in_batch(position, batch_start, batch_size)
        name, where = safe_name(session_id), str(self.directory)
        with self._locked(name):
            results: dict[int, Any] = {}
            for e in self._read_tools(name, batch_start, batch_start + batch_size):
                if "result" in e:
                    results.setdefault(e["pos"], e["result"])  # the first recorded result wins
            if position not in results:
                results[position] = message.to_dict()
                self._add_marker(name, {"pos": position, "result": results[position]})
            current = self._read_session(name)
            if current is None:
                raise StoreCorruptError(f"session {session_id!r} vanished from {self.directory} mid-run")
            header, count = current[0], current[0].message_count
            if past_batch(session_id, where, count, batch_start, batch_size, results):
                return batch_start + batch_size
            new = [
                Message.model_validate(r)
                for r in batch_prefix(session_id, where, count, batch_start, batch_size, results)
            ]
            if new:
                updated = header.model_copy(update={"message_count": count + len(new), "updated_at": None})
                self._append(name, stamped(updated, count, new), count, [m.to_json() for m in new])
        return count + len(new)

    # -- management ---------------------------------------------------------
    # -- run input: one file per run, named by session and token ------------------
    def _input_path(self, session_id: str, token: str) -> Path:
        return self._path("inputs", f"{safe_name(session_id)}--{safe_name(token)}")

    def put_run_input(self, session_id: str, token: str, messages: list[Message]) -> None:
        with self._locked(safe_name(session_id)):
            self._replace(self._input_path(session_id, token), [m.to_dict() for m in messages])

    def run_input(self, session_id: str, token: str) -> list[Message] | None:
        try:
            raw = json.loads(self._input_path(session_id, token).read_bytes())
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise StoreCorruptError(f"run input {self._input_path(session_id, token)} is damaged: {e}") from e
        return [Message.model_validate(m) for m in raw]

    def drop_run_input(self, session_id: str, token: str) -> None:
        with self._locked(safe_name(session_id)):
            self._input_path(session_id, token).unlink(missing_ok=True)

    def delete(self, session_id: str, keep_history: bool = False) -> None:
        for sid in [*reversed(subagent_sessions(self, session_id)), session_id]:  # its sub-agents' too
            self._delete_one(sid, keep_history)

    def _delete_one(self, session_id: str, keep_history: bool) -> None:
        name = safe_name(session_id)
        for stale in (self.directory / "inputs").glob(f"{name}--*.json"):
            stale.unlink(missing_ok=True)
        with self._locked(name):
            self._path("sessions", name).unlink(missing_ok=True)
            self._delete_markers(name)
            if not keep_history:
                self._path("history", name).unlink(missing_ok=True)
                self._delete_events(session_id)
            self._compact(name)

    def prune(
        self, older_than: timedelta | datetime, *, keep: Collection[str] = (), include_waiting: bool = False
    ) -> int:
        keep = prune_keep(self, cutoff_of(older_than), keep, include_waiting)  # sub-agent sessions go with their parent
        cutoff, gone, kept_names = cutoff_of(older_than), 0, {safe_name(s) for s in keep}
        names = {
            p.name.rsplit(".", 1)[0] for kind in ("sessions", "history") for p in (self.directory / kind).glob("*.json")
        }
        for name in sorted(names):
            with self._locked(name):
                try:
                    current = self._read_session(name)
                except StoreCorruptError as e:  # kept as it is, for its owner to repair
                    warnings.warn(f"{e} (not pruned)", StoreDamageWarning, stacklevel=2)
                    continue
                protected = name in kept_names or (
                    current is not None
                    and not include_waiting
                    and current[0].status == CheckpointStatus.AWAITING_APPROVAL
                )
                if current is not None and not protected and (current[0].updated_at or cutoff) < cutoff:
                    self._path("sessions", name).unlink()
                    self._delete_markers(name)
                    self._delete_events_file(name)
                    gone += 1
                entries = self._read_history(name) or []
                kept = [e for e in entries if e["when"] >= cutoff]
                if not kept:
                    self._path("history", name).unlink(missing_ok=True)
                elif len(kept) < len(entries):
                    self._write_history(name, kept)
                self._compact(name)
        return gone
