"""Store fixtures: one ``store_factory`` over every backend.

PostgreSQL is the session's ``postgres_url`` (tests/conftest.py; the server
code is tests/postgres_server.py, whose names are re-exported here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from durable_agents.checkpoint import CheckpointStore, FileStore, MemoryStore, SqliteStore
from tests.postgres_server import (  # noqa: F401 (re-exported for older imports)
    POSTGRES_URL_ENV,
    ThrowawayPostgres,
    fresh_schema,
    postgres_bin_dir,
)

BACKENDS = ["sqlite", "memory", "file", "postgres"]
StoreFactory = Callable[..., CheckpointStore]


@contextmanager
def backend(kind: str, tmp: Path, pg_url: str | None = None) -> Iterator[StoreFactory]:
    """A factory of stores of one kind. Calls share one backing store (a second
    handle is like a second worker process), except ``memory``, which has none."""
    opened: list[CheckpointStore] = []
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema(pg_url)) if kind == "postgres" else None

        def make(history_limit: int = 5) -> CheckpointStore:
            from durable_agents.checkpoint import PostgresStore

            store: CheckpointStore = {
                "sqlite": lambda: SqliteStore(tmp / "store.db", history_limit=history_limit),
                "memory": lambda: MemoryStore(history_limit=history_limit),
                "file": lambda: FileStore(tmp / "files", history_limit=history_limit),
                "postgres": lambda: PostgresStore(url, history_limit=history_limit),  # type: ignore[arg-type]
            }[kind]()
            store.backend = kind  # type: ignore[attr-defined]
            opened.append(store)
            return store

        make.kind = kind  # type: ignore[attr-defined]
        try:
            yield make
        finally:
            for store in opened:
                store.close()


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    pg_url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with backend(request.param, tmp_path, pg_url) as make:
        yield make


@pytest.fixture
def other_store_factory(
    request: pytest.FixtureRequest, tmp_path: Path, store_factory: StoreFactory
) -> Iterator[StoreFactory]:
    """A second store of ``store_factory``'s kind (its own file, directory or schema)."""
    kind = store_factory.kind  # type: ignore[attr-defined]
    pg_url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    with backend(kind, tmp_path / "other", pg_url) as make:
        yield make


_COLUMNS = (
    "SELECT COALESCE(SUM(LENGTH(body)), 0) FROM messages",
    "SELECT COALESCE(SUM(LENGTH(header)), 0) FROM sessions",
    "SELECT COALESCE(SUM(LENGTH(header)), 0) FROM checkpoint_history",
    "SELECT COALESCE(SUM(LENGTH(result)), 0) FROM tool_markers",
    "SELECT COALESCE(SUM(LENGTH(body)), 0) FROM history_decisions",
)


def storage_bytes(store: CheckpointStore, *, on_disk: bool = False) -> int:
    """What a store keeps: the bytes of its files, or of the values in its tables.

    ``on_disk`` measures database pages instead (SQLite: pages in use after a WAL
    checkpoint; PostgreSQL: ``pg_total_relation_size``, indexes, TOAST and dead
    rows included).
    """
    if isinstance(store, FileStore):
        return sum(p.stat().st_size for p in store.directory.rglob("*") if p.is_file())
    if isinstance(store, SqliteStore):  # also MemoryStore
        db = store._db
        if not on_disk:
            return sum(db.execute(q).fetchone()[0] for q in _COLUMNS)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
        return pages * db.execute("PRAGMA page_size").fetchone()[0]
    if type(store).__name__ == "PostgresStore":
        with store._open(write=False) as cur:  # type: ignore[attr-defined]
            if not on_disk:
                return sum(cur.execute(q.replace("LENGTH", "OCTET_LENGTH")).fetchone()[0] for q in _COLUMNS)
            return cur.execute(
                "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c"
                " WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace"
                " AND c.relname IN ('sessions', 'messages', 'checkpoint_history', 'tool_markers', 'history_decisions')"
            ).fetchone()[0]
    raise TypeError(f"no storage measure for {store!r}")
