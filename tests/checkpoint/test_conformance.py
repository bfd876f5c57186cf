"""The shipped conformance suite (``durable_agents.checkpoint.conformance``) run
against every built-in backend (sqlite, memory, file, postgres) and against a
user's store, plus the checks that only one backend can make.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest

import durable_agents.checkpoint.conformance as conformance
from durable_agents.checkpoint import (
    Checkpoint,
    CheckpointStore,
    ConfigurationError,
    FileStore,
    MemoryStore,
    Message,
    PostgresStore,
    SqliteStore,
    StoreCorruptError,
    StoreUnavailableError,
    open_store,
)
from durable_agents.checkpoint.conformance import StoreCapabilities, StoreConformance, requires
from durable_agents.checkpoint.conformance._base import grow, loaded
from durable_agents.checkpoint.errors import StoreDamageWarning
from durable_agents.checkpoint.stores.file import safe_name
from durable_agents.checkpoint.stores.postgres import redact
from tests.checkpoint.conftest import backend, storage_bytes


class TestBuiltinStores(StoreConformance):
    """Every check, once per backend of ``store_factory`` (tests/checkpoint/conftest.py)."""

    @pytest.fixture
    def make_store(self, store_factory):
        return store_factory

    @pytest.fixture
    def make_other_store(self, other_store_factory):
        return other_store_factory

    def storage_bytes(self, store: CheckpointStore) -> int:
        # Files on disk; for databases the bytes of the stored values (SqliteStore's pages
        # are ~4.5x larger for 1 KB rows: WITHOUT ROWID overflow pages, see bench/history_storage.py).
        return storage_bytes(store)


class JournalStore(SqliteStore):
    """A user's store: SQLite that keeps no history, and declares so."""

    capabilities: ClassVar[StoreCapabilities] = StoreCapabilities(history=False)

    def __init__(self, path: Path, *, history_limit: int = 0) -> None:
        super().__init__(path, history_limit=0)


class TestAUsersOwnStore(StoreConformance):
    """The shipped suite on a store defined here: the history checks skip."""

    @pytest.fixture
    def make_store(self, tmp_path):
        return lambda history_limit: JournalStore(tmp_path / "journal.db", history_limit=history_limit)

    @pytest.fixture
    def make_other_store(self, tmp_path):
        return lambda history_limit: JournalStore(tmp_path / "other" / "journal.db", history_limit=history_limit)


class TestClaimsGivenByTheTestClass(StoreConformance):
    """``capabilities`` on the test class replaces the store's own (here: claims less)."""

    capabilities = StoreCapabilities(durable=False, shared_across_processes=False, concurrent=False)

    @pytest.fixture
    def make_store(self):
        return lambda history_limit: MemoryStore(history_limit=history_limit)

    make_other_store = make_store


def test_the_docstring_example_runs_and_names_the_skipped_claims(tmp_path):
    example = re.search(r"``pytest -rs test_my_store.py``\)::\n\n(.*?)\n\S", conformance.__doc__, re.S)
    assert example, "the conformance docstring lost its example"
    (tmp_path / "test_my_store.py").write_text(textwrap.dedent(example.group(1)))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_my_store.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the store does not claim StoreCapabilities.history" in done.stdout
    assert re.search(r"\d+ passed, \d+ skipped", done.stdout), done.stdout


def test_requires_names_only_known_claims():
    with pytest.raises(ValueError, match="unknown store claims \\['histroy'\\]"):
        requires("histroy")


def test_the_store_package_imports_no_engine_sdk_or_pytest():
    code = (
        "import sys\n"
        "import durable_agents.checkpoint as c\n"
        "from durable_agents.checkpoint.stores import file, memory, postgres, sqlite\n"
        "c.open_store('memory:').close()\n"
        "bad = [m for m in ('temporalio', 'anthropic', 'openai', 'pytest') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-P", "-c", code], check=True, timeout=60)


# -- backend specifics ---------------------------------------------------------------
def test_postgres_history_pages_grow_linearly(postgres_url, tmp_path):
    """The values grow linearly (the suite checks that); so do PostgreSQL's pages."""
    with backend("postgres", tmp_path, postgres_url) as make:
        store = make(history_limit=50)
        grow(store, "a", 400, size=1024)
        transcript = sum(len(m.to_json()) for m in loaded(store, "a").messages)
        assert storage_bytes(store, on_disk=True) <= 3 * transcript


def test_file_store_layout_permissions_and_safe_names(tmp_path):
    store = FileStore(tmp_path / "fs")
    for sid in ("../../etc/passwd", "a/b", "..", "", "Chat-42", "chat-42", "x" * 600, "日本"):
        store.save(Checkpoint(session_id=sid, messages=[Message.user(sid)]))
        assert store.load(sid).messages[0].content == sid
    names = [p.name for p in (tmp_path / "fs" / "sessions").iterdir()]
    assert len(names) == 8 and all("/" not in n and ".." not in n and len(n) < 255 for n in names)
    assert safe_name("Chat-42") != safe_name("chat-42")
    assert not (tmp_path / "etc").exists()
    for path in (tmp_path / "fs").rglob("*"):
        assert stat.S_IMODE(os.stat(path).st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_file_store_damaged_history_reads_as_none_and_is_rebuilt(tmp_path):
    store = FileStore(tmp_path, history_limit=5)
    grow(store, "a", 3)
    path = tmp_path / "history" / "a.json"
    path.write_bytes(path.read_bytes()[:40])  # truncated by a crash
    assert store.history("a") == []
    assert len(store.load("a").messages) == 5
    grow(store, "a", 1)
    assert [e.step for e in store.history("a")] == [1, 0]
    path.write_text("not json")
    store.delete("a", keep_history=True)
    assert store.history("a") == []


def test_file_store_damaged_checkpoint_is_named(tmp_path):
    store = FileStore(tmp_path)
    grow(store, "a", 1)
    bad = tmp_path / "sessions" / "a.json"
    bad.write_text('{"checkpoint": {"sessionId": ')
    for call in (lambda: store.load("a"), lambda: store.load_header("a"), lambda: grow(store, "a", 1)):
        with pytest.raises(StoreCorruptError, match=str(bad)):
            call()
    with pytest.warns(StoreDamageWarning, match=str(bad)):  # a listing names it and goes on
        assert store.list_sessions() == []


def test_file_store_skips_a_torn_log_line(tmp_path):
    store = FileStore(tmp_path)
    grow(store, "a", 1)
    with open(tmp_path / "messages" / "a.jsonl", "ab") as log:
        log.write(b'[1,3,{"role":"assis')  # a crash mid-append: the checkpoint never pointed at it
    header = store.load_header("a")
    store.append(header.model_copy(update={"message_count": 4, "updated_at": None}), 3, [Message.user("after")])
    assert [m.content for m in store.load("a").messages][2:] == ["turn 0 " + "x" * 10, "after"]


def test_postgres_unreachable_is_named_without_its_password():
    url = "postgresql://agent:s3cr3t-pw@127.0.0.1:1/agents?connect_timeout=2"
    with pytest.raises(StoreUnavailableError) as info:
        PostgresStore(url)
    assert info.value.code == "STORE_UNAVAILABLE"
    assert "s3cr3t" not in str(info.value) and "agent:***@127.0.0.1:1/agents" in str(info.value)
    assert "s3cr3t" not in redact("host=h password=s3cr3t user=u") + redact("postgres://u@h/d?password=s3cr3t")


def test_store_urls(tmp_path, postgres_url, monkeypatch):
    from tests.checkpoint.conftest import fresh_schema

    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store(f"file://{tmp_path}/abs"), FileStore)
    assert (tmp_path / "abs" / "sessions").is_dir()
    relative = open_store("file://rel/dir")
    assert isinstance(relative, FileStore) and (tmp_path / "rel" / "dir" / "sessions").is_dir()
    with fresh_schema(postgres_url) as url:
        for scheme in ("postgresql://", "postgres://"):
            store = open_store(url.replace("postgresql://", scheme, 1))
            assert isinstance(store, PostgresStore)
            store.close()
    with pytest.raises(ConfigurationError, match="unknown store URL 'redis://x'.*file:///.*postgresql://"):
        open_store("redis://x")
    with pytest.raises(ConfigurationError, match="names no directory"):
        open_store("file:///")
