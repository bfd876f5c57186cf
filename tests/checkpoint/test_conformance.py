"""One conformance suite for every store backend (sqlite, memory, file, postgres).

SqliteStore's behaviour is the contract; each test runs once per backend
through the ``store_factory`` fixture (tests/checkpoint/conftest.py).
"""

from __future__ import annotations

import json
import os
import random
import stat
import threading
from datetime import UTC, datetime, timedelta

import pytest

from durable_agents.checkpoint import (
    Checkpoint,
    CheckpointStatus,
    ConfigurationError,
    FileStore,
    Fingerprint,
    FinishReason,
    Message,
    PostgresStore,
    RunConfig,
    StoreCorruptError,
    StoreUnavailableError,
    ToolCall,
    ToolSpec,
    Usage,
    open_store,
)
from durable_agents.checkpoint.format import Role, ToolFingerprint
from durable_agents.checkpoint.stores.file import safe_name
from durable_agents.checkpoint.stores.postgres import redact
from tests.checkpoint.conftest import storage_bytes

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _assistant(i: int, size: int = 10) -> Message:
    return Message(
        role=Role.ASSISTANT,
        content=f"turn {i} " + "x" * size,
        tool_calls=[ToolCall(id=f"call_{i}", name="t", arguments={"i": i})],
    )


def _grow(store, sid: str, steps: int, size: int = 10, at: datetime | None = None) -> None:
    """A first save then ``steps`` appends of one message (the worker's data plane)."""
    store.save(Checkpoint(session_id=sid, messages=[Message.system("sys"), Message.user("go")], updated_at=at))
    for i in range(steps):
        header = store.load_header(sid)
        when = at + timedelta(seconds=i + 1) if at else None
        store.append(
            header.model_copy(
                update={"message_count": header.message_count + 1, "step_index": i + 1, "updated_at": when}
            ),
            header.message_count,
            [_assistant(i, size)],
        )


def _full_checkpoint(sid: str = "a", **update) -> Checkpoint:
    cp = Checkpoint(
        session_id=sid,
        agent="planner",
        step_index=3,
        messages=[
            Message.system("be brief"),
            Message.user("héllo ✓ \x00 nul"),
            _assistant(1),
            Message.tool_result(ToolCall(id="call_1", name="t"), '{"ok": true}', is_error=True),
        ],
        usage=Usage(input_tokens=3, output_tokens=4, requests=1),
        business_state={"k": [1, 2.5, None, "s"], "nested": {"a": True}},
        status=CheckpointStatus.AWAITING_APPROVAL,
        approval_id="ap-1",
        remaining_tool_calls=[ToolCall(id="c2", name="t", arguments={"x": 1})],
        fingerprint=Fingerprint(
            model="m", tools=[ToolFingerprint(name="t", schema_hash="h")], instructions_hash="ih", digest="d"
        ),
        finish_reason=FinishReason.AWAITING_APPROVAL,
        run_config=RunConfig(agent="planner", model="m", tools=[ToolSpec(name="t")]),
        run_start_index=1,
        run_start_step=0,
        updated_at=T0,
    )
    return cp.model_copy(update=update)


# -- format -------------------------------------------------------------------
def test_round_trip_keeps_the_exact_camel_case_format(store_factory):
    store = store_factory()
    cp = _full_checkpoint()
    store.save(cp)
    loaded = store.load("a")
    assert loaded.to_json() == cp.to_json()
    data = json.loads(loaded.to_json())
    assert data["stepIndex"] == 3 and data["approvalId"] == "ap-1" and data["formatVersion"] == 1
    assert data["messages"][2]["toolCalls"][0] == {"id": "call_1", "name": "t", "arguments": {"i": 1}}
    assert data["messages"][3]["toolCallId"] == "call_1" and data["messages"][3]["isError"] is True
    assert data["remainingToolCalls"][0]["id"] == "c2" and data["fingerprint"]["digest"] == "d"
    assert store.load_messages("a", 1, 2) == [cp.messages[1]]
    assert store.load_header("a").message_count == 4
    assert store.load("missing") is None and store.load_header("missing") is None
    assert store.load_messages("missing") == []


def test_every_status_round_trips_and_filters(store_factory):
    store = store_factory()
    for i, status in enumerate(CheckpointStatus):
        store.save(
            _full_checkpoint(
                f"s-{status.value}",
                status=status,
                updated_at=T0 + timedelta(minutes=i),
                approval_id="ap" if status == CheckpointStatus.AWAITING_APPROVAL else None,
            )
        )
    for status in CheckpointStatus:
        assert store.load(f"s-{status.value}").status == status
        assert [s.session_id for s in store.list_sessions(status=status)] == [f"s-{status.value}"]
        assert [s.session_id for s in store.list_sessions(status=status.value)] == [f"s-{status.value}"]


def test_a_record_from_an_older_format_version_loads_as_in_progress(store_factory):
    store = store_factory()
    old_json = json.dumps(
        {
            "sessionId": "old",
            "stepIndex": 2,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            "usage": {"inputTokens": 1, "outputTokens": 2, "requests": 1},
            "businessState": {"x": 1},
        }
    )
    store.save(Checkpoint.model_validate_json(old_json))
    loaded = store.load("old")
    assert loaded.status == CheckpointStatus.IN_PROGRESS and loaded.fingerprint is None
    assert loaded.format_version == 1 and loaded.step_index == 2 and loaded.business_state == {"x": 1}
    assert [m.content for m in loaded.messages] == ["hi", "hello"]
    assert store.history("old")[0].status == CheckpointStatus.IN_PROGRESS
    assert store.list_sessions(status=CheckpointStatus.IN_PROGRESS)[0].session_id == "old"


# -- writes ----------------------------------------------------------------------
def test_rewriting_the_same_positions_is_idempotent(store_factory):
    store = store_factory()
    _grow(store, "a", 2)
    header = store.load_header("a")
    last = store.load_messages("a", header.message_count - 1)
    before = store.history("a")
    for _ in range(2):  # a retried activity writes the same message at the same position again
        store.append(header.model_copy(update={"updated_at": None}), header.message_count - 1, last)
        store.save(store.load("a").model_copy(update={"updated_at": None}))
    assert store.load("a").messages == [*before[0].checkpoint.messages]
    assert len(store.history("a")) == len(before)
    with pytest.raises(ValueError):
        store.append(header, header.message_count + 1, [])  # count mismatch
    with pytest.raises(ValueError):
        store.append(
            header.model_copy(update={"message_count": header.message_count + 2}),
            header.message_count + 1,
            [_assistant(9)],
        )  # a gap


def test_history_is_a_ring_of_the_newest_saves_newest_first(store_factory):
    store = store_factory(history_limit=5)
    _grow(store, "a", 8, at=T0)
    entries = store.history("a")
    assert [e.step for e in entries] == [8, 7, 6, 5, 4]
    assert [len(e.checkpoint.messages) for e in entries] == [10, 9, 8, 7, 6]
    assert [e.saved_at for e in entries] == [T0 + timedelta(seconds=s) for s in (8, 7, 6, 5, 4)]
    assert all(e.checkpoint.updated_at == e.saved_at for e in entries)
    assert entries[0].checkpoint.messages[-1].content.startswith("turn 7")
    assert entries[0].checkpoint.to_json() == store.load("a").to_json()
    assert [e.step for e in store.history("a", limit=2)] == [8, 7]
    assert store.history("a", limit=0) == []
    assert store.history("unknown") == []


def test_history_limit_zero_keeps_none(store_factory):
    store = store_factory(history_limit=0)
    _grow(store, "a", 3)
    assert store.history("a") == [] and len(store.load("a").messages) == 5


def test_history_survives_a_rewrite_of_an_earlier_message(store_factory):
    store = store_factory()
    _grow(store, "a", 2)
    cp = store.load("a")
    cp.messages[1] = Message.user("changed")
    store.save(cp.model_copy(update={"updated_at": None}))
    header = store.load_header("a")
    store.append(header.model_copy(update={"message_count": 5, "updated_at": None}), 4, [Message.user("more")])
    newest, rewritten, older = store.history("a", limit=3)
    assert [m.content for m in newest.checkpoint.messages][1:] == [
        "changed",
        "turn 0 " + "x" * 10,
        "turn 1 " + "x" * 10,
        "more",
    ]
    assert rewritten.checkpoint.messages[1].content == "changed"
    assert older.checkpoint.messages[1].content == "go" and len(older.checkpoint.messages) == 4


def test_a_shorter_save_then_new_messages_leave_older_entries_intact(store_factory):
    store = store_factory()
    _grow(store, "a", 3)  # 5 messages
    cp = store.load("a")
    store.save(cp.model_copy(update={"messages": cp.messages[:3], "updated_at": None}))
    header = store.load_header("a")
    store.append(header.model_copy(update={"message_count": 4, "updated_at": None}), 3, [Message.user("new")])
    assert [m.content for m in store.load("a").messages][3:] == ["new"]
    five = next(e for e in store.history("a") if len(e.checkpoint.messages) == 5)
    assert five.checkpoint.messages[3].content.startswith("turn 1")


# -- tools --------------------------------------------------------------------------
def _with_calls(store, ids: list[str]) -> None:
    store.save(
        Checkpoint(
            session_id="a",
            messages=[
                Message.user("go"),
                Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id=i, name="t") for i in ids]),
            ],
        )
    )


def test_tool_results_are_recorded_once_and_in_call_order(store_factory):
    store = store_factory()
    _with_calls(store, ["c1", "c2"])
    batch = ["c1", "c2"]
    r2 = Message.tool_result(ToolCall(id="c2", name="t"), "two")
    assert store.record_tool_result("a", r2, 2, batch) == 2  # waits for c1
    assert store.tool_result("a", "c2") == r2 and store.tool_result("a", "c1") is None
    r1 = Message.tool_result(ToolCall(id="c1", name="t"), "one")
    assert store.record_tool_result("a", r1, 2, batch) == 4
    again = Message.tool_result(ToolCall(id="c1", name="t"), "one, re-run")
    assert store.record_tool_result("a", again, 2, batch) == 4
    assert [m.content for m in store.load("a").messages[2:]] == ["one", "two"]
    assert store.tool_result("a", "c1").content == "one"  # the first recorded result wins
    with pytest.raises(StoreCorruptError):
        store.record_tool_result("a", r1, 5, batch)  # a batch the checkpoint is not inside


def test_tool_started_counts_previous_starts(store_factory):
    store = store_factory()
    assert store.tool_started("a", "c1") == 0
    assert store.tool_started("a", "c1") == 1
    assert store.tool_started("a", "c2") == 0


def test_concurrent_tool_results_from_two_workers_land_once_in_order(store_factory):
    first = store_factory(history_limit=50)
    second = first if first.backend == "memory" else store_factory(history_limit=50)
    ids = [f"c{i}" for i in range(12)]
    _with_calls(first, ids)
    jobs = [(s, i, n) for i in ids for n, s in enumerate((first, second))]
    random.Random(7).shuffle(jobs)
    errors: list[BaseException] = []

    def record(store, call_id: str, n: int) -> None:
        try:
            store.record_tool_result("a", Message.tool_result(ToolCall(id=call_id, name="t"), f"{call_id}/{n}"), 2, ids)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=record, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    messages = first.load("a").messages[2:]
    assert [m.tool_call_id for m in messages] == ids
    assert all(m.content == first.tool_result("a", m.tool_call_id).content for m in messages)


# -- management ----------------------------------------------------------------------
def test_delete_and_keep_history(store_factory):
    store = store_factory()
    _grow(store, "a", 3)
    store.tool_started("a", "c1")
    store.delete("a", keep_history=True)
    assert store.load("a") is None and store.list_sessions() == []
    assert store.tool_started("a", "c1") == 0  # tool markers go with the checkpoint
    assert len(store.history("a")) == 4
    assert len(store.history("a")[0].checkpoint.messages) == 5
    _grow(store, "a", 1)  # a new run under the same id; the kept history still reads
    assert [len(e.checkpoint.messages) for e in store.history("a")] == [3, 2, 5, 4, 3]
    store.delete("a")
    assert store.history("a") == [] and store.load("a") is None
    store.delete("never-saved")


def test_list_sessions_filters_by_status_and_agent_newest_first(store_factory):
    store = store_factory()
    for i, (sid, agent, status) in enumerate(
        [("a", "x", "in-progress"), ("b", "y", "finished"), ("c", "x", "finished"), ("d", None, "in-progress")]
    ):
        store.save(
            Checkpoint(
                session_id=sid,
                agent=agent,
                status=status,
                step_index=i,
                messages=[Message.user(sid)] * (i + 1),
                updated_at=T0 + timedelta(hours=i),
            )
        )
    assert [s.session_id for s in store.list_sessions()] == ["d", "c", "b", "a"]
    assert [s.session_id for s in store.list_sessions(agent="x")] == ["c", "a"]
    assert [s.session_id for s in store.list_sessions(status=CheckpointStatus.FINISHED)] == ["c", "b"]
    assert [s.session_id for s in store.list_sessions(status="finished", agent="x")] == ["c"]
    c = store.list_sessions(agent="x")[0]
    assert (c.step_index, c.message_count, c.updated_at, c.status) == (2, 3, T0 + timedelta(hours=2), "finished")


def test_prune_drops_sessions_and_history_entries_older_than_the_cutoff(store_factory):
    store = store_factory(history_limit=50)
    _grow(store, "old", 2, at=T0)  # saved at T0 .. T0+2s
    _grow(store, "mixed", 4, at=T0 + timedelta(seconds=10))  # T0+10s .. T0+14s
    store.tool_started("old", "c1")
    assert store.prune(T0 + timedelta(seconds=12)) == 1
    assert store.load("old") is None and store.history("old") == []
    assert store.tool_started("old", "c1") == 0
    assert [e.step for e in store.history("mixed")] == [4, 3, 2]
    assert len(store.load("mixed").messages) == 6
    assert [e.checkpoint.messages[-1].content[:6] for e in store.history("mixed")] == ["turn 3", "turn 2", "turn 1"]


def test_prune_with_a_relative_cutoff(store_factory):
    store = store_factory()
    now = datetime.now(UTC)
    _grow(store, "stale", 1, at=now - timedelta(days=3))
    _grow(store, "fresh", 1)
    assert store.prune(timedelta(days=1)) == 1
    assert [s.session_id for s in store.list_sessions()] == ["fresh"]
    assert store.history("stale") == [] and len(store.history("fresh")) == 2


def test_concurrent_saves_of_different_sessions(store_factory):
    first = store_factory(history_limit=50)
    handles = [first] if first.backend == "memory" else [first, store_factory(history_limit=50)]
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            _grow(handles[n % len(handles)], f"s{n}", 15, size=50)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(first.list_sessions()) == 8
    for n in range(8):
        cp = first.load(f"s{n}")
        assert cp.step_index == 15 and len(cp.messages) == 17
        assert [e.step for e in first.history(f"s{n}", limit=3)] == [15, 14, 13]


def test_history_storage_grows_linearly(store_factory):
    store = store_factory(history_limit=50)
    _grow(store, "a", 400, size=1024)
    transcript = sum(len(m.to_json()) for m in store.load("a").messages)
    entries = store.history("a")
    assert len(entries) == 50 and len(entries[-1].checkpoint.messages) == 353
    # Files on disk; for databases the bytes of the stored values (SqliteStore's pages
    # are ~4.5x larger for 1 KB rows: WITHOUT ROWID overflow pages, see bench/history_storage.py).
    stored = storage_bytes(store)
    assert stored <= 3 * transcript, (stored, transcript)
    if store.backend == "postgres":
        assert storage_bytes(store, on_disk=True) <= 3 * transcript


def test_rewritten_transcripts_are_dropped_with_their_last_history_entry(store_factory):
    store = store_factory(history_limit=3)
    _grow(store, "a", 10, size=1024)
    for i in range(30):  # every save changes an earlier message: a new transcript each time
        cp = store.load("a")
        cp.messages[1] = Message.user(f"go {i}")
        store.save(cp.model_copy(update={"updated_at": None}))
    transcript = sum(len(m.to_json()) for m in store.load("a").messages)
    assert [e.checkpoint.messages[1].content for e in store.history("a")] == ["go 29", "go 28", "go 27"]
    assert storage_bytes(store) <= (3 + 2) * transcript  # the ring's transcripts, not all 31
    store.delete("a", keep_history=True)
    assert storage_bytes(store) <= (3 + 1) * transcript
    store.delete("a")
    assert storage_bytes(store) < 1000


# -- backend specifics ---------------------------------------------------------------
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
    _grow(store, "a", 3)
    path = tmp_path / "history" / "a.json"
    path.write_bytes(path.read_bytes()[:40])  # truncated by a crash
    assert store.history("a") == []
    assert len(store.load("a").messages) == 5
    _grow(store, "a", 1)
    assert [e.step for e in store.history("a")] == [1, 0]
    path.write_text("not json")
    store.delete("a", keep_history=True)
    assert store.history("a") == []


def test_file_store_damaged_checkpoint_is_named(tmp_path):
    store = FileStore(tmp_path)
    _grow(store, "a", 1)
    bad = tmp_path / "sessions" / "a.json"
    bad.write_text('{"checkpoint": {"sessionId": ')
    for call in (
        lambda: store.load("a"),
        lambda: store.load_header("a"),
        store.list_sessions,
        lambda: _grow(store, "a", 1),
    ):
        with pytest.raises(StoreCorruptError, match=str(bad)):
            call()


def test_file_store_skips_a_torn_log_line(tmp_path):
    store = FileStore(tmp_path)
    _grow(store, "a", 1)
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
