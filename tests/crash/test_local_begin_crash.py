"""A run begun locally (``beginLocally``: ``begin_run`` a local activity, in the run's first
workflow task with the first model turn) killed between its begin and its first model turn's
result, or right after that turn is stored: no workflow task completed, so the fresh worker
runs ``begin_run`` again from the start. The input is stored once, the stored turn is not
asked again (no model turn paid twice), each tool call runs as its durability class says."""

from __future__ import annotations

import asyncio
import signal

from durable_agents import AgentClient
from durable_agents.activities.contracts import BEGIN_RUN, MODEL_TURN
from durable_agents.checkpoint import FinishReason, Role, SqliteStore
from durable_agents.testing import CrashWindow, check_guarantees, infer_window
from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW, RunSummary
from tests.activity_kinds import scheduled
from tests.conftest import session_id

SHAPE = [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT]
CASES = [
    (window, agent)
    for window in (CrashWindow.AFTER_INPUT_STORED, CrashWindow.AFTER_MODEL_TURN_STORED)
    for agent in ("crash-once-local", "crash-safe-local", "crash-once-auto")
]


async def _local_kinds(client, workflow_id: str) -> tuple[list[str], list[str]]:
    found = await scheduled(client, workflow_id)
    return found.regular, found.local


async def _case(env, make_worker, window: CrashWindow, agent: str) -> None:
    worker, store_path, logs = make_worker(f"begin-{window.value}-{agent}", window)
    await worker.start_ready(env.client)
    store = SqliteStore(store_path)
    client = AgentClient(env.client, store, worker.task_queue)
    sid = session_id()
    handle = await env.client.start_workflow(
        AGENT_RUN_WORKFLOW,
        {
            "sessionId": sid,
            "agent": agent,
            "input": [{"role": "user", "content": "Do the two things."}],
            "beginLocally": True,
        },
        id=sid,
        task_queue=worker.task_queue,
        result_type=RunSummary,
    )
    assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
    assert [(k["window"], k["session"]) for k in worker.kills()] == [(window.value, sid)]
    assert infer_window(store, sid, logs, worker.pid) == window.value
    await worker.start_ready(env.client)
    result = await asyncio.wait_for(client.result(sid, handle), 90)
    assert result.finish_reason == FinishReason.STOP and result.text == "Both done."
    assert [m.role for m in result.messages] == SHAPE  # the input once, the stored turn once
    assert worker.alive and len(worker.kills()) == 1

    summary = check_guarantees(store.load(sid), logs, logs)
    first, second = (c.id for c in result.messages[2].tool_calls)
    assert summary.provider_calls == 2 and summary.regenerated_uncommitted == 0  # no turn asked twice
    assert summary.executions[first] == [1] and summary.executions[second] == [1]  # no call lost: none again
    assert not summary.durability_errors

    regular, local = await _local_kinds(env.client, sid)
    assert BEGIN_RUN not in regular and local[0] == BEGIN_RUN  # it began locally (after the kill: again)
    # after a kill past the stored turn the begin finds it: its calls run next, only the last turn is asked
    assert local.count(MODEL_TURN) == (2 if window == CrashWindow.AFTER_INPUT_STORED else 1)
    store.close()


async def test_a_run_begun_locally_and_killed_before_its_first_workflow_task_completed(env, make_worker):
    limit = asyncio.Semaphore(6)

    async def one(window: CrashWindow, agent: str) -> None:
        async with limit:
            await _case(env, make_worker, window, agent)

    outcomes = await asyncio.gather(*(one(w, a) for w, a in CASES), return_exceptions=True)
    failed = [
        f"{w.value} x {a}: {type(o).__name__}: {o}"
        for (w, a), o in zip(CASES, outcomes, strict=True)
        if isinstance(o, BaseException)
    ]
    assert not failed, "\n".join(failed)
