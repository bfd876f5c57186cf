"""Store fixtures: one ``store_factory`` over every backend, and a real PostgreSQL.

PostgreSQL comes from ``DURABLE_AGENTS_TEST_POSTGRES_URL`` when set, else from a
throwaway cluster this file starts with Debian's server binaries (initdb +
pg_ctl in a temp dir, unix socket only, as the ``postgres`` user when running
as root) and stops at the end of the test session.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from durable_agents.checkpoint import CheckpointStore, FileStore, MemoryStore, SqliteStore

POSTGRES_URL_ENV = "DURABLE_AGENTS_TEST_POSTGRES_URL"
BACKENDS = ["sqlite", "memory", "file", "postgres"]
StoreFactory = Callable[..., CheckpointStore]


def postgres_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding initdb and pg_ctl."""
    found = [
        Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb") if (Path(p).parent / "pg_ctl").exists()
    ]
    return max(found, key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0, default=None)


class ThrowawayPostgres:
    """A private PostgreSQL cluster in a temp dir, reachable over a unix socket."""

    def __init__(self) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb): run "
                "`make test`, which installs them (scripts/ensure-postgres.sh), or set "
                f"{POSTGRES_URL_ENV} to a database the tests may create schemas in"
            )
        self.bin = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="da-pg-"))  # short: socket paths max ~100 chars
        self.data = self.base / "data"
        self.run_as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            import pwd

            pg = pwd.getpwnam("postgres")
            os.chown(self.base, pg.pw_uid, pg.pw_gid)
            self.run_as = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://postgres@/postgres?host={quote(str(self.base), safe='')}"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.run_as, *args], capture_output=True, text=True, timeout=120)
        if done.returncode:
            log = (self.base / "log").read_text() if (self.base / "log").exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}")

    def start(self) -> str:
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        opts = (
            f"-c listen_addresses='' -c unix_socket_directories={self.base} -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.base / "log"),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
        )
        return self.url

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server URL for the whole test session; FAILS (never skips) without one."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("psycopg is not installed: run `make test` (or pip install -e '.[test]')")
    if os.environ.get(POSTGRES_URL_ENV):
        yield os.environ[POSTGRES_URL_ENV]
        return
    try:
        cluster = ThrowawayPostgres()
    except RuntimeError as e:
        pytest.fail(str(e))
    began = time.monotonic()
    try:
        url = cluster.start()
    except BaseException:
        cluster.stop()
        raise
    print(f"\n[postgres fixture] throwaway cluster up in {time.monotonic() - began:.2f}s at {cluster.base}")
    try:
        yield url
    finally:
        cluster.stop()


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A URL whose tables live in a new schema of their own, dropped afterwards."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    options = quote(f"-c search_path={schema}", safe="")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options={options}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


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
                " AND c.relname IN ('sessions', 'messages', 'checkpoint_history', 'tool_markers')"
            ).fetchone()[0]
    raise TypeError(f"no storage measure for {store!r}")
