"""Store errors that say what is wrong (and lose nothing): read-only, disk full,
a damaged page or file, each naming the store's file."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from durable_agents.checkpoint import Checkpoint, FileStore, Message, SqliteStore
from durable_agents.checkpoint.conformance._base import grow, loaded
from durable_agents.checkpoint.errors import (
    DurableAgentsError,
    StoreCorruptError,
    StoreDamageWarning,
    StoreUnavailableError,
)

NOBODY = 65534


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="da-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def _as_another_user() -> Iterator[None]:
    """Run as a user that does not own the test's files (root ignores file modes)."""
    if os.geteuid() != 0:
        yield
        return
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)


def _as_another_user_raised(fn: Callable[[], object]) -> str:
    """What ``fn`` raised when run as a user that does not own the files, or ``done``."""
    with _as_another_user():
        try:
            fn()
        except DurableAgentsError as e:
            return f"{type(e).__name__} {e}"
    return "done"


def _open_as_another_user(path: Path) -> str:
    return _as_another_user_raised(lambda: SqliteStore(path).close())


def test_a_store_file_that_is_not_writable_reads_and_refuses_writes_as_read_only(shared_dir):
    shared_dir.chmod(0o777)
    path = shared_dir / "store.db"
    store = SqliteStore(path)
    grow(store, "a", 1)
    store.close()
    path.chmod(0o444)

    def read_then_write() -> None:
        other = SqliteStore(path)
        try:
            assert len(loaded(other, "a").messages) == 3  # what is there still reads
            grow(other, "b", 1)
        finally:
            other.close()

    said = _as_another_user_raised(read_then_write)
    assert said.startswith("ConfigurationError") and "read-only" in said and f"file {path}" in said, said
    assert "damaged" not in said and "move it aside" not in said


def test_a_store_whose_directory_is_not_writable_is_named_read_only(shared_dir):
    path = shared_dir / "store.db"
    SqliteStore(path).close()  # closed: SQLite removed its -wal and -shm files, it must create them again
    path.chmod(0o666)
    said = _open_as_another_user(path)
    assert said.startswith("ConfigurationError") and "read-only" in said, said
    assert f"directory {shared_dir}" in said and "damaged" not in said, said
    said = _open_as_another_user(shared_dir / "new.db")  # nor can a new store be made there
    assert said.startswith("ConfigurationError") and "read-only" in said and str(shared_dir) in said, said


def test_a_full_disk_says_so_and_keeps_what_was_saved(tmp_path):
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    grow(store, "a", 2)
    before = loaded(store, "a").to_json()
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full: not one page more
    big = Checkpoint(session_id="b", messages=[Message.user("x" * 200_000)])
    with pytest.raises(StoreUnavailableError, match="disk full") as info:
        store.save(big)
    assert str(path) in str(info.value) and "rollback" not in str(info.value)
    header = store.load_header("a")
    with pytest.raises(StoreUnavailableError, match="disk full"):
        store.append(header.model_copy(update={"message_count": 5}), 4, [Message.user("y" * 200_000)])
    assert loaded(store, "a").to_json() == before and store.load("b") is None
    store._db.execute("PRAGMA max_page_count = 1073741823")  # space is freed: the same writes land
    store.save(big)
    assert loaded(store, "b").messages == big.messages
    store.close()


def test_a_damaged_page_names_the_file(tmp_path):
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    grow(store, "a", 40, size=200)
    store.close()
    db = sqlite3.connect(path)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    db.close()
    with open(path, "r+b") as f:  # the messages table's root page is garbage now
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * page_size)
    store = SqliteStore(path)
    assert store.load_header("a") is not None  # other pages still read
    with pytest.raises(StoreCorruptError, match=str(path)):
        store.load("a")
    store.close()


def test_one_damaged_file_store_checkpoint_does_not_hide_the_others(tmp_path):
    store = FileStore(tmp_path)
    for sid in ("a", "b", "c"):
        grow(store, sid, 1)
    bad = tmp_path / "sessions" / "b.json"
    bad.write_text('{"checkpoint": {"sessionId": ')
    with pytest.warns(StoreDamageWarning, match=str(bad)):
        listed = store.list_sessions()
    assert sorted(s.session_id for s in listed) == ["a", "c"]
    with pytest.raises(StoreCorruptError, match=str(bad)):
        store.load("b")


def test_a_damaged_file_store_checkpoint_is_kept_by_prune(tmp_path):
    store = FileStore(tmp_path)
    grow(store, "a", 1)
    grow(store, "b", 1)
    bad = tmp_path / "sessions" / "b.json"
    raw = json.dumps({"checkpoint": {"sessionId": 1}})
    bad.write_text(raw)
    with pytest.warns(StoreDamageWarning, match=str(bad)):
        assert store.prune(timedelta(days=-1)) == 1  # a is pruned; b cannot be read, so it stays
    assert bad.read_text() == raw
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.load("a") is None
