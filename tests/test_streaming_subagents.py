"""A streamed parent's sub-agents in its stream (issue 12), on a real Temporal dev server:
the parent writes ``ToolCallStarted`` / ``SubAgentStarted`` / ``ToolCallFinished`` for each
sub-agent call, so ``stream()`` and ``watch()`` yield the child's events nested
(``SubAgentEvent``, tagged with the child's session); a child's pause shows in the
parent's stream (``ApprovalRequested`` at the parent's level with the child's session,
then ``RunPaused``), and the decision relayed by ``approve PARENT`` (``ApprovalDecided``),
after which the child's events follow nested again."""

from __future__ import annotations

import asyncio

from durable_agents.checkpoint import FinishReason
from durable_agents.events import (
    ApprovalDecided,
    ApprovalRequested,
    RunFinished,
    RunPaused,
    SubAgentEvent,
    SubAgentStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnStored,
    step_text,
)
from tests import subagent_agents as sa
from tests.conftest import session_id


async def collect(events, timeout: float = 20) -> list:
    async def run() -> list:
        return [event async for event in events]

    return await asyncio.wait_for(run(), timeout)


def top(events: list) -> list:
    return [e for e in events if not isinstance(e, SubAgentEvent)]


def nested(events: list, child: str) -> list:
    return [e.event for e in events if isinstance(e, SubAgentEvent) and e.child_session_id == child]


async def test_a_streamed_parent_yields_its_sub_agents_events_nested(run_worker, store):
    sid = session_id()
    child = f"{sid}/3"  # system, user, the lead's turn: the call's result goes at 3
    async with run_worker([sa.solo_lead]) as client:
        events = await collect(client.stream("solo-lead", "Rome", session_id=sid))
        replayed = await collect(client.watch(sid))

    assert isinstance(events[-1], RunFinished) and events[-1].result.finish_reason == FinishReason.STOP
    kinds = [e.type for e in top(events)]
    first = kinds.index("turn-stored")
    assert kinds[first + 1 : first + 5] == [
        "tool-call-started",
        "subagent-started",
        "tool-call-finished",
        "model-turn-started",
    ]
    [started] = [e for e in events if isinstance(e, SubAgentStarted)]
    assert (started.child_session_id, started.agent, started.position) == (child, "researcher", 3)
    [call] = [e for e in top(events) if isinstance(e, ToolCallStarted)]
    [finished] = [e for e in top(events) if isinstance(e, ToolCallFinished)]
    assert call.tool_call_id == started.tool_call_id == finished.tool_call_id and call.name == "researcher"
    assert '"subagentSessionId"' in finished.result and finished.position == 3

    inner = nested(events, child)
    assert inner[0].type == "run-started" and inner[-1].type == "run-finished"
    assert all(e.session_id == child for e in inner)
    assert [e.name for e in inner if isinstance(e, ToolCallStarted)] == ["look_up"]
    # the child's events all come before the parent's result for the call
    last_nested = max(i for i, e in enumerate(events) if isinstance(e, SubAgentEvent))
    assert last_nested < events.index(finished)
    for turn in (e for e in inner if isinstance(e, TurnStored)):
        assert step_text(inner, turn.step) == turn.text
    assert [m.content for m in store.load(child).messages][-1] == inner[-1].result.text

    # watch() from the start replays the same, nested the same way
    assert [(e.type, getattr(e, "child_session_id", None)) for e in replayed] == [
        (e.type, getattr(e, "child_session_id", None)) for e in events
    ]
    logged = [e.type for e in store_events(store, sid)]
    assert [logged.count(t) for t in ("tool-call-started", "subagent-started", "tool-call-finished")] == [1, 1, 1]


def store_events(store, sid: str) -> list:
    return [row.event() for row in store.read_events(sid)]


async def test_a_sub_agents_pause_and_its_relayed_decision_show_in_the_parents_stream(run_worker, store):
    sid = session_id()
    write = f"{sid}/4"
    async with run_worker([sa.lead]) as client:
        paused = await collect(client.stream("lead", "Rome", session_id=sid))
        assert isinstance(paused[-1], RunPaused), [e.type for e in top(paused)]
        result = paused[-1].result
        assert result.finish_reason == FinishReason.AWAITING_APPROVAL
        [asked] = [e for e in top(paused) if isinstance(e, ApprovalRequested)]
        assert (asked.approval_id, asked.session_id, asked.subagent_session_id) == (result.approval_id, sid, write)
        assert (asked.tool_name, asked.arguments) == ("publish", {"text": "Note: a note on Rome"})
        # the child's own pause, nested, before the parent's
        child_pause = [e for e in nested(paused, write) if isinstance(e, ApprovalRequested)]
        assert [e.approval_id for e in child_pause] == [result.approval_id] and child_pause[
            0
        ].subagent_session_id is None
        assert nested(paused, write)[-1].type == "run-paused"
        after = paused[-1].offset

        done = await asyncio.wait_for(client.approve(sid, result.approval_id, decided_by="alice"), 60)
        assert done.finish_reason == FinishReason.STOP
        rest = await collect(client.watch(sid, after=after))
        whole = await collect(client.watch(sid))  # from the start, across the pause: both stretches, once each
    assert [(e.type, e.offset) for e in nested(whole, write)] == [
        (e.type, e.offset) for e in nested(paused, write) + nested(rest, write)
    ]

    assert isinstance(rest[-1], RunFinished) and rest[-1].result.text == done.text
    [decided] = [e for e in top(rest) if isinstance(e, ApprovalDecided)]
    assert (decided.approval_id, decided.approved, decided.decided_by) == (result.approval_id, True, "alice")
    assert (decided.subagent_session_id, decided.tool_name) == (write, "publish")
    # the writer's events after the decision arrive nested again: its decision, the tool, its end
    inner = nested(rest, write)
    assert inner[0].type == "approval-decided" and inner[-1].type == "run-finished"
    assert [e.name for e in inner if isinstance(e, ToolCallFinished)] == ["publish"]
    [finished] = [e for e in top(rest) if isinstance(e, ToolCallFinished)]
    assert finished.name == "write_note" and rest.index(finished) > max(
        i for i, e in enumerate(rest) if isinstance(e, SubAgentEvent)
    )


async def test_a_grandchilds_pause_and_decision_pass_up_through_every_streamed_level(run_worker, store):
    sid = session_id()
    lead, write = f"{sid}/3", f"{sid}/3/4"
    async with run_worker([sa.chief]) as client:
        paused = await collect(client.stream("chief", "Kyoto", session_id=sid))
        assert isinstance(paused[-1], RunPaused)
        approval_id = paused[-1].result.approval_id
        [asked] = [e for e in top(paused) if isinstance(e, ApprovalRequested)]
        assert (asked.approval_id, asked.subagent_session_id, asked.tool_name) == (approval_id, write, "publish")
        middle = nested(paused, lead)  # the lead's own relay of it, and its pause, nested once
        assert [e.subagent_session_id for e in middle if isinstance(e, ApprovalRequested)] == [write]
        assert middle[-1].type == "run-paused"
        deep = [e.event for e in middle if isinstance(e, SubAgentEvent) and e.child_session_id == write]
        assert deep[-1].type == "run-paused"

        done = await asyncio.wait_for(client.approve(sid, approval_id), 60)
        rest = await collect(client.watch(sid, after=paused[-1].offset))
    assert done.text == "Chief done." and isinstance(rest[-1], RunFinished)
    assert [e.subagent_session_id for e in top(rest) if isinstance(e, ApprovalDecided)] == [write]
    middle = nested(rest, lead)
    assert middle[-1].type == "run-finished"
    deep = [e.event for e in middle if isinstance(e, SubAgentEvent) and e.child_session_id == write]
    assert deep[0].type == "approval-decided" and deep[-1].type == "run-finished"


async def test_a_decision_that_starts_the_parents_next_run_shows_in_its_stream(run_worker, store):
    """The parent's run was terminated while its sub-agent waited; a streamed next run with the
    decision (what ``approve`` starts) says so: ``ApprovalDecided`` for the sub-agent's call,
    then ``SubAgentStarted`` and the sub-agent's second run nested, from its decision on."""
    from durable_agents import ApprovalDecision

    sid = session_id()
    write = f"{sid}/4"
    async with run_worker([sa.lead]) as client:
        paused = await collect(client.stream("lead", "Lima", session_id=sid))
        approval_id = paused[-1].result.approval_id
        await client.temporal.get_workflow_handle(sid).terminate("an operator closed it")
        await asyncio.sleep(1)  # the parent close policy terminates the writer's run
        after = store.last_event_offset(sid)
        decision = ApprovalDecision(approval_id=approval_id, approved=True, decided_by="bob")
        await client.start("lead", [], session_id=sid, approval=decision, stream=True)
        rest = await collect(client.watch(sid, after=after))
    assert isinstance(rest[-1], RunFinished) and rest[-1].result.finish_reason == FinishReason.STOP
    kinds = [e.type for e in top(rest)]
    assert kinds.index("approval-decided") < kinds.index("subagent-started")
    [decided] = [e for e in top(rest) if isinstance(e, ApprovalDecided)]
    assert (decided.subagent_session_id, decided.decided_by, decided.tool_name) == (write, "bob", "publish")
    [started] = [e for e in top(rest) if isinstance(e, SubAgentStarted)]
    assert started.child_session_id == write and started.after > 0  # its first run's events are not replayed
    inner = [e.type for e in nested(rest, write)]
    assert inner[0] == "run-started" and "approval-decided" in inner and inner[-1] == "run-finished"
    assert inner.count("run-started") == 1
