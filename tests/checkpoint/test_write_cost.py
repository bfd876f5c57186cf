"""A step's store work is the same at message 100 and at message 10,000 (issue 13).

Measured as work, not time: SQLite virtual-machine instructions (its progress
handler, called every instruction), and for the file store which files it reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from durable_agents.checkpoint import Checkpoint, FileStore, Message, SqliteStore
from durable_agents.checkpoint.format import Role, ToolCall
from durable_agents.checkpoint.stores import _file_records

KB = "x" * 1000


def session(store, sid: str, messages: int) -> None:  # type: ignore[no-untyped-def]
    out = [Message.system("sys"), Message.user("go")]
    for i in range(messages // 2 - 1):
        call = ToolCall(id=f"c{i}", name="t")
        out += [
            Message(role=Role.ASSISTANT, content=f"turn {i} {KB}", tool_calls=[call]),
            Message.tool_result(call, KB),
        ]
    store.save(Checkpoint(session_id=sid, messages=out))


def one_step(store, sid: str) -> dict[str, Callable[[], object]]:  # type: ignore[no-untyped-def]
    """The store calls of one worker step, in order, each as a thunk."""
    header = store.load_header(sid)
    count = header.message_count
    call = ToolCall(id="new", name="t")
    turn = Message(role=Role.ASSISTANT, content=f"new turn {KB}", tool_calls=[call])
    return {
        "read": lambda: store.load_transcript_tail(sid, count - 2),
        "append": lambda: store.append(header.model_copy(update={"message_count": count + 1}), count, [turn]),
        "stored call": lambda: store.load_messages(sid, count, count + 1),
        "tool result": lambda: store.tool_result(sid, count + 1),
        "tool started": lambda: store.tool_started(sid, count + 1),
        "record result": lambda: store.record_tool_result(sid, count + 1, Message.tool_result(call, KB), count + 1, 1),
    }


def instructions(store: SqliteStore, fn: Callable[[], object]) -> int:
    done = [0]

    def count() -> int:
        done[0] += 1
        return 0

    store._db.set_progress_handler(count, 1)
    try:
        fn()
    finally:
        store._db.set_progress_handler(None, 1)
    return done[0]


@pytest.mark.parametrize("history_limit", [50, 0])
def test_sqlite_step_work_does_not_grow_with_the_transcript(tmp_path: Path, history_limit: int) -> None:
    store = SqliteStore(tmp_path / "s.db", history_limit=history_limit)
    work = {}
    for size in (100, 10_000):
        session(store, f"s{size}", size)
        work[size] = {name: instructions(store, fn) for name, fn in one_step(store, f"s{size}").items()}
    # the same instructions for each call: B-tree lookups, no scan of the session's rows
    # (with history_limit=0 a save used to scan them all: 1,183 instructions at 100, 100,183 at 10,000)
    assert work[10_000] == work[100]
    assert max(work[10_000].values()) < 1000


def test_file_store_appends_and_reads_without_reading_the_whole_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path / "files")
    session(store, "a", 10_000)
    whole_reads, scanned = [], []
    real_log, real_lines = _file_records.FileRecords._read_log, _file_records.lines_backwards

    def counted_log(self, name, wanted=None):  # type: ignore[no-untyped-def]
        whole_reads.append(name)
        return real_log(self, name, wanted)

    def counted_lines(f):  # type: ignore[no-untyped-def]
        for line in real_lines(f):
            scanned.append(line)
            yield line

    monkeypatch.setattr(_file_records.FileRecords, "_read_log", counted_log)
    monkeypatch.setattr(_file_records, "lines_backwards", counted_lines)
    calls = one_step(store, "a")
    for name in ("read", "append", "stored call"):
        calls[name]()
    assert whole_reads == [] and len(scanned) == 3  # two lines for the read, one for the stored call
    monkeypatch.undo()
    assert [m.content for m in store.load_messages("a", 9998, 10_001)] == [f"turn 4998 {KB}", KB, f"new turn {KB}"]


def test_a_sqlite_store_holds_a_long_session_in_under_twice_its_transcripts_bytes(tmp_path: Path) -> None:
    """1,000 steps written as the worker writes them (history_limit=50): the file on disk."""
    store = SqliteStore(tmp_path / "s.db")
    store.save(Checkpoint(session_id="a", messages=[Message.user("go")]))
    for i in range(1000):
        header = store.load_header("a")
        assert header is not None
        count, call = header.message_count, ToolCall(id=f"c{i}", name="t", arguments={"n": i})
        turn = Message(role=Role.ASSISTANT, content=f"step {i} {KB}", tool_calls=[call])
        store.append(header.model_copy(update={"message_count": count + 1, "step_index": i + 1}), count, [turn])
        store.tool_started("a", count + 1)
        store.record_tool_result(
            "a", count + 1, Message.tool_result(call, f'{{"n": {i}, "pad": "{KB}"}}'), count + 1, 1
        )
    transcript = sum(len(m.to_json().encode()) for m in store.load_messages("a"))
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    on_disk = (tmp_path / "s.db").stat().st_size
    store.close()
    # 3.4x when tool markers were a WITHOUT ROWID table (each ~1 KB result in its own B-tree page)
    assert on_disk <= 2 * transcript, on_disk / transcript


def test_a_file_store_tool_call_reads_its_own_markers_not_every_marker_of_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call of a long session used to read the session's whole marker file (O(N) per
    call, O(N²) per session); now the markers of at most ``MARKER_BUCKET`` positions."""
    store = FileStore(tmp_path / "files")
    positions = 3 * _file_records.MARKER_BUCKET
    session(store, "a", 4 + positions)
    for p in range(4, 4 + positions):  # a call started at every position of a long session
        store.tool_started("a", p)
    lines_read = []
    real_read = Path.read_bytes

    def counted(path: Path) -> bytes:
        data = real_read(path)
        if "tools" in path.parts:
            lines_read.append(data.count(b"\n"))
        return data

    monkeypatch.setattr(Path, "read_bytes", counted)
    p, call = 4 + positions, ToolCall(id="new", name="t")
    assert store.tool_result("a", p) is None
    assert store.tool_started("a", p) == 0
    store.record_tool_result("a", p, Message.tool_result(call, "done"), p, 1)
    monkeypatch.undo()
    assert 0 < max(lines_read) <= _file_records.MARKER_BUCKET, lines_read
    assert store.tool_result("a", p).content == "done" and store.tool_started("a", 4) == 1


def test_a_file_store_keeps_honouring_the_marker_file_written_before_buckets(tmp_path: Path) -> None:
    """A session in flight across the upgrade: its one-file markers still decide (a result is
    not recorded twice, a started at-most-once call is still seen as started)."""
    store = FileStore(tmp_path / "files")
    session(store, "a", 6)
    call = ToolCall(id="c", name="t")
    legacy = tmp_path / "files" / "tools" / "a.jsonl"
    legacy.write_text(
        json.dumps({"pos": 6, "result": Message.tool_result(call, "first").to_dict()})
        + "\n"
        + json.dumps({"pos": 7, "start": "2026-11-30T00:00:00+00:00"})
        + "\n"
    )
    assert store.tool_result("a", 6).content == "first"
    assert store.tool_started("a", 7) == 1  # the start before the upgrade counts
    assert store.record_tool_result("a", 6, Message.tool_result(call, "second"), 6, 2) == 7
    assert store.load_messages("a", 6, 7)[0].content == "first"  # the first recorded result wins
    store.delete("a")
    assert not legacy.exists() and not (tmp_path / "files" / "tools" / "a.d").exists()
