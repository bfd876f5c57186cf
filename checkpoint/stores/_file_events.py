"""``FileStore``'s event log: ``events/<name>.jsonl``, append-only.

One line per event: ``<offset>\\t<key as JSON, or null>\\t<length>\\t<body>`` (bodies
are JSON, or sealed text, without newlines; the length, in characters, tells a
whole line from one a crash cut short). Appends hold the session's lock; each
handle keeps, per session, where its last read or append ended (the file's
inode, size, next offset and keys), so tailing a log reads only what is new.
A line torn by a crash is ended by the next append and skipped by readers.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from durable_agents.checkpoint.events import StoredEvent
from durable_agents.checkpoint.stores._files import append_lines, safe_name

_STATES_LOCK = threading.Lock()


@dataclass
class _LogState:
    inode: int
    size: int = 0
    """Bytes of the file parsed (complete lines only)."""
    next_offset: int = 1
    keys: dict[str, int] = field(default_factory=dict)


def _parse(line: bytes) -> tuple[int, str | None, str] | None:
    try:
        offset, key, length, body = line.decode("utf-8").split("\t", 3)
        parsed_key = json.loads(key)
        if len(body) != int(length):
            return None
        return int(offset), parsed_key if isinstance(parsed_key, str) else None, body
    except (ValueError, UnicodeDecodeError):
        return None  # a torn line ended by a later append


class FileEvents:
    directory: Path

    if TYPE_CHECKING:

        def _locked(self, name: str, exclusive: bool = True) -> AbstractContextManager[None]: ...

    def _events_path(self, session_id: str) -> Path:
        return self._events_file(safe_name(session_id))

    def _events_file(self, name: str) -> Path:
        return self.directory / "events" / f"{name}.jsonl"

    def _event_logs(self, kind: str) -> tuple[threading.Lock, dict[Path, _LogState]]:
        """This handle's log states: ``"write"`` (next offset, keys) or ``"read"`` (a tailing reader's place)."""
        with _STATES_LOCK:
            states = self.__dict__.setdefault("_event_states", {"write": {}, "read": {}, "lock": threading.Lock()})
        return states["lock"], states[kind]

    def _scan(self, path: Path, state: _LogState | None) -> tuple[_LogState, list[tuple[int, str | None, str, int]]]:
        """``state`` brought up to the file's end, and the events read past it, each with
        the file position right after its line."""
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return _LogState(inode=-1), []
        with f:
            st = os.fstat(f.fileno())
            if state is None or state.inode != st.st_ino or state.size > st.st_size:
                state = _LogState(inode=st.st_ino)  # new or replaced file: from the start
            f.seek(state.size)
            data = f.read()
        found = []
        at = 0
        while (stop := data.find(b"\n", at)) >= 0:  # complete lines only: an append may be half-way
            row = _parse(data[at:stop])
            at = stop + 1
            if row is None:
                continue
            found.append((*row, state.size + at))
            state.next_offset = max(state.next_offset, row[0] + 1)
            if row[1] is not None:
                state.keys.setdefault(row[1], row[0])
        state.size += at
        return state, found

    def append_events(self, session_id: str, events: list[tuple[str | None, str]]) -> list[int]:
        if not events:
            return []
        path = self._events_path(session_id)
        lock, writers = self._event_logs("write")
        with self._locked(safe_name(session_id)):
            with lock:
                state, _ = self._scan(path, writers.pop(path, None))
            offsets, lines = [], []
            for key, body in events:
                if "\n" in body or "\r" in body:
                    raise ValueError("an event body must be one line of JSON")
                if key is not None and key in state.keys:
                    offsets.append(state.keys[key])
                    continue
                offset = state.next_offset
                state.next_offset += 1
                if key is not None:
                    state.keys[key] = offset
                lines.append(f"{offset}\t{json.dumps(key)}\t{len(body)}\t{body}")
                offsets.append(offset)
            if lines:
                append_lines(path, lines)
                state, _ = self._scan(path, state)  # past what was just written
            with lock:
                writers[path] = state
        return offsets

    def read_events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        path = self._events_path(session_id)
        lock, readers = self._event_logs("read")
        with lock:
            cursor = readers.pop(path, None)
        # a reader tailing the log goes on from where its last read ended (else: from the start)
        if cursor is not None and cursor.next_offset > after + 1:
            cursor = None
        state, rows = self._scan(path, cursor)
        found = [row for row in rows if row[0] > after]
        if limit is not None and len(found) > limit:
            found = found[:limit]  # the next read goes on right after the last one returned
            state = _LogState(inode=state.inode, size=found[-1][3], next_offset=found[-1][0] + 1)
        state.keys.clear()  # readers need no keys
        with lock:
            readers[path] = state
        return [StoredEvent(offset=o, key=k, body=b) for o, k, b, _ in found]

    def last_event_offset(self, session_id: str) -> int:
        path = self._events_path(session_id)
        lock, writers = self._event_logs("write")
        with lock:
            state, _ = self._scan(path, writers.pop(path, None))
            writers[path] = state
        return state.next_offset - 1

    def _delete_events(self, session_id: str) -> None:
        self._delete_events_file(safe_name(session_id))

    def _delete_events_file(self, name: str) -> None:
        """With the session's lock held."""
        path = self._events_file(name)
        path.unlink(missing_ok=True)
        for kind in ("write", "read"):
            lock, states = self._event_logs(kind)
            with lock:
                states.pop(path, None)
