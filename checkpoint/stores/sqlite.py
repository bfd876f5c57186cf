"""SQLite store: the embedded default.

The tables and the algorithm are the SQL stores' own (see ``_sql.py``); the
schema lives in ``sqlite_schema.py`` (append-only migrations, so older files
keep opening and gain what was added since). Times are stored as UTC epoch
seconds. A write holds SQLite's write lock from its start (``BEGIN
IMMEDIATE``), which serializes writers across threads and processes; readers
are not blocked (WAL journal).

SQLite's errors become typed ones naming the file: a read-only file or
directory is a ``ConfigurationError`` (what is there still reads), a full disk
a retryable ``StoreUnavailableError`` (the write is rolled back, nothing saved
before it is lost), a damaged page a ``StoreCorruptError``.

Every write transaction checks, before it commits, that the file at the path
is still the one opened (device and inode, one ``stat``): a file deleted or
replaced under a live store raises ``StoreCorruptError`` naming the path
instead of reporting success for data written to a file nobody will read. (A
file overwritten in place, same inode, is not detected: SQLite trusts its
cache while the WAL index is unchanged; that is corruption SQLite documents.)

A commit appends to the WAL only. Copying the WAL into the database file (a
checkpoint: its reads, writes and two ``fsync``) is done by one background
thread of the process every ``CHECKPOINT_EVERY`` write commits, so a commit on a
worker's event loop never stalls it for one (1–15 ms each on a 2-core host, a fifth
of a step's store time there). The commit after it copies only what was written
meanwhile, so the WAL starts over as it did (≈ 4 MB; on a loaded disk it holds what
is written during one background checkpoint: 19 MB seen beside the test suite). A
commit checkpoints itself only when no background checkpoint runs and the WAL is past
``FALLBACK_AUTOCHECKPOINT``, which bounds it if the thread stops. Durability is SQLite's
WAL with ``synchronous=NORMAL`` either way: a committed write survives the
process's crash (the WAL is in the file system when ``COMMIT`` returns).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from durable_agents.checkpoint.errors import (
    ConfigurationError,
    DurableAgentsError,
    StoreCorruptError,
    StoreUnavailableError,
)
from durable_agents.checkpoint.stores._sql import Dialect, SqlStore
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT, WouldWait
from durable_agents.checkpoint.stores.sqlite_schema import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
"""How long a call waits for another process's write lock (in a thread; on the caller's
thread, inside ``without_waiting``, it does not wait)."""

CHECKPOINT_EVERY = 100
"""Write commits between two background checkpoints of a store's WAL (≈ SQLite's own default
of 1,000 pages: a step's commit writes about ten)."""
CHECKPOINT_PASSES = 3
CATCH_UP_FRAMES = 64
"""The background thread checkpoints again (up to ``CHECKPOINT_PASSES`` times) while its last
pass copied this many frames or more, so the commit that finishes the job copies only a few."""
FALLBACK_AUTOCHECKPOINT = 10_000
"""WAL pages (≈ 40 MB) past which a commit checkpoints itself, as SQLite does by default at
1,000: only when the background checkpoints fell that far behind or failed."""

SQLITE = Dialect(
    mark="?",
    no_limit=-1,
    row_lock="",  # the transaction already holds the database's write lock
    to_db_time=lambda when: when.timestamp(),
    from_db_time=lambda value: datetime.fromtimestamp(value, UTC),
)


class SqliteStore(SqlStore):
    dialect = SQLITE
    migrations = MIGRATIONS

    def __init__(self, path: str | Path, *, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        super().__init__(history_limit=history_limit)
        self.path = str(path)
        self._location = "memory:" if self.path == ":memory:" else os.path.abspath(self.path)
        self._file: tuple[int, int] | None = None  # (device, inode) of the file opened
        self._commits = 0
        self._writes = 0
        """Write commits through this handle (every ``CHECKPOINT_EVERY``-th asks for a checkpoint)."""
        self._checkpoint_pending = False
        self._catch_up = False
        """A background checkpoint is done: the next commit copies the few frames written meanwhile."""
        self._busy_ms = BUSY_TIMEOUT_MS
        """The connection's ``busy_timeout`` now: 0 inside ``without_waiting``, else ``BUSY_TIMEOUT_MS``."""
        self._no_wait_from: int | None = None
        """Inside ``without_waiting``: the commits before it (a lock wait after one is an error)."""
        try:
            if self.path != ":memory:":
                _create_private_file(Path(self.path))
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            if self.path != ":memory:":
                opened = os.stat(self._location)
                self._file = (opened.st_dev, opened.st_ino)
            self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if self.path != ":memory:":
                self._db.execute(f"PRAGMA wal_autocheckpoint={FALLBACK_AUTOCHECKPOINT}")
            self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._migrate()
        except (sqlite3.Error, OSError) as e:
            typed = sqlite_error(e, self._location)
            if typed is None and isinstance(e, OSError):
                raise  # not SQLite's: its own message names the file
            if typed is None or isinstance(typed, StoreCorruptError):
                raise StoreCorruptError(
                    f"SQLite store {self._location} cannot be opened ({e}); it is not a durable-agents "
                    "store or it is damaged: move it aside and start with a fresh file, or restore a backup"
                ) from e
            raise typed from e

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, history_limit={self.history_limit})"

    @property
    def location(self) -> str:
        return self._location

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        # A read sees one snapshot (WAL); a write takes the write lock up front,
        # so it never fails to upgrade a read lock half-way.
        try:
            busy_ms = 0 if self._no_wait_from is not None else BUSY_TIMEOUT_MS
            if busy_ms != self._busy_ms:  # set only when it changes: most calls keep it
                self._db.execute(f"PRAGMA busy_timeout={busy_ms}")
                self._busy_ms = busy_ms
            self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._db
                if write:
                    self._check_same_store()
                self._db.execute("COMMIT")
                self._commits += 1
                if write and self._file is not None:
                    self._writes += 1
                    if self._catch_up:
                        self._finish_checkpoint()
                    elif self._writes % CHECKPOINT_EVERY == 0:
                        self._checkpoint_later()
            except BaseException:
                # SQLite already rolled back after some errors (a full disk): a
                # ROLLBACK then would only hide the error that caused it.
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            if self._no_wait_from == self._commits and getattr(e, "sqlite_errorcode", 0) & 0xFF in (_BUSY, _LOCKED):
                raise WouldWait(str(e)) from e  # nothing of this call was committed: run it again, waiting
            typed = sqlite_error(e, self._location)
            if typed is None:
                raise
            raise typed from e

    @contextmanager
    def without_waiting(self) -> Iterator[bool]:
        """True while no other thread uses this handle: then SQLite does not wait for a lock
        inside (``busy_timeout`` 0) and a call that would raises ``WouldWait``. A write lock held
        by another process is the only wait of a local file in WAL mode (a commit checkpoints
        the WAL itself only when the background checkpoints fell ~40 MB behind)."""
        if not self._lock.acquire(blocking=False):
            yield False
            return
        self._no_wait_from = self._commits
        try:
            yield True
        finally:
            self._no_wait_from = None
            self._lock.release()

    def _checkpoint_later(self) -> None:
        """Have the background thread copy the WAL into the database file (one job per store at a time)."""
        if self._checkpoint_pending:
            return
        self._checkpoint_pending = True
        try:
            _checkpointer().submit(self._checkpoint)
        except RuntimeError:  # the interpreter is shutting down: the next commits checkpoint (fallback)
            self._checkpoint_pending = False

    def _finish_checkpoint(self) -> None:
        """Copy what was committed during the background checkpoint (a few pages): with every
        frame copied and no transaction open, the next write starts the WAL over instead of
        growing it (the background thread, racing this handle's writes, cannot leave it so)."""
        self._catch_up = False
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as e:
            log.debug("checkpoint of SQLite store %s: %s", self._location, e)

    def _checkpoint(self) -> None:
        """A passive checkpoint on a connection of its own: it never waits for, nor blocks, a writer.
        Best effort: a failure leaves the WAL to the next one (or to a commit, past the fallback)."""
        try:
            passive_checkpoints(self._location)
            self._catch_up = True
        except sqlite3.Error as e:
            log.debug("background checkpoint of SQLite store %s: %s", self._location, e)
        finally:
            self._checkpoint_pending = False

    def _check_same_store(self) -> None:
        """Refuse to commit unless the file at the path is the one opened."""
        if self._file is None or self._store_id is None:
            return  # in memory, or still opening
        try:
            st = os.stat(self._location)  # absolute: a later chdir changes nothing
            found: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            found = None
        if found != self._file:
            gone = "was deleted" if found is None else "was replaced by another file"
            raise StoreCorruptError(
                f"SQLite store {self._location} {gone} while this store had it open: this write "
                "was not saved (it would have gone to a file nobody reads); open the store again"
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()
os.register_at_fork(after_in_child=_pool.clear)  # a forked child has no thread of its parent's pool


def passive_checkpoints(location: str) -> None:
    """Copy a SQLite file's WAL into it on a connection of its own, without waiting for or
    blocking a writer (``PASSIVE``; again while a pass copied ``CATCH_UP_FRAMES`` or more,
    what was committed during the last). A file deleted meanwhile is not created again."""
    db = sqlite3.connect(f"file:{quote(location)}?mode=rw", uri=True, timeout=0, isolation_level=None)
    try:
        copied = 0
        for _ in range(CHECKPOINT_PASSES):
            busy, _, done = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if busy or done - copied < CATCH_UP_FRAMES:
                break
            copied = done
    finally:
        db.close()


def checkpoint_thread() -> ThreadPoolExecutor:
    """The process's one thread for background WAL checkpoints (the stores' and the policy books')."""
    return _checkpointer()


def _checkpointer() -> ThreadPoolExecutor:
    """The process's one checkpoint thread (started at the first checkpoint any store asks for)."""
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="durable-agents-sqlite-checkpoint"))
        return _pool[0]


_BUSY, _LOCKED, _READONLY, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 11, 13, 14, 26
_READONLY_DIRECTORY = 1544


def sqlite_error(error: sqlite3.Error | OSError, path: str) -> DurableAgentsError | None:
    """The typed error for what SQLite (or creating its file) reported, naming ``path``; None if none fits."""
    if isinstance(error, OSError):
        if isinstance(error, PermissionError) or error.errno == 30:  # EROFS
            return ConfigurationError(_read_only(path, f"cannot create it: {error.strerror}"))
        return None
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return None
    if code & 0xFF == _READONLY:
        return ConfigurationError(_read_only(path, str(error), directory=code == _READONLY_DIRECTORY))
    if code & 0xFF == _FULL:
        return StoreUnavailableError(
            f"SQLite store {path}: disk full ({error}); this write was rolled back and everything "
            "saved before it is kept: free space on that disk and the write can be retried"
        )
    if code & 0xFF in (_CORRUPT, _NOTADB):
        return StoreCorruptError(
            f"SQLite store {path} is damaged ({error}): restore a backup, or move the file aside "
            "and start with a fresh one (sqlite3's .recover may save what is readable)"
        )
    if code & 0xFF == _CANTOPEN and path != ":memory:":
        return ConfigurationError(
            f"SQLite store {path} cannot be opened ({error}): check that the file and its "
            "directory exist and this process may read and write them"
        )
    return None


def _read_only(path: str, reason: str, *, directory: bool = False) -> str:
    """Why the store at ``path`` cannot be written, and what to do."""
    folder = os.path.dirname(os.path.abspath(path))
    if not directory and os.path.exists(path) and not _writable(path):
        what = f"the file {path} is not writable by this process"
    elif directory or not _writable(folder):
        what = (
            f"its directory {folder} is not writable by this process (SQLite creates the "
            f"{os.path.basename(path)}-wal and -shm files next to it)"
        )
    else:
        what = "its file system is mounted read-only or the file cannot be written"
    return f"SQLite store {path} is read-only ({reason}): {what}; make it writable or point the store at another path"


def _writable(path: str) -> bool:
    """Whether this process (its effective user) may write ``path``."""
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def _create_private_file(path: Path) -> None:
    """Store files are readable by their owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
