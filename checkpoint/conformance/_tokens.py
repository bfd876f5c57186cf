"""Checks of ``load_transcript_tail``: what a worker's transcript cache relies on.

A worker keeps the messages it read with the transcript's token and, while the
store reports the same token, reads only the messages after them. So: the
tail is the header and the messages from ``start`` on, read together; an
append keeps the token; anything that changes a message already stored at a
position (a rewrite, a truncation then other messages, a delete and re-create)
gives a token never reported before.
"""

from __future__ import annotations

from durable_agents.checkpoint.conformance._base import (
    ConformanceBase,
    StoreHandles,
    assistant,
    grow,
    latest,
    loaded,
    requires,
)
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, Message
from durable_agents.checkpoint.stores.base import CheckpointStore, TranscriptTail


def _tail(store: CheckpointStore, sid: str, start: int = 0) -> TranscriptTail:
    tail = store.load_transcript_tail(sid, start)
    assert tail is not None, f"session {sid!r} is missing"
    return tail


def _token(store: CheckpointStore, sid: str) -> str:
    token = _tail(store, sid, 10**9).token
    assert token is not None, (
        "the store claims transcript_tokens but load_transcript_tail reports no token; "
        "declare StoreCapabilities(transcript_tokens=False) or return one"
    )
    return token


def _append(store: CheckpointStore, sid: str, message: Message) -> None:
    header = latest(store, sid)
    store.append(header.model_copy(update={"message_count": header.message_count + 1}), header.message_count, [message])


class TokenChecks(ConformanceBase):
    def test_a_transcript_tail_is_the_header_and_the_messages_from_start(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 4)
        whole = loaded(store, "a").messages
        for start in (0, 1, 5, 6, 9):
            tail = _tail(store, "a", start)
            assert tail.header == latest(store, "a") and tail.start == start
            assert tail.messages == whole[start:], f"start={start}"
        assert store.load_transcript_tail("missing", 0) is None

    @requires("transcript_tokens")
    def test_an_append_keeps_the_token_and_a_rewrite_changes_it(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)
        first = _token(store, "a")
        _append(store, "a", assistant(9))
        header = latest(store, "a")
        store.append(header.model_copy(update={"status": CheckpointStatus.FINISHED}), header.message_count, [])
        assert _token(store, "a") == first, "an append (or a header-only save) must keep the token"
        cp = loaded(store, "a")
        changed = [*cp.messages[:1], Message.user("another question"), *cp.messages[2:]]
        store.save(cp.model_copy(update={"messages": changed, "updated_at": None}))
        rewritten = _token(store, "a")
        assert rewritten != first, "a save that changes an earlier message must change the token"
        assert _tail(store, "a", 1).messages[0] == Message.user("another question")

    @requires("transcript_tokens")
    def test_a_truncation_then_other_messages_changes_the_token(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)
        before = _token(store, "a")
        cp = loaded(store, "a")
        store.save(cp.model_copy(update={"messages": cp.messages[:3], "updated_at": None}))
        _append(store, "a", Message.user("a different fourth message"))
        assert _token(store, "a") != before, (
            "position 3 now holds another message than the one stored under the same token before"
        )
        assert _tail(store, "a", 3).messages == [Message.user("a different fourth message")]

    @requires("transcript_tokens")
    def test_a_deleted_and_recreated_session_gets_a_new_token(self, stores: StoreHandles) -> None:
        store = stores()
        seen = set()
        for i in range(4):  # the same id, no session uid: only the store can tell them apart
            store.save(Checkpoint(session_id="a", messages=[Message.user(f"version {i}")]))
            token = _token(store, "a")
            assert token not in seen, f"re-created session {i} reports a token used before"
            seen.add(token)
            assert _tail(store, "a").messages == [Message.user(f"version {i}")]
            store.delete("a")

    @requires("transcript_tokens", "shared_across_processes")
    def test_another_handles_append_keeps_the_token_and_reads_from_start(self, stores: StoreHandles) -> None:
        mine, theirs = stores(), stores()
        grow(mine, "a", 2)
        token = _token(mine, "a")
        held = latest(mine, "a").message_count
        _append(theirs, "a", assistant(7))
        tail = _tail(mine, "a", held)
        assert tail.token == token and tail.messages == [assistant(7)]
        assert tail.header.message_count == held + 1
