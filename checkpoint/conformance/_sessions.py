"""Checks of tool results, session management and concurrent writers."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from durable_agents.checkpoint.conformance._base import (
    T0,
    ConformanceBase,
    StoreHandles,
    grow,
    loaded,
    requires,
    with_calls,
)
from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, Message, ToolCall
from durable_agents.checkpoint.stores.base import CheckpointStore, StoreCapabilities


def _in_threads(jobs: Sequence[Callable[[], object]]) -> None:
    """Run every job in a thread of its own; re-raise the first failure."""
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        try:
            job()
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _two_handles(stores: StoreHandles, capabilities: StoreCapabilities) -> tuple[CheckpointStore, CheckpointStore]:
    """Two workers' handles on one store (one handle twice if handles share nothing)."""
    first = stores(history_limit=50)
    return first, stores(history_limit=50) if capabilities.shared_across_processes else first


class SessionChecks(ConformanceBase):
    # -- tools ----------------------------------------------------------------------
    def test_tool_results_are_recorded_once_and_in_call_order(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["c1", "c2"])
        batch = ["c1", "c2"]
        r2 = Message.tool_result(ToolCall(id="c2", name="t"), "two")
        assert store.record_tool_result("a", r2, 2, batch) == 2  # waits for c1
        assert store.tool_result("a", "c2") == r2 and store.tool_result("a", "c1") is None
        r1 = Message.tool_result(ToolCall(id="c1", name="t"), "one")
        assert store.record_tool_result("a", r1, 2, batch) == 4
        again = Message.tool_result(ToolCall(id="c1", name="t"), "one, re-run")
        assert store.record_tool_result("a", again, 2, batch) == 4
        assert [m.content for m in loaded(store, "a").messages[2:]] == ["one", "two"]
        assert store.tool_result("a", "c1") == r1  # the first recorded result wins
        with pytest.raises(StoreCorruptError):
            store.record_tool_result("a", r1, 5, batch)  # a batch the checkpoint is not inside

    def test_tool_started_counts_previous_starts(self, stores: StoreHandles) -> None:
        store = stores()
        assert store.tool_started("a", "c1") == 0
        assert store.tool_started("a", "c1") == 1
        assert store.tool_started("a", "c2") == 0

    @requires("concurrent")
    def test_concurrent_tool_results_from_two_workers_land_once_in_order(
        self, stores: StoreHandles, store_capabilities: StoreCapabilities
    ) -> None:
        first, second = _two_handles(stores, store_capabilities)
        ids = [f"c{i}" for i in range(12)]
        with_calls(first, ids)
        jobs = [
            partial(s.record_tool_result, "a", Message.tool_result(ToolCall(id=i, name="t"), f"{i}/{n}"), 2, ids)
            for i in ids
            for n, s in enumerate((first, second))
        ]
        random.Random(7).shuffle(jobs)
        _in_threads(jobs)
        messages = loaded(first, "a").messages[2:]
        assert [m.tool_call_id for m in messages] == ids
        assert all(m == first.tool_result("a", m.tool_call_id or "") for m in messages)

    # -- management ----------------------------------------------------------------------
    def test_delete_drops_the_session_and_its_tool_markers(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)
        grow(store, "b", 1)
        store.tool_started("a", "c1")
        store.delete("a")
        assert store.load("a") is None and store.load_header("a") is None and store.load_messages("a") == []
        assert [s.session_id for s in store.list_sessions()] == ["b"]
        assert store.tool_started("a", "c1") == 0  # tool markers go with the checkpoint
        assert store.history("a") == []
        grow(store, "a", 1)  # a new run under the same id starts afresh
        assert len(loaded(store, "a").messages) == 3
        store.delete("never-saved")

    @requires("history")
    def test_delete_can_keep_history(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)
        store.tool_started("a", "c1")
        store.delete("a", keep_history=True)
        assert store.load("a") is None and store.list_sessions() == []
        assert store.tool_started("a", "c1") == 0
        assert len(store.history("a")) == 4
        assert len(store.history("a")[0].checkpoint.messages) == 5
        grow(store, "a", 1)  # a new run under the same id; the kept history still reads
        assert [len(e.checkpoint.messages) for e in store.history("a")] == [3, 2, 5, 4, 3]
        store.delete("a")
        assert store.history("a") == [] and store.load("a") is None

    def test_list_sessions_filters_by_status_and_agent_newest_first(self, stores: StoreHandles) -> None:
        store = stores()
        for i, (sid, agent, status) in enumerate(
            [("a", "x", "in-progress"), ("b", "y", "finished"), ("c", "x", "finished"), ("d", None, "in-progress")]
        ):
            store.save(
                Checkpoint(
                    session_id=sid,
                    agent=agent,
                    status=CheckpointStatus(status),
                    step_index=i,
                    messages=[Message.user(sid)] * (i + 1),
                    updated_at=T0 + timedelta(hours=i),
                )
            )
        assert [s.session_id for s in store.list_sessions()] == ["d", "c", "b", "a"]
        assert [s.session_id for s in store.list_sessions(agent="x")] == ["c", "a"]
        assert [s.session_id for s in store.list_sessions(status=CheckpointStatus.FINISHED)] == ["c", "b"]
        assert [s.session_id for s in store.list_sessions(status="finished", agent="x")] == ["c"]  # type: ignore[arg-type]
        c = store.list_sessions(agent="x")[0]
        assert (c.step_index, c.message_count, c.updated_at, c.status) == (2, 3, T0 + timedelta(hours=2), "finished")

    def test_prune_drops_sessions_last_saved_before_the_cutoff(self, stores: StoreHandles) -> None:
        store = stores(history_limit=50)
        grow(store, "old", 2, at=T0)  # saved at T0 .. T0+2s
        grow(store, "mixed", 4, at=T0 + timedelta(seconds=10))  # T0+10s .. T0+14s
        store.tool_started("old", "c1")
        assert store.prune(T0 + timedelta(seconds=12)) == 1
        assert store.load("old") is None and store.history("old") == []
        assert store.tool_started("old", "c1") == 0
        assert len(loaded(store, "mixed").messages) == 6
        now = datetime.now(UTC)
        grow(store, "stale", 1, at=now - timedelta(days=3))
        grow(store, "fresh", 1)
        assert store.prune(timedelta(days=1)) == 2  # a relative cutoff: "mixed" and "stale"
        assert [s.session_id for s in store.list_sessions()] == ["fresh"]

    @requires("history")
    def test_prune_drops_history_entries_saved_before_the_cutoff(self, stores: StoreHandles) -> None:
        store = stores(history_limit=50)
        grow(store, "mixed", 4, at=T0 + timedelta(seconds=10))  # T0+10s .. T0+14s
        assert store.prune(T0 + timedelta(seconds=12)) == 0
        assert [e.step for e in store.history("mixed")] == [4, 3, 2]
        assert [(e.checkpoint.messages[-1].content or "")[:6] for e in store.history("mixed")] == [
            "turn 3",
            "turn 2",
            "turn 1",
        ]
        grow(store, "stale", 1, at=datetime.now(UTC) - timedelta(days=3))
        grow(store, "fresh", 1)
        store.prune(timedelta(days=1))
        assert store.history("stale") == [] and len(store.history("fresh")) == 2

    @requires("concurrent")
    def test_concurrent_saves_of_different_sessions(
        self, stores: StoreHandles, store_capabilities: StoreCapabilities
    ) -> None:
        handles = _two_handles(stores, store_capabilities)
        _in_threads([partial(grow, handles[n % 2], f"s{n}", 15, size=50) for n in range(8)])
        first = handles[0]
        assert len(first.list_sessions()) == 8
        for n in range(8):
            cp = loaded(first, f"s{n}")
            assert cp.step_index == 15 and len(cp.messages) == 17
            if store_capabilities.history:
                assert [e.step for e in first.history(f"s{n}", limit=3)] == [15, 14, 13]
