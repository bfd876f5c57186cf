"""A resume uses what the run started with: its saved model, its usage so far,
and (for a fork) the rest of the source's max_steps budget."""

from __future__ import annotations

from durable_agents import Agent, FinishReason, Message, ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.checkpoint import Role
from durable_agents.providers import scripted
from tests import agents
from tests.conftest import session_id


def _charge_after_each_user_message(messages: list[Message]) -> ScriptedTurn:
    if messages[-1].role == Role.USER:
        return ScriptedTurn(tool_calls=[ScriptedToolCall(name="charge_card", arguments={"amount": 5})])
    return ScriptedTurn(text="Charged.")


register_script("charge-per-message", _charge_after_each_user_message)
register_script("charge-per-message-alt", _charge_after_each_user_message)
charger = Agent(name="charger", model="scripted:charge-per-message", tools=[agents.charge_card])


async def test_a_resume_after_the_run_closed_keeps_the_runs_own_model(run_worker, store):
    sid = session_id()
    async with run_worker([charger]) as client:
        paused = await client.send("charger", "Charge me", session_id=sid, model="scripted:charge-per-message-alt")
        await client.temporal.get_workflow_handle(sid).terminate("operator cleanup")
        done = await client.approve(sid, paused.approval_id)
    assert done.finish_reason == FinishReason.STOP
    assert done.drift is None  # nothing changed: the run's model is the saved one
    models = [model for model, session, _ in scripted.calls if session == sid]
    assert models == ["charge-per-message-alt", "charge-per-message-alt"]
    assert store.load(sid).run_config.model == "scripted:charge-per-message-alt"


async def test_a_resumed_runs_usage_counts_from_its_own_start(run_worker):
    sid = session_id()
    async with run_worker([charger]) as client:
        first = await client.send("charger", "Charge me", session_id=sid)
        first = await client.approve(sid, first.approval_id)
        assert (first.steps, first.usage.requests) == (2, 2)
        second = await client.send("charger", "Again", session_id=sid)
        await client.temporal.get_workflow_handle(sid).terminate("operator cleanup")
        second = await client.approve(sid, second.approval_id)
    assert second.finish_reason == FinishReason.STOP
    assert (second.steps, second.usage.requests) == (2, 2)  # this run's, not the session's


async def test_a_fork_has_only_the_rest_of_the_sources_budget(run_worker, store):
    sid = session_id()
    async with run_worker([agents.looping_agent]) as client:  # max_steps=4
        source = await client.send("looper", "Loop", session_id=sid)
        assert source.finish_reason == FinishReason.MAX_STEPS and store.load(sid).step_index == 4
        fork = await client.fork(sid, from_step=2)
        resumed = await client.resume(fork.session_id)
    assert resumed.finish_reason == FinishReason.MAX_STEPS
    assert store.load(fork.session_id).step_index == 4  # 2 steps of the source's, then the 2 left


async def test_approvals_read_from_the_store_say_when_they_time_out(run_worker):
    sid = session_id()
    async with run_worker([agents.wire_agent]) as client:  # approval_timeout=86_400
        paused = await client.send("wire", "Wire it", session_id=sid)
        live = await client.pending_approval(sid)
        [stored] = [p for p in client.pending_approvals() if p.session_id == sid]
        await client.cancel(sid)
    assert stored.approval_id == live.approval_id == paused.approval_id
    assert stored.timeout_at is not None and live.timeout_at is not None
    assert abs((stored.timeout_at - stored.requested_at).total_seconds() - 86_400) < 1
    assert abs((stored.timeout_at - live.timeout_at).total_seconds()) < 5
