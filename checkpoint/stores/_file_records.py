"""The records of ``FileStore`` (see ``file.py`` for the layout): reading and
writing a session's checkpoint, history ring, message log and tool markers.

Callers hold the session's lock (``FileStore._locked``).
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import CheckpointHeader, Message
from durable_agents.checkpoint.stores._common import fresh_transcript_base
from durable_agents.checkpoint.stores._files import append_lines, lines_backwards, replace_file

EXT = {
    "sessions": ".json",
    "history": ".json",
    "messages": ".jsonl",
    "tools": ".jsonl",
    "locks": ".lock",
    "inputs": ".json",
    "events": ".jsonl",
}
Session = tuple[CheckpointHeader, int, int]  # header, transcript id, positions written to it
MARKER_BUCKET = 256
"""Transcript positions per tool-marker file."""


def _markers(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # torn by a crash
        if isinstance(event, dict) and type(event.get("pos")) is int:
            events.append(event)
    return events


class FileRecords:
    """A session's files under ``directory``."""

    directory: Path

    def _path(self, kind: str, name: str) -> Path:
        return self.directory / kind / (name + EXT[kind])

    def _replace(self, path: Path, data: Any) -> None:
        replace_file(path, data)

    def _append_lines(self, path: Path, lines: list[str]) -> None:
        append_lines(path, lines)

    def _read_session(self, name: str) -> Session | None:
        path = self._path("sessions", name)
        try:
            data = json.loads(path.read_bytes())
            return CheckpointHeader.model_validate(data["checkpoint"]), int(data["transcript"]), int(data["written"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as e:
            raise StoreCorruptError(
                f"checkpoint file {path} cannot be read ({e}); move it aside or restore a backup"
            ) from e

    def _read_history(self, name: str) -> list[dict[str, Any]] | None:
        """The ring, oldest first; None when the file is damaged."""
        try:
            entries = json.loads(self._path("history", name).read_bytes())["entries"]
            for e in entries:
                e["parsed"] = CheckpointHeader.model_validate(e["header"])
                e["when"] = datetime.fromisoformat(e["savedAt"])
                e["transcript"], e["seq"] = int(e["transcript"]), int(e["seq"])
            return entries
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError):
            return None

    def _write_history(self, name: str, entries: list[dict[str, Any]]) -> None:
        self._replace(
            self._path("history", name),
            {"entries": [{k: e[k] for k in ("seq", "savedAt", "transcript", "header")} for e in entries]},
        )

    def _read_log(self, name: str, wanted: dict[int, int] | None = None) -> dict[int, dict[int, str]]:
        """Message bodies by transcript and position (below ``wanted[t]``; later lines win)."""
        out: dict[int, dict[int, str]] = {t: {} for t in wanted or {}}
        try:
            f = self._path("messages", name).open("rb")
        except FileNotFoundError:
            return out
        with f:
            for line in f:
                if not (line.startswith(b"[") and line.endswith(b"]\n")):
                    continue  # torn by a crash
                try:
                    t_raw, p_raw, body = line[1:-2].split(b",", 2)
                    t, p = int(t_raw), int(p_raw)
                except ValueError:
                    continue  # torn by a crash
                if wanted is None or (t in wanted and p < wanted[t]):
                    out.setdefault(t, {})[p] = body.decode()
        return out

    def _read_tail(self, name: str, transcript: int, start: int, end: int) -> dict[int, str]:
        """Bodies of positions ``start … end-1`` of ``transcript``, like :meth:`_read_log`
        (the last line of a position wins) but read from the end of the log back only as
        far as those positions go: a transcript's newest lines are the log's last, so a
        step's read costs the lines it adds, not the log's length."""
        out: dict[int, str] = {}
        if start >= end:
            return out
        try:
            f = self._path("messages", name).open("rb")
        except FileNotFoundError:
            return out
        with f:
            for line in lines_backwards(f):
                if not (line.startswith(b"[") and line.endswith(b"]")):
                    continue  # torn by a crash
                try:
                    t_raw, p_raw, body = line[1:-1].split(b",", 2)
                    t, p = int(t_raw), int(p_raw)
                except ValueError:
                    continue  # torn by a crash
                if t == transcript and start <= p < end and p not in out:
                    out[p] = body.decode()
                    if len(out) == end - start:
                        break
        return out

    def _messages(self, name: str, bodies: dict[int, str], start: int, end: int) -> list[Message]:
        try:
            return [Message.model_validate_json(bodies[p]) for p in range(start, end)]
        except (KeyError, ValueError) as e:
            raise StoreCorruptError(
                f"message log {self._path('messages', name)} lacks or garbles messages "
                f"{start}..{end - 1} ({e!r}); the store is damaged"
            ) from e

    # Tool markers: ``tools/<name>.d/<k>.jsonl`` holds the lines of positions
    # ``k * MARKER_BUCKET …`` (in the order written), so a call reads the few lines of
    # its bucket, not every marker of a long session. ``tools/<name>.jsonl`` (one file
    # per session, before buckets) is still read, never written to again.
    def _marker_dir(self, name: str) -> Path:
        return self.directory / "tools" / f"{name}.d"

    def _marker_file(self, name: str, position: int) -> Path:
        return self._marker_dir(name) / f"{position // MARKER_BUCKET}.jsonl"

    def _add_marker(self, name: str, event: dict[str, Any]) -> None:
        path = self._marker_file(name, event["pos"])
        path.parent.mkdir(exist_ok=True)
        self._append_lines(path, [json.dumps(event)])

    def _read_tools(self, name: str, first: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        """The markers of positions ``first … end - 1`` (every one when ``end`` is None), in write order."""
        paths = [self._path("tools", name)]
        if end is None:
            paths += sorted(self._marker_dir(name).glob("*.jsonl"), key=lambda p: int(p.stem))
        else:
            paths += [
                self._marker_dir(name) / f"{k}.jsonl"
                for k in range(first // MARKER_BUCKET, (end - 1) // MARKER_BUCKET + 1)
            ]
        return [e for path in paths for e in _markers(path) if e["pos"] >= first and (end is None or e["pos"] < end)]

    def _drop_markers_from(self, name: str, cut: int) -> None:
        """Forget the tool markers at positions ``cut`` and after."""
        for path in [self._path("tools", name), *self._marker_dir(name).glob("*.jsonl")]:
            events = _markers(path)
            if any(e["pos"] >= cut for e in events):
                self._replace(path, "".join(json.dumps(e) + "\n" for e in events if e["pos"] < cut))

    def _delete_markers(self, name: str) -> None:
        self._path("tools", name).unlink(missing_ok=True)
        shutil.rmtree(self._marker_dir(name), ignore_errors=True)

    def _fresh_transcript(self, name: str) -> int:
        found = self._read_log(name)
        return max(found) + 1 if found else fresh_transcript_base()

    def _compact(self, name: str) -> None:
        """Rewrite the log keeping only transcripts the session or its history reads."""
        current, wanted = self._read_session(name), {}
        if current is not None:
            wanted[current[1]] = current[2]
        for e in self._read_history(name) or []:
            wanted[e["transcript"]] = max(wanted.get(e["transcript"], 0), e["parsed"].message_count)
        path = self._path("messages", name)
        if not wanted:
            path.unlink(missing_ok=True)
            return
        log = sorted(self._read_log(name, wanted).items())
        self._replace(path, "".join(f"[{t},{p},{body}]\n" for t, bodies in log for p, body in sorted(bodies.items())))
