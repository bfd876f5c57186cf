"""File primitives of ``FileStore``: safe names, atomic replace, append-only logs, locks, identity."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from durable_agents.checkpoint.errors import StoreCorruptError

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


def lines_backwards(f: BinaryIO, block: int = 1 << 16) -> Iterator[bytes]:
    """The newline-terminated lines of the binary file ``f``, last first, without their
    newline (bytes after the last newline, a line torn by a crash, are none)."""
    pos = f.seek(0, os.SEEK_END)
    rest, ended = b"", False  # rest: bytes read but not yet yielded (ending at a newline once ended)
    while pos > 0:
        size = min(block, pos)
        pos -= size
        f.seek(pos)
        rest = f.read(size) + rest
        if not ended:
            last = rest.rfind(b"\n")
            if last < 0:
                continue  # still inside the unterminated end
            rest, ended = rest[: last + 1], True
        parts = rest.split(b"\n")  # rest ends with a newline: parts[-1] is empty
        yield from reversed(parts[1:-1])
        rest = parts[0] + b"\n"
    if ended:
        yield rest[:-1]


# -- the store's identity: <directory>/store.json, made once ------------------------
META = "store.json"
Identity = tuple[tuple[int, int], tuple[int, int, int, int]]
"""(device, inode) of the directory; (device, inode, size, mtime) of its identity file."""


def open_identity(directory: Path) -> tuple[str, Identity]:
    """The store id in ``directory`` (made the first time, atomically, by one
    opener only) and what identifies the files it was read from."""
    meta = directory / META
    if not meta.exists():
        data = json.dumps({"storeId": secrets.token_hex(16), "formatVersion": 1})
        tmp = meta.with_name(f"{META}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            with open(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w", encoding="utf-8") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, meta)  # never replaces one another opener made first
            except FileExistsError:
                pass
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(directory)
    try:
        store_id = json.loads(meta.read_bytes())["storeId"]
        if not isinstance(store_id, str) or not store_id:
            raise ValueError("storeId is not a string")
    except (ValueError, KeyError, TypeError) as e:
        raise StoreCorruptError(
            f"the identity file {meta} of FileStore {directory} cannot be read ({e}); restore it from a backup"
        ) from e
    return store_id, identity_of(directory)


def identity_of(directory: Path) -> Identity:
    """Two stats: the directory and its identity file (``FileNotFoundError`` if either is gone)."""
    d, m = os.stat(directory), os.stat(directory / META)
    return (d.st_dev, d.st_ino), (m.st_dev, m.st_ino, m.st_size, m.st_mtime_ns)


def check_identity(directory: Path, opened: Identity) -> None:
    """Raise unless ``directory`` is still the store directory that was opened."""
    try:
        found = identity_of(directory)
    except FileNotFoundError as e:
        gone = "was deleted" if e.filename == str(directory) else f"lost its identity file {META}"
        raise StoreCorruptError(
            f"FileStore {directory} {gone} while this store had it open: this write was not saved; open the store again"
        ) from None
    if found != opened:
        what = "is another directory" if found[0] != opened[0] else f"holds another {META}"
        raise StoreCorruptError(
            f"FileStore {directory} was replaced while this store had it open (it {what} now, "
            "another store): this write was not saved there; open the store again"
        )
