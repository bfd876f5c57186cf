"""The worker's transcript cache on real stores: a step reads (and parses) only its
new messages at any session length, and a rewrite of any kind is seen at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_agents.activities.transcript_cache import TranscriptCache
from durable_agents.checkpoint import Checkpoint, CheckpointStore, FileStore, Message, SqliteStore
from durable_agents.checkpoint.conformance._base import in_threads
from durable_agents.checkpoint.fork import Patch, fork
from durable_agents.checkpoint.format import Role, ToolCall
from durable_agents.checkpoint.stores import _file_records
from durable_agents.testing import FailingStore
from tests.counting_store import CountingStore

KB = "x" * 1000


def turn(i: int) -> Message:
    return Message(role=Role.ASSISTANT, content=f"turn {i} {KB}", tool_calls=[ToolCall(id=f"c{i}", name="t")])


def result(i: int) -> Message:
    return Message.tool_result(ToolCall(id=f"c{i}", name="t"), f'{{"n": {i}, "pad": "{KB}"}}')


def session(store: CheckpointStore, sid: str, steps: int) -> None:
    """A session of ``steps`` steps (a turn and its result each), saved at once."""
    messages = [Message.system("sys"), Message.user("go")]
    for i in range(steps):
        messages += [turn(i), result(i)]
    store.save(Checkpoint(session_id=sid, messages=messages))


def step(store: CheckpointStore, sid: str) -> None:
    """One more step, written as the worker writes it (two appends)."""
    header = store.load_header(sid)
    assert header is not None
    i = header.message_count
    for message in (turn(i), result(i)):
        store.append(header.model_copy(update={"message_count": i + 1}), i, [message])
        header, i = header.model_copy(update={"message_count": i + 1}), i + 1


@pytest.fixture(params=["sqlite", "file"])
def handles(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[CheckpointStore, CheckpointStore]]:
    """Two handles on one store: this worker's and another process's."""
    if request.param == "sqlite":
        pair: tuple[CheckpointStore, CheckpointStore] = (SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db"))
    else:
        pair = (FileStore(tmp_path / "files"), FileStore(tmp_path / "files"))
    yield pair
    for s in pair:
        s.close()


def test_a_step_reads_one_row_per_new_message_at_any_session_length(tmp_path: Path) -> None:
    store, cache = CountingStore(tmp_path / "s.db"), TranscriptCache()
    per_step = {}
    for steps in (50, 5000):  # 102 and 10,002 messages
        sid = f"s-{steps}"
        session(store, sid, steps)
        cache.read(store, sid)
        counts = []
        for _ in range(3):
            step(store, sid)
            store.reset()
            header, messages = cache.read(store, sid)
            counts.append((store.round_trips(), store.parsed))
            assert header is not None and len(messages) == header.message_count
            assert messages == store.load_messages(sid)
        per_step[steps] = counts
    # one round trip, the two new messages parsed: the same at 100 and at 10,000 messages
    assert per_step[50] == per_step[5000] == [(1, 2)] * 3


def test_a_file_store_step_scans_only_the_end_of_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, cache = FileStore(tmp_path / "files"), TranscriptCache()
    session(store, "a", 5000)
    cache.read(store, "a")
    step(store, "a")
    scanned, whole_reads = [], []
    real_lines, real_log = _file_records.lines_backwards, _file_records.FileRecords._read_log

    def counted_lines(f):  # type: ignore[no-untyped-def]
        for line in real_lines(f):
            scanned.append(line)
            yield line

    def counted_log(self, name, wanted=None):  # type: ignore[no-untyped-def]
        whole_reads.append(name)
        return real_log(self, name, wanted)

    monkeypatch.setattr(_file_records, "lines_backwards", counted_lines)
    monkeypatch.setattr(_file_records.FileRecords, "_read_log", counted_log)
    header, messages = cache.read(store, "a")
    assert header is not None and messages[-2:] == [turn(10002), result(10002)]
    assert len(scanned) == 2 and whole_reads == []  # of 10,004 lines
    monkeypatch.undo()
    assert messages == store.load_messages("a")


def test_another_workers_appends_are_read_from_where_the_cache_ends(handles) -> None:  # type: ignore[no-untyped-def]
    mine, theirs = handles
    cache = TranscriptCache()
    session(mine, "a", 3)
    cache.read(mine, "a")
    for _ in range(3):
        step(theirs, "a")
    _, messages = cache.read(mine, "a")
    assert messages == theirs.load_messages("a") and len(messages) == 14
    assert (cache.hits, cache.misses) == (1, 1)


@pytest.mark.parametrize("rewrite", ["earlier-message", "truncate-then-other", "delete-recreate", "fork-into-id"])
def test_a_rewrite_by_another_handle_is_seen_by_the_next_read(handles, rewrite: str) -> None:  # type: ignore[no-untyped-def]
    mine, theirs = handles
    cache = TranscriptCache()
    session(mine, "a", 3)
    session(mine, "other", 2)
    cache.read(mine, "a")
    cp = theirs.load("a")
    assert cp is not None
    if rewrite == "earlier-message":
        messages = [cp.messages[0], Message.user("changed question"), *cp.messages[2:]]
        theirs.save(cp.model_copy(update={"messages": messages, "updated_at": None}))
    elif rewrite == "truncate-then-other":
        theirs.save(cp.model_copy(update={"messages": cp.messages[:4], "updated_at": None}))
        header = theirs.load_header("a")
        assert header is not None
        theirs.append(header.model_copy(update={"message_count": 5}), 4, [Message.user("changed question")])
    elif rewrite == "delete-recreate":  # the same id and length, no session uid: only the token differs
        theirs.delete("a")
        messages = [cp.messages[0], Message.user("changed question"), *cp.messages[2:]]
        theirs.save(Checkpoint(session_id="a", messages=messages))
    else:
        theirs.delete("a")
        fork(theirs, "other", 0, Patch(append_input="changed question"), new_session_id="a")
    header, messages = cache.read(mine, "a")
    assert header is not None and messages == theirs.load_messages("a")
    assert Message.user("changed question") in messages
    assert cache.misses == 2  # the rewrite was a whole read, not a stale tail


def test_a_store_without_tokens_is_read_whole_every_time(tmp_path: Path) -> None:
    inner = SqliteStore(tmp_path / "s.db")
    store, cache = FailingStore(inner), TranscriptCache()  # FailingStore keeps the default: no token
    session(inner, "a", 2)
    for _ in range(3):
        step(inner, "a")
        _, messages = cache.read(store, "a")
        assert messages == inner.load_messages("a")
    assert (cache.hits, cache.misses, cache.sessions) == (0, 3, 0)


def test_the_cache_keeps_the_most_recently_read_sessions_within_its_bounds(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    for sid in "abc":
        session(store, sid, 4)
    cache = TranscriptCache(max_sessions=2)
    for sid in "abca":
        cache.read(store, sid)
    assert cache.sessions == 2 and (cache.hits, cache.misses) == (0, 4)  # a was dropped for c
    cache.read(store, "c")
    assert cache.hits == 1
    one = cache.cached_bytes // 2
    small = TranscriptCache(max_bytes=one + 10)
    small.read(store, "a")
    small.read(store, "b")  # a dropped: the two do not fit
    assert small.sessions == 1 and small.cached_bytes == one
    session(store, "big", 8)
    small.read(store, "big")  # larger than the bound alone: not kept
    assert small.sessions == 1 and small.cached_bytes == one
    off = TranscriptCache(max_sessions=0)
    off.read(store, "a")
    off.read(store, "a")
    assert off.sessions == 0 and off.misses == 2


def test_negative_bounds_are_refused_with_the_fix() -> None:
    from durable_agents.checkpoint import ConfigurationError

    with pytest.raises(ConfigurationError, match="transcript_cache_bytes"):
        TranscriptCache(max_bytes=-1)


def test_threads_reading_while_a_writer_appends_always_get_a_true_prefix(tmp_path: Path) -> None:
    store, cache = SqliteStore(tmp_path / "s.db"), TranscriptCache()
    session(store, "a", 1)
    seen: list[list[Message]] = []
    lock = threading.Lock()

    def reader() -> None:
        for _ in range(40):
            header, messages = cache.read(store, "a")
            assert header is not None and len(messages) == header.message_count
            with lock:
                seen.append(messages)

    def writer() -> None:
        for _ in range(40):
            step(store, "a")

    in_threads([writer, reader, reader, reader])  # re-raises a reader's failed assertion
    final = store.load_messages("a")
    assert len(seen) == 120 and all(messages == final[: len(messages)] for messages in seen)
    assert cache.read(store, "a")[1] == final
