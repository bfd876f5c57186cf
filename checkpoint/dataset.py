"""Recorded runs as a dataset: a file of checkpoints, one JSON object a line.

``export_sessions`` writes sessions of a store to a file, each passed through a
redaction function of yours first; ``read_dataset`` reads one back (a malformed line is
refused naming its file and line); :class:`Recordings` is where a replay reads its
sources, a store or a dataset file, so a repository can keep a fixture of real runs and
replay it without the store they came from. Engine-independent: no Temporal.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus
from durable_agents.checkpoint.replay import REPLAY_MARK

Redact = Callable[[Checkpoint], Checkpoint]
"""What is done to each checkpoint before it is written (drop secrets, mask personal data)."""


def export_sessions(store: Any, session_ids: Iterable[str], path: str | Path, *, redact: Redact | None = None) -> int:
    """Write the newest checkpoint of each session to ``path`` (one JSON line each, the
    documented format), through ``redact`` when given; returns how many. An unknown session
    raises ``CheckpointNotFoundError`` before anything is written; the file is replaced
    whole (written aside, then renamed), so a failed export leaves no half file."""
    checkpoints = []
    for session_id in session_ids:
        checkpoint = store.load(session_id)
        if checkpoint is None:
            raise CheckpointNotFoundError(
                f"no session {session_id!r} in {store!r}: nothing exported", session_id=session_id
            )
        if redact is not None:
            checkpoint = redact(checkpoint)
            if not isinstance(checkpoint, Checkpoint):
                raise ConfigurationError(
                    f"the redaction function returned {type(checkpoint).__name__}, not a Checkpoint"
                )
        checkpoints.append(checkpoint)
    write_dataset(checkpoints, path)
    return len(checkpoints)


def write_dataset(checkpoints: Iterable[Checkpoint], path: str | Path) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, aside = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for checkpoint in checkpoints:
                out.write(checkpoint.model_dump_json(by_alias=True, exclude_none=True))
                out.write("\n")
        os.replace(aside, target)
    except BaseException:
        Path(aside).unlink(missing_ok=True)
        raise


def read_dataset(path: str | Path) -> list[Checkpoint]:
    """The checkpoints of a dataset file, in order. A missing file, a line that is not JSON
    or not a checkpoint, or a session twice, raises ``ConfigurationError`` naming the line."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigurationError(f"dataset {str(source)!r}: cannot read it ({e.strerror})") from None
    found: list[Checkpoint] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"dataset {str(source)!r} line {number}"
        try:
            data = json.loads(line)
        except ValueError as e:
            raise ConfigurationError(f"{where}: malformed JSON ({getattr(e, 'msg', e)})") from None
        try:
            checkpoint = Checkpoint.model_validate(data)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            field = ".".join(str(p) for p in first["loc"]) or "the line"
            raise ConfigurationError(f"{where}: not a checkpoint ({field}: {first['msg']})") from None
        if checkpoint.session_id in seen:
            raise ConfigurationError(f"{where}: session {checkpoint.session_id!r} is in the file twice")
        seen.add(checkpoint.session_id)
        found.append(checkpoint)
    return found


def select_sessions(
    store: Any,
    *,
    agent: str | None = None,
    status: CheckpointStatus | str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[str]:
    """Top-level sessions of ``agent`` with ``status``, last saved between ``since`` and
    ``until``, oldest first; sub-agent sessions and replays (``…replay-<tag>``) are left out."""
    wanted = CheckpointStatus(status) if status is not None else None
    found = []
    for s in store.list_sessions(status=wanted, agent=agent):
        if "/" in s.session_id or REPLAY_MARK in s.session_id:  # a sub-agent's session, a replay
            continue
        saved = s.updated_at
        if saved is not None and ((since and saved < since) or (until and saved > until)):
            continue
        found.append((saved.timestamp() if saved else 0.0, s.session_id))
    return [sid for _, sid in sorted(found)]


class Recordings(Protocol):
    """Where a replay reads its sources."""

    def load(self, session_id: str) -> Checkpoint | None: ...

    def session_ids(self) -> list[str]: ...


class StoreRecordings:
    """The sources are sessions of a checkpoint store."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def load(self, session_id: str) -> Checkpoint | None:
        loaded: Checkpoint | None = self.store.load(session_id)
        return loaded

    def session_ids(self) -> list[str]:
        return [s.session_id for s in self.store.list_sessions()]

    def __repr__(self) -> str:
        return f"StoreRecordings({self.store!r})"


class DatasetRecordings:
    """The sources are the lines of a dataset file (read once)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._by_id = {c.session_id: c for c in read_dataset(self.path)}

    def load(self, session_id: str) -> Checkpoint | None:
        return self._by_id.get(session_id)

    def session_ids(self) -> list[str]:
        return list(self._by_id)

    def __repr__(self) -> str:
        return f"DatasetRecordings({str(self.path)!r})"


def require(recordings: Recordings, session_id: str) -> Checkpoint:
    """The source ``session_id``, or ``CheckpointNotFoundError`` naming where it was looked for."""
    found = recordings.load(session_id)
    if found is None:
        raise CheckpointNotFoundError(f"no recorded session {session_id!r} in {recordings!r}", session_id=session_id)
    return found


__all__ = [
    "DatasetRecordings",
    "Recordings",
    "Redact",
    "StoreRecordings",
    "export_sessions",
    "read_dataset",
    "require",
    "select_sessions",
    "write_dataset",
]
