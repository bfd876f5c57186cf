"""PostgreSQL store: for workers on several machines sharing one database.

The same tables and algorithm as ``SqliteStore`` (see ``_sql.py``); the schema
lives in ``postgres_schema.py``. Bodies are TEXT holding the camelCase JSON
(TEXT rather than JSONB: JSONB rejects ``\\u0000``, which tool output may
contain; cast ``header::jsonb`` to query it).

Writers of one session serialize on a transaction-scoped advisory lock keyed
by the session id (it also covers a session's first save, when there is no
row to lock yet) and lock the session row ``FOR UPDATE``. Use a database or
schema of its own (``?options=-csearch_path%3Dagents``): the table names are
generic. Connection failures raise ``StoreUnavailableError`` naming the URL
without its password; the next call reconnects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from typing import Any

from durable_agents.checkpoint.errors import ConfigurationError, StoreUnavailableError
from durable_agents.checkpoint.stores._sql import Dialect, SqlStore
from durable_agents.checkpoint.stores.base import DEFAULT_HISTORY_LIMIT
from durable_agents.checkpoint.stores.postgres_schema import MIGRATIONS

POSTGRES = Dialect(
    mark="%s",
    no_limit=None,
    row_lock=" FOR UPDATE",
    to_db_time=lambda when: when,
    from_db_time=lambda value: value.astimezone(UTC),
)
_MIGRATION_LOCK = 0x6475726162  # pg_advisory_xact_lock key while migrating


def redact(url: str) -> str:
    """The URL (or key=value conninfo) without its password."""
    url = re.sub(r"^([a-z][a-z0-9+.-]*://[^:/?#@]*):[^@/?#]*@", r"\1:***@", url, flags=re.I)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)", r"\1***", url, flags=re.I)


class PostgresStore(SqlStore):
    dialect = POSTGRES
    migrations = MIGRATIONS

    def __init__(self, url: str, *, history_limit: int = DEFAULT_HISTORY_LIMIT, connect_timeout: float = 10) -> None:
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
        except ImportError as e:
            raise ConfigurationError("PostgresStore needs psycopg: pip install 'durable-agents[postgres]'") from e
        super().__init__(history_limit=history_limit)
        self._psycopg = psycopg
        self.url = url
        self.safe_url = redact(url)
        self.connect_timeout = connect_timeout
        try:
            password = conninfo_to_dict(url).get("password")
        except psycopg.Error:
            raise ConfigurationError(f"invalid PostgreSQL URL {self.safe_url}") from None
        self._secrets = [str(password)] if password else []
        self._conn: Any = None
        self._migrate()

    def __repr__(self) -> str:
        return f"PostgresStore({self.safe_url!r}, history_limit={self.history_limit})"

    @property
    def location(self) -> str:
        return self.safe_url

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Any]:
        """A cursor inside one transaction (the connection is reopened when lost)."""
        pg = self._psycopg
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = pg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
            with self._conn.transaction(), self._conn.cursor() as cur:
                yield cur
        except (pg.OperationalError, pg.InterfaceError) as e:
            if self._conn is not None and (self._conn.closed or self._conn.broken):
                self._conn = None
            reason = self._scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            raise StoreUnavailableError(f"PostgreSQL store {self.safe_url} is unavailable: {reason}") from None

    def _lock_session(self, session_id: str) -> None:
        self._run("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (session_id,))

    def _lock_schema(self) -> None:
        self._run("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
