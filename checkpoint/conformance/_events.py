"""Checks of the event log (``append_events`` / ``read_events``): what streamed runs
write and what ``AgentClient.stream`` / ``watch`` read.

Offsets count from 1 in each session, without gaps, in append order; a keyed
event is appended once (a retried write gets the offset it was given); a
reader that asks for the events after an offset gets exactly those, from any
handle; a deleted or pruned session's log goes with it.
"""

from __future__ import annotations

import json
from datetime import timedelta

from durable_agents.checkpoint.conformance._base import (
    ConformanceBase,
    StoreHandles,
    grow,
    in_threads,
    requires,
    two_handles,
)
from durable_agents.checkpoint.stores.base import CheckpointStore, StoreCapabilities


def _body(n: int, text: str = "") -> str:
    return json.dumps({"type": "text-delta", "sessionId": "a", "n": n, "text": text})


def _numbers(store: CheckpointStore, sid: str, after: int = 0, limit: int | None = None) -> list[int]:
    return [json.loads(e.body)["n"] for e in store.read_events(sid, after, limit)]


class EventChecks(ConformanceBase):
    @requires("events")
    def test_events_get_offsets_from_one_in_order(self, stores: StoreHandles) -> None:
        store = stores()
        assert store.read_events("a") == []
        assert store.append_events("a", [(None, _body(1)), (None, _body(2))]) == [1, 2]
        assert store.append_events("a", [(None, _body(3))]) == [3]
        assert store.append_events("b", [(None, _body(1))]) == [1]  # each session its own log
        assert store.last_event_offset("a") == 3 and store.last_event_offset("b") == 1
        assert store.last_event_offset("c") == 0
        events = store.read_events("a")
        assert [e.offset for e in events] == [1, 2, 3] and [json.loads(e.body)["n"] for e in events] == [1, 2, 3]
        assert _numbers(store, "a", after=1) == [2, 3] and _numbers(store, "a", after=3) == []
        assert _numbers(store, "a", after=0, limit=2) == [1, 2] and _numbers(store, "a", after=2, limit=5) == [3]
        assert store.append_events("a", []) == []

    @requires("events")
    def test_bodies_come_back_exactly_as_written(self, stores: StoreHandles) -> None:
        store = stores()
        body = json.dumps({"type": "text-delta", "text": 'tab\there, line\nbreak, ünïcødé 🙂, quote " and \\'})
        store.append_events("a", [("k", body)])
        [event] = store.read_events("a")
        assert event.body == body and event.key == "k" and event.offset == 1

    @requires("events")
    def test_a_keyed_event_is_appended_once(self, stores: StoreHandles) -> None:
        store = stores()
        assert store.append_events("a", [("turn:1", _body(1)), (None, _body(2))]) == [1, 2]
        # a retried write: the keyed event keeps its offset; the new one goes after the log's end
        assert store.append_events("a", [("turn:1", _body(99)), ("turn:2", _body(3))]) == [1, 3]
        assert store.append_events("a", [("x", _body(4)), ("x", _body(98))]) == [4, 4]  # twice in one batch
        assert _numbers(store, "a") == [1, 2, 3, 4]
        assert store.append_events("b", [("turn:1", _body(1))]) == [1]  # keys are per session

    @requires("events")
    def test_a_tailing_reader_sees_each_event_once(self, stores: StoreHandles) -> None:
        store = stores()
        seen: list[int] = []
        after = 0
        for n in range(1, 8):
            store.append_events("a", [(None, _body(n))] * (n % 3))
            for event in store.read_events("a", after):
                seen.append(event.offset)
                after = event.offset
        assert seen == list(range(1, len(seen) + 1)) and len(seen) == sum(n % 3 for n in range(1, 8))
        assert [e.offset for e in store.read_events("a", 2, 2)] == [3, 4]  # and back again, from anywhere
        assert [e.offset for e in store.read_events("a", 0, 1)] == [1]

    @requires("events", "shared_across_processes")
    def test_another_handle_reads_and_continues_the_log(
        self, stores: StoreHandles, store_capabilities: StoreCapabilities
    ) -> None:
        first, second = two_handles(stores, store_capabilities)
        first.append_events("a", [("k", _body(1)), (None, _body(2))])
        assert _numbers(second, "a") == [1, 2]
        assert second.append_events("a", [("k", _body(9)), (None, _body(3))]) == [1, 3]
        assert first.append_events("a", [(None, _body(4))]) == [4]
        assert second.last_event_offset("a") == 4
        assert _numbers(first, "a", after=2) == [3, 4] and _numbers(second, "a", after=3) == [4]

    @requires("events", "concurrent")
    def test_concurrent_appends_get_distinct_offsets(
        self, stores: StoreHandles, store_capabilities: StoreCapabilities
    ) -> None:
        first, second = two_handles(stores, store_capabilities)

        def append(store: CheckpointStore, base: int) -> None:
            for n in range(base, base + 20):
                store.append_events("a", [(f"k{n % 5}", _body(-1)), (None, _body(n))])

        in_threads([lambda: append(first, 0), lambda: append(second, 100), lambda: append(first, 200)])
        events = first.read_events("a")
        assert [e.offset for e in events] == list(range(1, len(events) + 1))
        assert sorted(n for n in _numbers(first, "a") if n >= 0) == [*range(20), *range(100, 120), *range(200, 220)]
        assert sorted(e.key for e in events if e.key) == [f"k{i}" for i in range(5)]

    @requires("events")
    def test_a_deleted_session_loses_its_log(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 1)
        store.append_events("a", [("k", _body(1))])
        store.delete("a")
        assert store.read_events("a") == [] and store.last_event_offset("a") == 0
        assert store.append_events("a", [("k", _body(2))]) == [1]  # a new session of that id starts anew

    @requires("events")
    def test_prune_removes_the_logs_of_the_sessions_it_removes(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "old", 1)
        grow(store, "kept", 1)
        for sid in ("old", "kept"):
            store.append_events(sid, [(None, _body(1))])
        assert store.prune(timedelta(0), keep=["kept"]) == 1
        assert store.read_events("old") == [] and _numbers(store, "kept") == [1]
