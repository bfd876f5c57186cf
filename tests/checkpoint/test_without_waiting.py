"""``CheckpointStore.without_waiting``: a worker runs a step's SQLite calls on its event loop
only when they cannot wait, and a call that would wait changes nothing and says so."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time

import pytest

from durable_agents.checkpoint import Checkpoint, CheckpointStatus, FileStore, Message, SqliteStore
from durable_agents.checkpoint.format import Role
from durable_agents.checkpoint.policy_book import BOOK_SUFFIX
from durable_agents.checkpoint.stores import sqlite as sqlite_store
from durable_agents.checkpoint.stores.base import WouldWait
from durable_agents.checkpoint.stores.sqlite import BUSY_TIMEOUT_MS


def _session(store: SqliteStore, sid: str = "s") -> None:
    store.save(
        Checkpoint(
            session_id=sid, status=CheckpointStatus.IN_PROGRESS, messages=[Message(role=Role.USER, content="hi")]
        )
    )


def _busy_timeout(store: SqliteStore) -> int:
    with store._open(write=False) as cur:
        return cur.execute("PRAGMA busy_timeout").fetchone()[0]


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "s.db")
    _session(s)
    yield s
    s.close()


@pytest.fixture
def other_writer(store):
    """Another connection to the same file (as another worker process would be)."""
    conn = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    yield conn
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.close()


def test_an_uncontended_sqlite_store_runs_calls_on_the_callers_thread_and_waits_again_after(store):
    with store.without_waiting() as now:
        assert now
        assert store.tool_started("s", 1) == 0
    assert _busy_timeout(store) == BUSY_TIMEOUT_MS  # calls in threads wait for a lock as before


def test_a_store_that_makes_no_such_claim_runs_every_call_in_a_thread(tmp_path):
    with FileStore(tmp_path / "files").without_waiting() as now:  # it fsyncs: never on the loop
        assert not now


def test_while_another_thread_uses_the_handle_calls_go_to_a_thread(store):
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with store.without_waiting() as now:
            assert now
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(10)
        with store.without_waiting() as now:
            assert not now  # it would have waited for the other thread
    finally:
        leave.set()
        holder.join()
    with store.without_waiting() as now:
        assert now


def test_a_write_that_would_wait_for_another_process_changes_nothing_and_says_so_at_once(store, other_writer):
    other_writer.execute("BEGIN IMMEDIATE")  # holds the write lock
    started = time.monotonic()
    with pytest.raises(WouldWait), store.without_waiting() as now:
        assert now
        store.tool_started("s", 1)
    assert time.monotonic() - started < 1.0  # did not wait for the lock (BUSY_TIMEOUT_MS in a thread)
    other_writer.execute("ROLLBACK")
    assert store.tool_started("s", 1) == 0  # the refused call was not counted
    with store.without_waiting() as now:
        assert now  # the handle is free again


def test_reads_do_not_wait_for_another_writer(store, other_writer):
    other_writer.execute("BEGIN IMMEDIATE")
    with store.without_waiting() as now:
        assert now
        assert store.load_header("s").message_count == 1  # WAL: a reader needs no lock


def test_a_call_that_committed_before_it_would_wait_raises_the_real_error_not_would_wait(store, other_writer):
    """Running it again in a thread would repeat what it committed: it fails as it did before."""

    def two_writes() -> None:
        store.tool_started("s", 1)  # committed
        other_writer.execute("BEGIN IMMEDIATE")
        store.tool_started("s", 2)

    with pytest.raises(sqlite3.OperationalError, match="locked"), store.without_waiting() as now:
        assert now
        two_writes()
    other_writer.execute("ROLLBACK")
    assert store.tool_started("s", 1) == 1 and store.tool_started("s", 2) == 0


def test_reads_inside_reading_see_one_snapshot(store):
    """``_call_state`` (a tool call's reads) is one snapshot: one transaction, not three."""
    other = SqliteStore(store.path)  # another worker's handle on the same file
    try:
        with store.reading():
            first = store.load_header("s").message_count
            checkpoint = other.load("s")
            other.save(
                checkpoint.model_copy(
                    update={
                        "messages": [*checkpoint.messages, Message(role=Role.USER, content="more")],
                        "updated_at": None,
                    }
                )
            )
            assert store.load_header("s").message_count == first == 1  # not the other's save yet
            assert len(store.load_messages("s")) == 1
        assert store.load_header("s").message_count == 2
    finally:
        other.close()


def test_a_commit_leaves_the_wal_checkpoint_to_a_background_thread(tmp_path, monkeypatch) -> None:
    """Copying the WAL into the database file (reads, writes, two fsyncs: 1–15 ms) would stall
    a worker's event loop if its commit did it, as SQLite does every 1,000 pages by default.
    The background thread does it, and the WAL starts over after each of its checkpoints (a
    commit copies what was written meanwhile), as after SQLite's own: without them, these
    writes leave all of their ~6,000 frames in it (the commits' fallback is 10,000)."""
    store = SqliteStore(tmp_path / "s.db")
    assert _pragma(store, "wal_autocheckpoint") == sqlite_store.FALLBACK_AUTOCHECKPOINT
    threads: list[str] = []
    checkpoint = SqliteStore._checkpoint

    def recorded(self: SqliteStore) -> None:
        threads.append(threading.current_thread().name)
        checkpoint(self)

    monkeypatch.setattr(SqliteStore, "_checkpoint", recorded)
    _session(store)
    for i in range(800):  # ~8 pages a save
        _save(store, i)
    sqlite_store._checkpointer().submit(lambda: None).result()  # the last one asked for is done
    assert len(threads) >= 2
    assert all(name.startswith("durable-agents-sqlite-checkpoint") for name in threads), threads
    _save(store, 800)  # copies what was written since, and the next write starts the WAL over
    _save(store, 801)
    assert _wal_frames(tmp_path / "s.db") < 1000
    store.close()
    reopened = SqliteStore(tmp_path / "s.db")
    assert len(reopened.load_messages("s")) == 803
    reopened.close()


def test_the_commit_after_a_background_checkpoint_lets_the_wal_start_over(tmp_path, monkeypatch) -> None:
    """Writes go on while the background thread checkpoints, so it never leaves every frame
    copied, and a WAL not wholly copied cannot start over: it grew to the commits' fallback
    (40 MB) while writes kept coming. The commit after a background checkpoint copies the
    rest; the next write starts the WAL over."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 10**9)  # no background checkpoint here
    store = SqliteStore(tmp_path / "s.db")
    _session(store)
    for i in range(50):
        _save(store, i)
    store._catch_up = True  # what a background checkpoint says when it is done
    _save(store, 50)
    _save(store, 51)
    assert _wal_frames(tmp_path / "s.db") < 50
    store.close()


def test_a_background_checkpoint_of_a_deleted_store_file_does_not_create_it_again(tmp_path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    _session(store)
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"s.db{suffix}").unlink(missing_ok=True)
    store._checkpoint()  # what the thread runs: it cannot open the file, and says so in the debug log only
    assert not (tmp_path / "s.db").exists()
    store.close()


def _pragma(store: SqliteStore, name: str) -> int:
    with store._open(write=False) as cur:
        return cur.execute(f"PRAGMA {name}").fetchone()[0]


def test_a_forked_process_gets_a_checkpoint_thread_of_its_own() -> None:
    """A process forked after its parent's checkpoint thread started (a multiprocessing worker,
    a pre-forking server) has no such thread: its checkpoints would wait forever in the
    parent's pool, and its WAL grow to the fallback."""
    sqlite_store._checkpointer().submit(lambda: None).result()  # the parent's thread is running
    pid = os.fork()
    if pid == 0:  # the child: exits 0 only if a checkpoint job runs
        try:
            sqlite_store._checkpointer().submit(lambda: None).result(timeout=10)
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _save(store: SqliteStore, i: int) -> None:
    """A ~1 KB turn appended to session "s" (about 8 pages written)."""
    header = store.load_header("s")
    assert header is not None
    count = header.message_count
    store.append(
        header.model_copy(update={"message_count": count + 1, "updated_at": None}),
        count,
        [Message(role=Role.ASSISTANT, content=f"turn {i} " + "x" * 1000)],
    )


def _wal_frames(path) -> int:
    """The frames in the file's WAL since it last started over (a passive checkpoint reports them)."""
    with contextlib.closing(sqlite3.connect(path)) as other:
        return other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]


def test_the_policy_book_leaves_its_wal_checkpoints_to_the_background_thread(tmp_path, monkeypatch) -> None:
    """A grant's use is a write to the policy book, in the model turn's store call on the
    worker's event loop: as the store's, its commits leave copying the WAL to the background
    thread (and the WAL starts over after), instead of SQLite's own checkpoint every 1,000
    pages inside a commit."""
    from datetime import UTC, datetime, timedelta

    from durable_agents.checkpoint.approval_grants import Grant, GrantScope
    from durable_agents.checkpoint.policy_book import _SqliteDatabase, policy_book_for

    book = policy_book_for(SqliteStore(tmp_path / "s.db"))
    assert book._db._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == sqlite_store.FALLBACK_AUTOCHECKPOINT
    threads: list[str] = []
    checkpoint = _SqliteDatabase._checkpoint

    def recorded(self: _SqliteDatabase) -> None:
        threads.append(threading.current_thread().name)
        checkpoint(self)

    monkeypatch.setattr(_SqliteDatabase, "_checkpoint", recorded)
    now = datetime.now(UTC)
    scope = GrantScope(kind="agent", tool="t", agent="a")
    book.add_grant(Grant(id="g", scope=scope, created_by="x", created_at=now - timedelta(seconds=1)))
    for i in range(1500):  # ~4 pages a use: SQLite's own checkpoints would have run in 5 of these commits
        assert book.use_grant("g", f"k{i}", now).approved
    sqlite_store._checkpointer().submit(lambda: None).result()
    assert len(threads) >= 2 and all(name.startswith("durable-agents-sqlite-checkpoint") for name in threads), threads
    book.use_grant("g", "k-last", now)  # copies what was written since; the next write starts the WAL over
    book.use_grant("g", "k-after", now)
    assert _wal_frames(tmp_path / f"s.db{BOOK_SUFFIX}") < 1000
    assert book.get_grant("g").uses == 1502
    book.close()
