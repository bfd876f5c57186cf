"""``Agent(activities=…)``: which steps run as local activities, and the workflow task
timeout that notices a worker dying inside one."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from temporalio import client as client_interceptors
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents import Agent, AgentClient
from durable_agents.activities.contracts import EXECUTE_TOOL, MODEL_TURN
from durable_agents.checkpoint import FinishReason
from durable_agents.errors import ConfigurationError
from tests import agents
from tests.activity_kinds import scheduled
from tests.conftest import session_id

LONG_BOOK = dataclasses.replace(agents.book_table, timeout_seconds=600.0)
"""``book_table`` declared long (over the 300 s up to which ``auto`` keeps a tool local)."""


def _agent(name: str, activities: str) -> Agent:
    return dataclasses.replace(
        agents.weather_agent, name=name, tools=[agents.get_weather, LONG_BOOK], activities=activities
    )


async def _scheduled(client, workflow_id: str) -> tuple[list[str], list[str]]:
    """The activity types a run scheduled as regular activities, and as local ones (their markers)."""
    found = await scheduled(client, workflow_id)
    return found.regular, found.local


async def test_auto_runs_model_turns_store_steps_and_short_tools_locally_a_long_tool_as_a_regular_activity(
    run_worker, env
):
    regular_sid, auto_sid, local_sid = session_id(), session_id(), session_id()
    async with run_worker([_agent("m-regular", "regular"), _agent("m-auto", "auto"), _agent("m-local", "local")]) as c:
        results = {
            sid: await c.send(name, "Book a table for 2 tonight", session_id=sid)
            for sid, name in ((regular_sid, "m-regular"), (auto_sid, "m-auto"), (local_sid, "m-local"))
        }
    shapes = {sid: [(m.role, m.content) for m in r.messages] for sid, r in results.items()}
    assert shapes[auto_sid] == shapes[regular_sid] == shapes[local_sid]  # the same run whatever the mode
    assert all(r.finish_reason == FinishReason.STOP for r in results.values())

    regular, local = await _scheduled(env.client, regular_sid)
    assert not local and regular.count(MODEL_TURN) == 3 and regular.count(EXECUTE_TOOL) == 3
    regular, local = await _scheduled(env.client, auto_sid)
    assert regular.count(EXECUTE_TOOL) == 1  # book_table, declared 600 s: pending in the UI, heartbeats
    # the two get_weather calls ran in their steps' model turns (one local activity a step)
    assert local.count(MODEL_TURN) == 3 and EXECUTE_TOOL not in local
    assert MODEL_TURN not in regular and len(regular) == 2  # begin_run (before the run knows its mode) + the tool
    regular, local = await _scheduled(env.client, local_sid)
    assert len(regular) == 1 and local.count(MODEL_TURN) == 3  # every step but begin_run
    assert EXECUTE_TOOL not in local  # each turn's calls ran in it

    configs = {sid: c.store.load(sid).run_config for sid in results}
    assert configs[auto_sid].activities == "auto" and not configs[auto_sid].local_activities
    assert configs[local_sid].local_activities and configs[local_sid].activities is None  # as before `activities`
    assert configs[regular_sid].activity_mode == "regular" and configs[regular_sid].activities is None


async def test_a_clients_workflow_task_timeout_holds_for_its_runs_and_their_sub_agents(
    run_worker, env, store, task_queue
):
    """A worker that dies inside a local activity is noticed when the run's workflow task
    times out: Temporal's 10 s unless the client says otherwise, for a sub-agent's run too
    (a child workflow would get Temporal's default, not its parent's)."""
    from tests import subagent_agents as sub

    plain, quick = session_id(), session_id()
    async with run_worker([sub.solo_lead]) as client:
        assert (await client.send("solo-lead", "Look into Paris.", session_id=plain)).finish_reason == FinishReason.STOP
        fast = AgentClient(env.client, store, task_queue, workflow_task_timeout=timedelta(seconds=4))
        assert (await fast.send("solo-lead", "Look into Rome.", session_id=quick)).finish_reason == FinishReason.STOP
    for parent, seconds in ((plain, 10), (quick, 4)):
        (child,) = [h.session_id for h in store.list_sessions() if h.session_id.startswith(f"{parent}/")]
        for workflow_id in (parent, child):
            described = await env.client.get_workflow_handle(workflow_id).describe()
            assert described.raw_description.execution_config.default_workflow_task_timeout.seconds == seconds


@pytest.mark.unit
def test_activity_modes_are_checked():
    with pytest.raises(ConfigurationError, match="use 'regular', 'local' or 'auto'"):
        Agent(name="a", model="scripted:x", activities="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="disagree"):
        Agent(name="a", model="scripted:x", activities="auto", local_activities=True)
    old = Agent(name="a", model="scripted:x", local_activities=True)
    assert old.activities == "local" and old.run_config().activity_mode == "local"
    assert old.run_config().local_activities  # what a reader from before `activities` understands
    # a copy that names another mode gets it (the old flag does not pull it back to local)
    assert dataclasses.replace(old, activities="regular").run_config().activity_mode == "regular"
    assert dataclasses.replace(old, activities="auto").run_config().activity_mode == "auto"
    auto = Agent(name="a", model="scripted:x", activities="auto").run_config()
    assert auto.runs_locally() and auto.runs_locally(300.0) and not auto.runs_locally(300.5)
    assert not Agent(name="a", model="scripted:x").run_config().runs_locally()


class _FarClient(client_interceptors.Interceptor):
    """A client 0.2 s from the server: its requests arrive that much later."""

    def intercept_client(
        self, next: client_interceptors.OutboundInterceptor
    ) -> client_interceptors.OutboundInterceptor:
        return _Far(next)


class _Far(client_interceptors.OutboundInterceptor):
    async def start_workflow(self, input):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.2)
        return await super().start_workflow(input)

    async def start_workflow_update(self, input):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.2)
        return await super().start_workflow_update(input)

    async def start_update_with_start_workflow(self, input):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.2)
        return await super().start_update_with_start_workflow(input)


async def test_send_asks_for_the_outcome_with_the_start_so_no_workflow_task_runs_for_it_alone(
    run_worker, env, store, task_queue
):
    """``send()`` starts the run and asks for its outcome in one request (update-with-start):
    the run's first workflow task accepts the ``wait_outcome`` update with the start, so a
    local run takes two workflow tasks (the start, then everything after ``begin_run``).
    Asked after the start, the update reached the server after the first workflow task (here
    the client is 0.2 s away): while ``begin_run`` ran it cost a workflow task of its own;
    after a short run it found the run closed, and the client asked again for the result."""
    sid = session_id()
    far = Client(**{**env.client.config(), "interceptors": [_FarClient()]})
    async with run_worker([_agent("m-local", "local")]):
        result = await AgentClient(far, store, task_queue).send("m-local", "Book a table for 2 tonight", session_id=sid)
    assert result.finish_reason == FinishReason.STOP and result.steps == 3
    history = await env.client.get_workflow_handle(sid).fetch_history()
    kinds = [e.event_type for e in history.events]
    assert kinds.count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 2
    assert kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) < kinds.index(
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED  # accepted before begin_run ended: in the first workflow task
    )
