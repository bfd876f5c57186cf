"""Checks of the history ring and of what history costs in storage."""

from __future__ import annotations

from datetime import timedelta

from durable_agents.checkpoint.conformance._base import (
    T0,
    ConformanceBase,
    StoreHandles,
    grow,
    latest,
    loaded,
    requires,
)
from durable_agents.checkpoint.format import Message


class HistoryChecks(ConformanceBase):
    @requires("history")
    def test_history_is_a_ring_of_the_newest_saves_newest_first(self, stores: StoreHandles) -> None:
        store = stores(history_limit=5)
        grow(store, "a", 8, at=T0)
        entries = store.history("a")
        assert [e.step for e in entries] == [8, 7, 6, 5, 4]
        assert [len(e.checkpoint.messages) for e in entries] == [10, 9, 8, 7, 6]
        assert [e.saved_at for e in entries] == [T0 + timedelta(seconds=s) for s in (8, 7, 6, 5, 4)]
        assert all(e.checkpoint.updated_at == e.saved_at for e in entries)
        assert (entries[0].checkpoint.messages[-1].content or "").startswith("turn 7")
        assert entries[0].checkpoint.to_json() == loaded(store, "a").to_json()
        assert [e.step for e in store.history("a", limit=2)] == [8, 7]
        assert store.history("a", limit=0) == []
        assert store.history("unknown") == []

    def test_history_limit_zero_keeps_none(self, stores: StoreHandles) -> None:
        store = stores(history_limit=0)
        grow(store, "a", 3)
        assert store.history("a") == [] and len(loaded(store, "a").messages) == 5

    @requires("history")
    def test_history_survives_a_rewrite_of_an_earlier_message(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 2)
        cp = loaded(store, "a")
        cp.messages[1] = Message.user("changed")
        store.save(cp.model_copy(update={"updated_at": None}))
        header = latest(store, "a")
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

    @requires("history")
    def test_a_shorter_save_then_new_messages_leave_older_entries_intact(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)  # 5 messages
        cp = loaded(store, "a")
        store.save(cp.model_copy(update={"messages": cp.messages[:3], "updated_at": None}))
        header = latest(store, "a")
        store.append(header.model_copy(update={"message_count": 4, "updated_at": None}), 3, [Message.user("new")])
        assert [m.content for m in loaded(store, "a").messages][3:] == ["new"]
        five = next(e for e in store.history("a") if len(e.checkpoint.messages) == 5)
        assert (five.checkpoint.messages[3].content or "").startswith("turn 1")

    @requires("history")
    def test_history_storage_grows_linearly(self, stores: StoreHandles) -> None:
        store = stores(history_limit=50)
        self.measured(store)  # skips before the long write when nothing measures it
        grow(store, "a", 400, size=1024)
        transcript = sum(len(m.to_json()) for m in loaded(store, "a").messages)
        entries = store.history("a")
        assert len(entries) == 50 and len(entries[-1].checkpoint.messages) == 353
        stored = self.measured(store)  # entries share the transcript instead of copying it
        assert stored <= 3 * transcript, (stored, transcript)

    @requires("history")
    def test_rewritten_transcripts_are_dropped_with_their_last_history_entry(self, stores: StoreHandles) -> None:
        store = stores(history_limit=3)
        self.measured(store)
        grow(store, "a", 10, size=1024)
        for i in range(30):  # every save changes an earlier message: a new transcript each time
            cp = loaded(store, "a")
            cp.messages[1] = Message.user(f"go {i}")
            store.save(cp.model_copy(update={"updated_at": None}))
        transcript = sum(len(m.to_json()) for m in loaded(store, "a").messages)
        assert [e.checkpoint.messages[1].content for e in store.history("a")] == ["go 29", "go 28", "go 27"]
        assert self.measured(store) <= (3 + 2) * transcript  # the ring's transcripts, not all 31
        store.delete("a", keep_history=True)
        assert self.measured(store) <= (3 + 1) * transcript
        store.delete("a")
        assert self.measured(store) < 1000
