"""Search attributes mean one thing: ``AgentStatus`` is the checkpoint status,
``AgentFinishReason`` how the run ended; a closed run never looks like it waits."""

from __future__ import annotations

import asyncio

from durable_agents import FinishReason
from tests import agents
from tests.conftest import session_id


async def _found(env, query: str, expect: list[str]) -> list[str]:
    """Workflow ids matching ``query``, polled until they equal ``expect`` (visibility lags)."""
    found: list[str] = []
    for _ in range(100):
        found = sorted({w.id async for w in env.client.list_workflows(query)})
        if found == sorted(expect):
            break
        await asyncio.sleep(0.1)
    return found


async def test_status_is_the_checkpoint_status_and_the_finish_reason_has_its_own(run_worker, env):
    done, aborted = session_id(), session_id()
    async with run_worker([agents.weather_agent, agents.slow_agent]) as client:
        result = await client.send("booker", "Book a table for 2 tonight", session_id=done)
        assert result.finish_reason == FinishReason.STOP
        await client.start("slow", "Take your time", session_id=aborted)
        await asyncio.sleep(1.0)
        assert (await client.cancel(aborted)).finish_reason == FinishReason.ABORTED
    ids = f'WorkflowId IN ("{done}", "{aborted}")'
    assert await _found(env, f'AgentStatus = "finished" AND {ids}', [done]) == [done]
    assert await _found(env, f'AgentFinishReason = "stop" AND {ids}', [done]) == [done]
    # an aborted run's checkpoint is in-progress (it resumes); the reason says it was aborted
    assert await _found(env, f'AgentStatus = "in-progress" AND {ids}', [aborted]) == [aborted]
    assert await _found(env, f'AgentFinishReason = "aborted" AND {ids}', [aborted]) == [aborted]


async def _executions(env, query: str, count: int) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for _ in range(100):
        found = sorted({(w.id, w.run_id) async for w in env.client.list_workflows(query)})
        if len(found) == count:
            break
        await asyncio.sleep(0.1)
    return found


async def test_the_waiting_for_a_human_query_finds_exactly_the_runs_that_wait(run_worker, env):
    """README's query: the terminated run of a session that was approved later is not waiting."""
    stale, waiting = session_id(), session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=stale)
        await client.temporal.get_workflow_handle(stale).terminate("operator cleanup")
        again = await client.approve(stale, paused.approval_id)  # a new run; it pauses on the next charge
        assert again.finish_reason == FinishReason.AWAITING_APPROVAL
        await client.send("payments", "Charge me", session_id=waiting)
        ids = f'WorkflowId IN ("{stale}", "{waiting}")'
        # the terminated execution still carries its last upsert: that is why the query needs the filter
        assert len(await _executions(env, f'AgentStatus = "awaiting-approval" AND {ids}', 3)) == 3
        query = f'AgentStatus = "awaiting-approval" AND ExecutionStatus = "Running" AND {ids}'
        live = sorted([(s, (await client.temporal.get_workflow_handle(s).describe()).run_id) for s in (stale, waiting)])
        assert await _executions(env, query, 2) == live
        for sid in (stale, waiting):
            await client.cancel(sid)
        assert await _executions(env, query, 0) == []
