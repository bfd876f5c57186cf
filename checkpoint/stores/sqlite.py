"""SQLite store: the embedded default.

The tables and the algorithm are the SQL stores' own (see ``_sql.py``); the
schema lives in ``sqlite_schema.py`` (append-only migrations, so older files
keep opening and gain what was added since). Times are stored as UTC epoch
seconds. A write holds SQLite's write lock from its start (``BEGIN
IMMEDIATE``), which serializes writers across threads and processes; readers
are not blocked (WAL journal).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.stores._sql import Dialect, SqlStore
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT
from durable_agents.checkpoint.stores.sqlite_schema import MIGRATIONS

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
        if self.path != ":memory:":
            _create_private_file(Path(self.path))
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreCorruptError(
                f"SQLite store {self.path} cannot be opened ({e}); it is not a durable-agents "
                "store or it is damaged: move it aside and start with a fresh file, or restore a backup"
            ) from e

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, history_limit={self.history_limit})"

    @property
    def where(self) -> str:
        return self.path

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        # A read sees one snapshot (WAL); a write takes the write lock up front,
        # so it never fails to upgrade a read lock half-way.
        self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _create_private_file(path: Path) -> None:
    """Store files are readable by their owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
