"""Checks of session management and concurrent writers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

from durable_agents.checkpoint.conformance._base import (
    T0,
    ConformanceBase,
    StoreHandles,
    grow,
    in_threads,
    loaded,
    requires,
    two_handles,
)
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, Message, Role, ToolCall
from durable_agents.checkpoint.stores._subagents import subagent_session_id
from durable_agents.checkpoint.stores.base import StoreCapabilities
from durable_agents.checkpoint.transcript import pending_tool_calls


class SessionChecks(ConformanceBase):
    # -- management ----------------------------------------------------------------------
    def test_delete_drops_the_session_and_its_tool_markers(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)
        grow(store, "b", 1)
        store.tool_started("a", 2)
        store.delete("a")
        assert store.load("a") is None and store.load_header("a") is None and store.load_messages("a") == []
        assert [s.session_id for s in store.list_sessions()] == ["b"]
        assert store.tool_started("a", 2) == 0  # tool markers go with the checkpoint
        assert store.history("a") == []
        grow(store, "a", 1)  # a new run under the same id starts afresh
        assert len(loaded(store, "a").messages) == 3
        store.delete("never-saved")

    @requires("history")
    def test_delete_can_keep_history(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 3)
        store.tool_started("a", 2)
        store.delete("a", keep_history=True)
        assert store.load("a") is None and store.list_sessions() == []
        assert store.tool_started("a", 2) == 0
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

    def test_waiting_sessions_are_the_paused_ones_newest_first_each_with_its_last_turn(
        self, stores: StoreHandles
    ) -> None:
        store = stores()
        calls = [ToolCall(id="c0", name="lookup"), ToolCall(id="c1", name="charge", arguments={"amount": 5})]
        turn = Message(role=Role.ASSISTANT, content="on it", tool_calls=calls)
        older = [Message.user("hi"), Message(role=Role.ASSISTANT, content="hello"), Message.user("charge me")]
        result = Message.tool_result(calls[0], "found")
        for i, (sid, agent, status, messages) in enumerate(
            [
                ("paused", "x", "awaiting-approval", [*older, turn]),  # the gated call is the turn's first
                ("after-a-result", "x", "awaiting-approval", [*older, turn, result]),  # its second
                ("other-agent", "y", "awaiting-approval", [*older, turn]),
                ("running", "x", "in-progress", [*older, turn]),
                ("done", "x", "finished", older),
            ]
        ):
            store.save(
                Checkpoint(
                    session_id=sid,
                    agent=agent,
                    status=CheckpointStatus(status),
                    approval_id=f"ap-{sid}" if status == "awaiting-approval" else None,
                    remaining_tool_calls=calls[1:] if sid == "paused" else [],
                    messages=messages,
                    updated_at=T0 + timedelta(hours=i),
                )
            )
        waiting = store.waiting_sessions()
        assert [w.header.session_id for w in waiting] == ["other-agent", "after-a-result", "paused"]
        by_id = {w.header.session_id: w for w in waiting}
        assert by_id["paused"].header.approval_id == "ap-paused"
        assert by_id["paused"].header.remaining_tool_calls == calls[1:]
        assert (by_id["paused"].header.agent, by_id["paused"].header.message_count) == ("x", 4)
        for sid, answered in (("paused", 0), ("after-a-result", 1)):
            pending, _ = pending_tool_calls(by_id[sid].last_turn)  # the turn and its results so far
            assert pending == calls[answered:], sid
        assert [w.header.session_id for w in store.waiting_sessions(agent="x")] == ["after-a-result", "paused"]
        assert store.waiting_sessions(agent="nobody") == []

    def test_prune_drops_sessions_last_saved_before_the_cutoff(self, stores: StoreHandles) -> None:
        store = stores(history_limit=50)
        grow(store, "old", 2, at=T0)  # saved at T0 .. T0+2s
        grow(store, "mixed", 4, at=T0 + timedelta(seconds=10))  # T0+10s .. T0+14s
        store.tool_started("old", 2)
        assert store.prune(T0 + timedelta(seconds=12)) == 1
        assert store.load("old") is None and store.history("old") == []
        assert store.tool_started("old", 2) == 0
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

    # -- sub-agent sessions go with their parent ---------------------------------------------
    def test_delete_drops_the_sessions_sub_agent_sessions_too(self, stores: StoreHandles) -> None:
        store = stores()
        long_parent = "p" * 899  # its children's ids are hashed (stores._subagents.subagent_session_id)
        for parent in ("a", long_parent):
            grow(store, parent, 1)
            child = _subagent(store, parent, 3)
            grandchild = _subagent(store, child, 4)
            _subagent(store, parent, 5)
            store.delete(parent)
            assert store.load_header(child) is None and store.load_header(grandchild) is None
        grow(store, "a/3", 1)  # a session named like a sub-agent's but of no parent: not a child of "a"
        grow(store, "a", 1)
        store.delete("a")
        assert [s.session_id for s in store.list_sessions()] == ["a/3"]

    def test_prune_drops_sub_agent_sessions_only_with_their_parent(self, stores: StoreHandles) -> None:
        store = stores()
        old = T0
        grow(store, "live", 1, at=old)
        live_child = _subagent(store, "live", 3, at=old)
        grow(store, "waits", 1, at=old)
        _waiting(store, "waits")
        waits_child = _subagent(store, "waits", 3, at=old)
        grow(store, "recent", 1)
        recent_child = _subagent(store, "recent", 3, at=old)  # old itself: its parent is not
        grow(store, "gone", 1, at=old)
        gone_child = _subagent(store, "gone", 3, at=old)
        gone_grandchild = _subagent(store, gone_child, 2, at=old)
        assert store.prune(timedelta(days=1), keep=["live"]) == 3
        assert {s.session_id for s in store.list_sessions()} == {
            "live", live_child, "waits", waits_child, "recent", recent_child,
        }  # fmt: skip
        assert store.load_header(gone_grandchild) is None
        # a child waiting for approval keeps its (old) parent, as the parent waits with it
        grow(store, "p2", 1, at=old)
        child = _subagent(store, "p2", 3, at=old)
        _waiting(store, child)
        assert store.prune(timedelta(days=1), keep=["live"]) == 0
        assert store.load_header("p2") is not None
        assert store.prune(timedelta(days=1), include_waiting=True) == 6  # all but "recent" and its child

    @requires("concurrent")
    def test_concurrent_saves_of_different_sessions(
        self, stores: StoreHandles, store_capabilities: StoreCapabilities
    ) -> None:
        handles = two_handles(stores, store_capabilities)
        in_threads([partial(grow, handles[n % 2], f"s{n}", 15, size=50) for n in range(8)])
        first = handles[0]
        assert len(first.list_sessions()) == 8
        for n in range(8):
            cp = loaded(first, f"s{n}")
            assert cp.step_index == 15 and len(cp.messages) == 17
            if store_capabilities.history:
                assert [e.step for e in first.history(f"s{n}", limit=3)] == [15, 14, 13]


def _subagent(store, parent: str, position: int, at: datetime | None = None) -> str:
    """A sub-agent session of ``parent`` (its id as the worker makes it), saved at ``at``."""

    sid = subagent_session_id(parent, position)
    store.save(
        Checkpoint(
            session_id=sid,
            messages=[Message.user("task")],
            parent_session_id=parent,
            parent_tool_call_id=f"call_{position}",
            updated_at=at,
        )
    )
    return sid


def _waiting(store, sid: str) -> None:
    header = store.load_header(sid)
    store.append(
        header.model_copy(update={"status": CheckpointStatus.AWAITING_APPROVAL, "approval_id": "ap-1"}),
        header.message_count,
        [],
    )
