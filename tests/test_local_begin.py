"""A run whose agent steps locally begins with a local ``begin_run`` when its starter says so
(``AgentRunInput.begin_locally``): begun and its first model turn asked in the run's first
workflow task, with no activity task and no second workflow task between the start and the
model. ``AgentClient`` says so once it has seen a run of the agent step locally; any other
starter (the plain input) gets the regular ``begin_run`` as before."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

from durable_agents import AgentClient
from durable_agents.activities.contracts import BEGIN_RUN, EXECUTE_TOOL, MODEL_TURN
from durable_agents.checkpoint import FinishReason, Role
from durable_agents.client.result import RunResult
from durable_agents.workflows.agent_run import LOCAL_BEGIN_PATCH
from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW, RunSummary
from tests import agents
from tests.activity_kinds import scheduled
from tests.conftest import session_id

LONG_BOOK = dataclasses.replace(agents.book_table, timeout_seconds=600.0)


def _agent(name: str, activities: str):
    return dataclasses.replace(
        agents.weather_agent, name=name, tools=[agents.get_weather, LONG_BOOK], activities=activities
    )


LOCAL, AUTO, REGULAR = _agent("b-local", "local"), _agent("b-auto", "auto"), _agent("b-regular", "regular")
ASK = "Book a table for 2 tonight"


async def _start(client, workflow_id: str, run_id: str | None = None) -> tuple[list[str], list[str], int]:
    """The run's regular activities and local ones (their markers), in order, and how many
    workflow tasks completed before its first model turn was recorded."""
    found = await scheduled(client, workflow_id, run_id)
    assert found.tasks_before_model is not None
    return found.regular, found.local, found.tasks_before_model


def _shape(result: RunResult) -> list[tuple[Role, str | None]]:
    return [(m.role, m.content) for m in result.messages]


async def test_a_local_agents_runs_begin_locally_once_the_client_has_seen_one_step_locally(run_worker, env):
    first, second, third = session_id(), session_id(), session_id()
    async with run_worker([LOCAL, AUTO, REGULAR]) as client:
        results = {sid: await client.send("b-local", ASK, session_id=sid) for sid in (first, second)}
        auto = [await client.send("b-auto", ASK, session_id=session_id()) for _ in range(2)]
        regular = [await client.send("b-regular", ASK, session_id=session_id()) for _ in range(2)]
        # a client that has seen no run of the agent learns it from the session it continues
        fresh = AgentClient(env.client, client.store, client.task_queue)
        again = await fresh.send("b-local", "And tomorrow?", session_id=first)
        new = await fresh.send("b-local", ASK, session_id=third)
    assert all(r.finish_reason == FinishReason.STOP for r in [*results.values(), *auto, *regular, again, new])
    assert _shape(results[first]) == _shape(results[second]) == _shape(new)  # the same run, however it began

    runs = sorted([w async for w in env.client.list_workflows(f'WorkflowId = "{first}"')], key=lambda w: w.start_time)
    assert len(runs) == 2
    # the first run: its client did not know yet, so begin_run was a regular activity
    regular_kinds, local_kinds, tasks = await _start(env.client, first, runs[0].run_id)
    assert regular_kinds == [BEGIN_RUN] and local_kinds[0] == MODEL_TURN and tasks == 2
    # the next: begin_run local, in the first workflow task with the first model turn; so for the
    # continued session's next run (its own earlier run told the fresh client) and the fresh
    # client's next new session
    for sid, run_id in ((second, None), (first, runs[1].run_id), (third, None)):
        regular_kinds, local_kinds, tasks = await _start(env.client, sid, run_id)
        assert regular_kinds == [] and local_kinds[:2] == [BEGIN_RUN, MODEL_TURN] and tasks == 1

    # auto: the model turns and store steps are local, so is its second run's begin_run
    regular_kinds, local_kinds, _ = await _start(env.client, auto[0].session_id)
    assert regular_kinds[0] == BEGIN_RUN and local_kinds[0] == MODEL_TURN
    regular_kinds, local_kinds, tasks = await _start(env.client, auto[1].session_id)
    assert BEGIN_RUN not in regular_kinds and local_kinds[:2] == [BEGIN_RUN, MODEL_TURN] and tasks == 1
    assert EXECUTE_TOOL in regular_kinds  # book_table, declared 600 s, still a regular activity
    # regular: begin_run stays a regular activity (a worker killed inside it is noticed by its heartbeat)
    for result in regular:
        regular_kinds, local_kinds, _ = await _start(env.client, result.session_id)
        assert regular_kinds[:2] == [BEGIN_RUN, MODEL_TURN] and local_kinds == []


async def test_a_run_started_with_the_plain_input_begins_with_a_regular_begin_run(run_worker, env, task_queue):
    """Any other client (the temporal CLI, Node) sends the plain input: begin_run as before; the
    same input with ``beginLocally`` begins locally."""
    plain, told = session_id(), session_id()
    async with run_worker([LOCAL]) as client:
        for sid, extra in ((plain, {}), (told, {"beginLocally": True})):
            handle = await env.client.start_workflow(
                AGENT_RUN_WORKFLOW,
                {"sessionId": sid, "agent": "b-local", "input": [{"role": "user", "content": ASK}], **extra},
                id=sid,
                task_queue=task_queue,
                result_type=RunSummary,
            )
            assert (await client.result(sid, handle)).finish_reason == FinishReason.STOP
    regular_kinds, local_kinds, tasks = await _start(env.client, plain)
    assert regular_kinds == [BEGIN_RUN] and tasks == 2
    regular_kinds, local_kinds, tasks = await _start(env.client, told)
    assert regular_kinds == [] and local_kinds[:2] == [BEGIN_RUN, MODEL_TURN] and tasks == 1


def test_the_recorded_history_of_a_run_begun_locally_is_one():
    """``tests/histories/local_begin_v9.json`` (replayed with the others) holds what its replay
    guards: the patch marker, then ``begin_run`` as a local activity, no activity task."""
    events = json.loads((Path(__file__).parent / "histories" / "local_begin_v9.json").read_text())["events"]
    markers = [
        json.loads(base64.b64decode((m["details"].get("patch-data") or m["details"]["data"])["payloads"][0]["data"]))
        for e in events
        if (m := e.get("markerRecordedEventAttributes"))
    ]
    assert markers[0] == {"id": LOCAL_BEGIN_PATCH, "deprecated": False}
    assert markers[1]["activity_type"] == BEGIN_RUN
    assert not any(e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" for e in events)
