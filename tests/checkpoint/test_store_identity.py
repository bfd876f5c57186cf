"""Store identity, backend by backend: what the shipped suite cannot do generically."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from durable_agents.checkpoint import FileStore, MemoryStore, SqliteStore
from durable_agents.checkpoint.conformance._base import grow, loaded
from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.stores.sqlite_schema import MIGRATIONS
from durable_agents.testing import FailingStore


def test_an_older_sqlite_file_gets_an_id_once(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)  # the release before store ids: schema version 4
    db.executescript("".join(MIGRATIONS[:4]) + "CREATE TABLE schema_version (version INTEGER NOT NULL);")
    db.execute("INSERT INTO schema_version VALUES (4)")
    db.commit()
    db.close()
    first = SqliteStore(path)
    second = SqliteStore(path)
    assert first.store_id == second.store_id and len(first.store_id) == 32
    first.close()
    second.close()
    assert SqliteStore(path).store_id == first.store_id


def test_locations_are_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert SqliteStore("rel.db").location == str(tmp_path / "rel.db")
    assert FileStore("rel-dir").location == str(tmp_path / "rel-dir")
    assert MemoryStore().location == "memory:"
    assert MemoryStore().store_id != MemoryStore().store_id  # each one is a store of its own


def test_a_file_store_directory_from_before_store_ids_gets_one(tmp_path):
    store = FileStore(tmp_path / "fs")
    grow(store, "a", 1)
    (tmp_path / "fs" / "store.json").unlink()  # as the release before store ids left it
    older = FileStore(tmp_path / "fs")
    assert older.store_id != store.store_id and FileStore(tmp_path / "fs").store_id == older.store_id
    assert len(loaded(older, "a").messages) == 3
    meta = json.loads((tmp_path / "fs" / "store.json").read_text())
    assert meta["storeId"] == older.store_id


def test_a_file_store_whose_identity_file_is_replaced_refuses_writes(tmp_path):
    store = FileStore(tmp_path / "fs")
    grow(store, "a", 1)
    FileStore(tmp_path / "other")
    shutil.copy(tmp_path / "other" / "store.json", tmp_path / "fs" / "store.json")
    with pytest.raises(StoreCorruptError, match=str(tmp_path / "fs")):
        grow(store, "b", 1)
    (tmp_path / "fs" / "store.json").unlink()
    with pytest.raises(StoreCorruptError, match="store.json"):
        store.tool_started("a", 2)


def test_failing_store_passes_the_identity_through(tmp_path):
    inner = SqliteStore(tmp_path / "s.db")
    wrapped = FailingStore(inner)
    assert (wrapped.store_id, wrapped.location) == (inner.store_id, inner.location)
    inner.close()
