"""Fork through Temporal, resume the fork, compare it with its source."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agents.activities.contracts import FORK_SESSION
from durable_agents.checkpoint import CheckpointNotFoundError, FinishReason
from durable_agents.checkpoint.compare import compare_trajectories
from durable_agents.checkpoint.fork import Patch, ToolResultPatch
from durable_agents.workflows import FORK_WORKFLOW
from tests import agents
from tests.conftest import session_id


async def test_a_fork_with_a_patched_result_diverges_where_expected(run_worker, store, env):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        source = await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        first_turn = source.messages[2]
        # what if it had rained in Rome? (step 1: after the first turn's results)
        patch = Patch(
            tool_result=ToolResultPatch(
                tool_call_id=first_turn.tool_calls[1].id, result={"city": "Rome", "sky": "rain", "high_c": 9}
            )
        )
        made = await client.fork(sid, 1, patch)
        assert made.session_id == f"{sid}.fork-1" and made.step == 1
        forked = await client.resume(made.session_id)
    assert forked.finish_reason == FinishReason.STOP
    comparison = compare_trajectories(store.load(sid), store.load(made.session_id))
    assert comparison.diverged_at == 1  # the first step's tool results differ
    assert comparison.drift.step_count is None and not comparison.drift.tool_order
    assert store.load(sid).messages == source.messages  # the source is unchanged
    # the fork went through Temporal: its workflow and activity are in the server's history
    runs = [w async for w in env.client.list_workflows(f'WorkflowType = "{FORK_WORKFLOW}"')]
    assert any(w.id.startswith(f"fork-{sid}-") for w in runs)
    run = next(w for w in runs if w.id.startswith(f"fork-{sid}-"))
    history = await env.client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == [FORK_SESSION]


async def test_forking_a_step_that_is_not_kept_lists_the_kept_steps(run_worker):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        with pytest.raises(CheckpointNotFoundError, match="keeps steps 0, 1, 2, 3"):
            await client.fork(sid, 42)
