"""The SQLite and memory stores: format round trip, idempotent writes, history, schema migrations."""

from __future__ import annotations

import json
import os
import sqlite3
import stat

import pytest

from durable_agents.checkpoint import (
    Checkpoint,
    CheckpointStatus,
    ConfigurationError,
    MemoryStore,
    Message,
    PostgresStore,
    SqliteStore,
    StoreCorruptError,
    ToolCall,
    Usage,
    open_store,
)
from durable_agents.checkpoint.format import Role
from durable_agents.checkpoint.stores.sqlite_schema import MIGRATIONS


@pytest.fixture(params=["sqlite", "memory"])
def any_store(request, tmp_path):
    s = SqliteStore(tmp_path / "s.db", history_limit=5) if request.param == "sqlite" else MemoryStore(history_limit=5)
    yield s
    s.close()


def _assistant(i: int) -> Message:
    return Message(
        role=Role.ASSISTANT, content=f"turn {i}", tool_calls=[ToolCall(id=f"call_{i}", name="t", arguments={"i": i})]
    )


def _grow(store, sid: str, steps: int, size: int = 10) -> None:
    store.save(Checkpoint(session_id=sid, messages=[Message.system("sys"), Message.user("go")]))
    for i in range(steps):
        header = store.load_header(sid)
        turn = _assistant(i)
        turn.content = f"turn {i} " + "x" * size
        store.append(
            header.model_copy(
                update={"message_count": header.message_count + 1, "step_index": i + 1, "updated_at": None}
            ),
            header.message_count,
            [turn],
        )


def test_round_trip_uses_camel_case_json(any_store):
    cp = Checkpoint(
        session_id="a",
        messages=[Message.user("hi"), _assistant(1)],
        step_index=1,
        usage=Usage(input_tokens=3, output_tokens=4, requests=1),
        status=CheckpointStatus.AWAITING_APPROVAL,
        approval_id="ap-1",
        remaining_tool_calls=[ToolCall(id="c2", name="t")],
        business_state={"k": [1]},
    )
    any_store.save(cp)
    loaded = any_store.load("a")
    data = json.loads(loaded.to_json())
    assert data["stepIndex"] == 1 and data["approvalId"] == "ap-1"
    assert data["messages"][1]["toolCalls"][0] == {"id": "call_1", "name": "t", "arguments": {"i": 1}}
    assert data["remainingToolCalls"][0]["id"] == "c2" and data["businessState"] == {"k": [1]}
    assert loaded.model_copy(update={"updated_at": None}) == cp
    assert any_store.load("missing") is None


def test_a_header_read_again_is_its_own_copy_and_a_write_from_elsewhere_is_seen(tmp_path):
    # the store keeps the last header it parsed of a session (read again unchanged several times a
    # step): a caller changing what it read changes nothing the next read gives, and another
    # process's write (another store on the same file) is read, not the kept one
    path = tmp_path / "s.db"
    one, other = SqliteStore(path), SqliteStore(path)
    try:
        _grow(one, "a", 2)
        first = one.load_header("a")
        first.step_index = 99
        first.usage = Usage(input_tokens=7)
        again = one.load_header("a")
        assert again is not first and again.step_index == 2 and again.usage == Usage()
        _grow_from = other.load_header("a")
        other.append(
            _grow_from.model_copy(update={"message_count": 5, "step_index": 3, "updated_at": None}), 4, [_assistant(3)]
        )
        assert one.load_header("a").step_index == 3 and one.load_header("a").message_count == 5
    finally:
        one.close()
        other.close()


def test_a_header_written_with_state_json_reads_differently_reads_back_as_json(tmp_path):
    # the store keeps the header it wrote, parsed, for its next read, unless its business state
    # or output would read back otherwise (a tuple, a key that is not a string): then it is read
    path = tmp_path / "s.db"
    store, other = SqliteStore(path), SqliteStore(path)
    try:
        _grow(store, "a", 1)
        header = store.load_header("a")
        for state in ({"k": (1, 2)}, {1: "one"}, ("x",), {"k": [1.5, "s", None, True]}):
            written = header.model_copy(update={"business_state": state, "updated_at": None})
            store.append(written, header.message_count, [])
            assert store.load_header("a").business_state == other.load_header("a").business_state
        assert store.load_header("a").business_state == {"k": [1.5, "s", None, True]}
        assert other.load_header("a").updated_at == store.load_header("a").updated_at
    finally:
        store.close()
        other.close()


def test_rewriting_the_same_positions_is_idempotent(any_store):
    _grow(any_store, "a", 2)
    header = any_store.load_header("a")
    last = any_store.load_messages("a", header.message_count - 1)
    before = len(any_store.history("a"))
    # a retried activity writes the same message at the same position again
    any_store.append(header.model_copy(update={"updated_at": None}), header.message_count - 1, last)
    assert any_store.load("a").messages[-1] == last[0]
    assert len(any_store.load("a").messages) == header.message_count
    assert len(any_store.history("a")) == before


def test_history_is_a_ring_of_the_newest_saves_newest_first(any_store):
    _grow(any_store, "a", 8)
    entries = any_store.history("a")
    assert [e.step for e in entries] == [8, 7, 6, 5, 4]
    assert [len(e.checkpoint.messages) for e in entries] == [10, 9, 8, 7, 6]
    assert entries[0].checkpoint.messages[-1].content.startswith("turn 7")
    assert [e.step for e in any_store.history("a", limit=2)] == [8, 7]
    assert any_store.history("unknown") == []


def test_history_survives_a_rewrite_of_an_earlier_message(any_store):
    _grow(any_store, "a", 2)
    cp = any_store.load("a")
    cp.messages[1] = Message.user("changed")
    any_store.save(cp)
    newest, older = any_store.history("a", limit=2)
    assert newest.checkpoint.messages[1].content == "changed"
    assert older.checkpoint.messages[1].content == "go"


def test_history_storage_grows_linearly(tmp_path):
    store = SqliteStore(tmp_path / "lin.db", history_limit=50)
    _grow(store, "a", 400, size=1024)
    transcript = sum(len(m.to_json()) for m in store.load("a").messages)
    stored = store._db.execute("SELECT SUM(LENGTH(body)) FROM messages").fetchone()[0]
    headers = store._db.execute("SELECT SUM(LENGTH(header)) FROM checkpoint_history").fetchone()[0]
    assert stored == transcript  # history entries share the rows
    assert stored + headers < 3 * transcript


def test_tool_results_are_recorded_once_and_in_call_order(any_store):
    any_store.save(
        Checkpoint(
            session_id="a",
            messages=[
                Message.user("go"),
                Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id="c1", name="t"), ToolCall(id="c2", name="t")]),
            ],
        )
    )
    r2 = Message.tool_result(ToolCall(id="c2", name="t"), "two")
    assert any_store.record_tool_result("a", 3, r2, 2, 2) == 2  # waits for position 2
    r1 = Message.tool_result(ToolCall(id="c1", name="t"), "one")
    assert any_store.record_tool_result("a", 2, r1, 2, 2) == 4
    again = Message.tool_result(ToolCall(id="c1", name="t"), "one, re-run")
    assert any_store.record_tool_result("a", 2, again, 2, 2) == 4
    assert [m.content for m in any_store.load("a").messages[2:]] == ["one", "two"]
    assert any_store.tool_result("a", 2).content == "one"  # the first recorded result wins


def test_tool_started_counts_previous_starts(any_store):
    assert any_store.tool_started("a", 2) == 0
    assert any_store.tool_started("a", 2) == 1


def test_delete_and_keep_history(any_store):
    _grow(any_store, "a", 3)
    any_store.delete("a", keep_history=True)
    assert any_store.load("a") is None
    assert len(any_store.history("a")) == 4
    any_store.delete("a")
    assert any_store.history("a") == []


def test_store_file_is_private_and_a_damaged_file_is_named(tmp_path):
    path = tmp_path / "dir" / "store.db"
    SqliteStore(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreCorruptError, match=str(bad)):
        SqliteStore(bad)


def test_store_urls(tmp_path):
    assert isinstance(open_store(f"sqlite:///{tmp_path}/x.db"), SqliteStore)
    assert isinstance(open_store("memory:"), MemoryStore)
    with pytest.raises(ConfigurationError, match="unknown store URL 'redis://x'"):
        open_store("redis://x")


def test_an_older_store_file_gains_the_updated_at_indexes_on_open(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)  # a file as the release before the indexes left it: schema version 2
    db.executescript(MIGRATIONS[0] + MIGRATIONS[1] + "CREATE TABLE schema_version (version INTEGER NOT NULL);")
    db.execute("INSERT INTO schema_version VALUES (2)")
    db.execute(
        "INSERT INTO sessions VALUES ('old', 1, ?, NULL, 'finished', 0, 0, NULL, 1700000000.0)",
        (Checkpoint(session_id="old", status=CheckpointStatus.FINISHED).header().to_json(),),
    )
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert store._db.execute("SELECT version FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    indexes = {r[0] for r in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"sessions_updated_at", "checkpoint_history_saved_at"} <= indexes
    assert [s.session_id for s in store.list_sessions()] == ["old"]
    for query in (
        "SELECT session_id FROM sessions ORDER BY updated_at DESC",
        "SELECT session_id FROM sessions WHERE updated_at < 1",
        "SELECT session_id FROM checkpoint_history WHERE saved_at < 1",
    ):
        plan = " ".join(r[-1] for r in store._db.execute("EXPLAIN QUERY PLAN " + query))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (query, plan)
    store.close()
    SqliteStore(path).close()  # opening an up-to-date file migrates nothing


def test_postgres_has_the_same_indexes(postgres_url):
    from tests.checkpoint.conftest import fresh_schema

    with fresh_schema(postgres_url) as url:
        store = PostgresStore(url)
        with store._open(write=False) as cur:
            rows = cur.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()").fetchall()
        store.close()
    assert {"sessions_updated_at", "checkpoint_history_saved_at"} <= {r[0] for r in rows}


def test_an_older_store_file_trades_its_id_keyed_tool_markers_for_positional_ones(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)  # a file as the release before positional markers left it: schema version 3
    db.executescript("".join(MIGRATIONS[:3]) + "CREATE TABLE schema_version (version INTEGER NOT NULL);")
    db.execute("INSERT INTO schema_version VALUES (3)")
    db.execute("INSERT INTO tool_calls VALUES ('a', '2', 1, 1700000000.0, NULL)")  # an id that looks like a position
    db.commit()
    db.close()
    store = SqliteStore(path)
    tables = {r[0] for r in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "tool_markers" in tables and "tool_calls" not in tables
    assert store.tool_started("a", 2) == 0  # the id-keyed marker is not read as position 2's
    store.close()


def test_an_older_postgres_schema_trades_its_id_keyed_tool_markers_for_positional_ones(postgres_url):
    import psycopg

    from durable_agents.checkpoint.stores.postgres_schema import MIGRATIONS as PG_MIGRATIONS
    from tests.checkpoint.conftest import fresh_schema

    with fresh_schema(postgres_url) as url:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(PG_MIGRATIONS[0])
            db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (1)")
            db.execute("INSERT INTO tool_calls VALUES ('a', '2', 1, now(), NULL)")
        store = PostgresStore(url)
        assert store.tool_started("a", 2) == 0
        with store._open(write=False) as cur:
            tables = {r[0] for r in cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        store.close()
    assert "tool_markers" in tables and "tool_calls" not in tables
