"""File primitives of ``FileStore``: safe names, atomic replace, append-only logs, locks."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def safe_name(session_id: str) -> str:
    """``[a-z0-9_-]`` kept, anything else ``%XX`` (no ``/``, ``..`` or case clash); long ids hashed."""
    raw = session_id.encode("utf-8", "surrogatepass")
    name = (
        "".join(
            c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")) for c in session_id
        )
        or "%"
    )
    return name if len(name) <= 180 else name[:120] + "~" + hashlib.sha256(raw).hexdigest()


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def locked(path: Path, exclusive: bool = True) -> Iterator[None]:
    """``flock`` on ``path`` (created if missing): exclusive for writers, shared for readers."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def replace_file(path: Path, data: Any) -> None:
    """Write ``data`` (text, or JSON of it) to ``path`` atomically: temp file, fsync, rename."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w", encoding="utf-8") as f:
            f.write(data if isinstance(data, str) else json.dumps(data, separators=(",", ":")))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def append_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to a log and fsync it (a line torn by a crash is ended first)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # end a line torn by a crash
        data = (("\n" if torn else "") + "".join(line + "\n" for line in lines)).encode()
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if size == 0:
        fsync_dir(path.parent)
