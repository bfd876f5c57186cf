"""A real PostgreSQL for tests and benches (the ``postgres_url`` fixture in
tests/conftest.py, bench/history_storage.py, bench/pg_soak.py).

PostgreSQL comes from ``DURABLE_AGENTS_TEST_POSTGRES_URL`` when set, else from a
throwaway cluster started with Debian's server binaries (initdb + pg_ctl in a
temp dir, unix socket only, as the ``postgres`` user when running as root) and
stopped afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

POSTGRES_URL_ENV = "DURABLE_AGENTS_TEST_POSTGRES_URL"


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


@contextmanager
def postgres_server(announce: bool = True) -> Iterator[str]:
    """A PostgreSQL server URL: ``DURABLE_AGENTS_TEST_POSTGRES_URL``, else a throwaway
    cluster for the block (``RuntimeError`` without the server binaries)."""
    if os.environ.get(POSTGRES_URL_ENV):
        yield os.environ[POSTGRES_URL_ENV]
        return
    cluster = ThrowawayPostgres()
    began = time.monotonic()
    try:
        url = cluster.start()
    except BaseException:
        cluster.stop()
        raise
    if announce:
        print(f"\n[postgres] throwaway cluster up in {time.monotonic() - began:.2f}s at {cluster.base}")
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
