"""A worker SIGKILLed at each moment of a sub-agent call (issue 12): before the child
starts, while the child runs a tool, after the child finished and before the parent
recorded its result. A fresh worker finishes the pair: exactly one child run, exactly
one result in the parent, no model turn generated again in either session."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid

import pytest

from durable_agents import AgentClient
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role, SqliteStore
from durable_agents.events import SubAgentEvent
from durable_agents.testing import SIDE_EFFECTS, CrashWindow, WorkerProcess, check_guarantees, read_records
from tests.conftest import session_id
from tests.crash.conftest import ROOT

AGENTS = "tests.subagent_agents:ALL"
WINDOWS = [CrashWindow.BEFORE_SUBAGENT_START, CrashWindow.DURING_TOOL, CrashWindow.AFTER_SUBAGENT_FINISHED]
CASES = [(w, agent) for w in WINDOWS for agent in ("solo-lead", "solo-lead-local")]
"""Each window on regular activities and on the local-activity fast path (of the parent)."""


@pytest.fixture
def make_sub_worker(env, tmp_path):
    started: list[WorkerProcess] = []

    def make(name: str, window: CrashWindow | None):
        folder = tmp_path / name
        worker = WorkerProcess(
            [AGENTS],
            address=env.client.service_client.config.target_host,
            store_url=f"sqlite:///{folder / 'store.db'}",
            task_queue=f"crash-sub-{name}-{uuid.uuid4().hex[:8]}",
            log_dir=folder / "logs",
            crash_window=window,
            cwd=ROOT,
        )
        started.append(worker)
        return worker, folder / "store.db", folder / "logs"

    yield make
    for worker in started:
        worker.stop()


def _landed(store: SqliteStore, window: CrashWindow, sid: str, child: str, logs) -> None:
    """The store shows the kill where it was meant to land."""
    header, parent = store.load_header(child), store.load_header(sid)
    assert store.tool_result(sid, 3) is None  # the parent's call has no result yet, whatever the window
    if window == CrashWindow.BEFORE_SUBAGENT_START:
        assert header is None and store.run_input(child, "subagent-3") is not None
    elif window == CrashWindow.DURING_TOOL:
        effects = [r["event"] for r in read_records(logs, SIDE_EFFECTS) if r["session"] == child]
        assert header.status == CheckpointStatus.IN_PROGRESS and effects == ["start"]
    else:
        assert header.status == CheckpointStatus.FINISHED and parent.status == CheckpointStatus.IN_PROGRESS


async def _crash_case(env, make, window: CrashWindow, agent: str) -> str:
    worker, store_path, logs = make(f"{window.value}-{agent}", window)
    await worker.start_ready(env.client)
    store = SqliteStore(store_path)
    client = AgentClient(env.client, store, worker.task_queue)
    sid = session_id()
    child = f"{sid}/3"
    handle = await client.start(agent, "Rome", session_id=sid, stream=True)
    assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
    (kill,) = worker.kills()
    assert (kill["window"], kill["session"]) == (
        window.value,
        child if window != CrashWindow.AFTER_SUBAGENT_FINISHED else sid,
    )
    _landed(store, window, sid, child, logs)
    await worker.start_ready(env.client)
    result = await asyncio.wait_for(client.result(sid, handle), 90)
    assert result.finish_reason == FinishReason.STOP and result.text == "Lead done."
    assert worker.alive and len(worker.kills()) == 1

    runs = [w async for w in env.client.list_workflows(f'WorkflowId = "{child}"')]
    assert len(runs) == 1, runs  # exactly one child run
    answers = [json.loads(m.content) for m in result.messages if m.role == Role.TOOL]
    assert answers == [{"result": "Found facts about: Rome", "subagentSessionId": child}]  # exactly one result
    parent = check_guarantees(store.load(sid), logs, logs)
    kid = check_guarantees(store.load(child), logs, logs)
    # no model turn generated again, in either session (two turns each)
    assert (parent.provider_calls, kid.provider_calls) == (2, 2)
    assert parent.regenerated_uncommitted == kid.regenerated_uncommitted == 0
    (call_id,) = kid.executions
    expected = [1, 2] if window == CrashWindow.DURING_TOOL else [1]  # look_up is safe to retry
    assert kid.executions[call_id] == expected
    assert store.run_input(child, "subagent-3") is None  # the child took its task (once)
    assert [m.role for m in store.load(child).messages].count(Role.USER) == 1
    # the streamed parent wrote each event of the call once, whatever the retries, and a reader
    # of its log gets the child's events nested, through the child's end
    logged = [row.event() for row in store.read_events(sid)]
    assert [e.type for e in logged if getattr(e, "position", None) == 3] == [
        "tool-call-started",
        "subagent-started",
        "tool-call-finished",
    ]
    replayed = await asyncio.wait_for(_collect(client.watch(sid)), 60)
    inner = [e.event for e in replayed if isinstance(e, SubAgentEvent) and e.child_session_id == child]
    assert inner and inner[-1].type == "run-finished" and [e.type for e in inner].count("run-started") == 1
    store.close()
    return f"{window.value:26} {agent:16} child runs={len(runs)} look_up={kid.executions[call_id]}"


async def _collect(events) -> list:
    return [event async for event in events]


async def test_every_moment_of_a_subagent_call_survives_a_sigkill(env, make_sub_worker):
    outcomes = await asyncio.gather(
        *(_crash_case(env, make_sub_worker, w, a) for w, a in CASES), return_exceptions=True
    )
    failed = [
        f"{w.value} x {a}: {type(o).__name__}: {o}"
        for (w, a), o in zip(CASES, outcomes)
        if isinstance(o, BaseException)
    ]
    print("\n" + "\n".join(str(o) for o in outcomes if not isinstance(o, BaseException)))
    assert not failed, "\n".join(failed)


async def test_a_worker_killed_while_the_parent_waits_on_a_subagents_approval(env, make_sub_worker):
    """SIGKILL while lead waits on writer's approval, then approve it: a fresh worker carries the
    decision to the writer; publish runs once, each child has one run, no turn is generated twice."""
    worker, store_path, logs = make_sub_worker("relayed-approval", None)
    await worker.start_ready(env.client)
    store = SqliteStore(store_path)
    client = AgentClient(env.client, store, worker.task_queue)
    sid = session_id()
    paused = await asyncio.wait_for(client.send("lead", "Rome", session_id=sid), 60)
    assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
    worker.kill()
    await worker.start_ready(env.client)
    done = await asyncio.wait_for(client.approve(sid, paused.approval_id), 90)
    assert done.finish_reason == FinishReason.STOP and done.text.startswith("Team done: ")
    for child in (f"{sid}/3", f"{sid}/4"):
        assert len([w async for w in env.client.list_workflows(f'WorkflowId = "{child}"')]) == 1
    summaries = [check_guarantees(store.load(each), logs, logs) for each in (sid, f"{sid}/3", f"{sid}/4")]
    assert [s.provider_calls for s in summaries] == [2, 2, 2]
    publish = [r for r in read_records(logs, SIDE_EFFECTS) if r["tool"] == "publish" and r["event"] == "start"]
    assert len(publish) == 1
    store.close()
