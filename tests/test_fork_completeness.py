"""Fork through Temporal: a chosen history entry, a result for a later pending call, and the
typed not-found error with its kept steps on the client."""

from __future__ import annotations

import json

import pytest

from durable_agents.checkpoint import CheckpointNotFoundError, FinishReason, Role
from durable_agents.checkpoint.fork import Patch, ToolResultPatch
from tests import agents
from tests.conftest import session_id


def _entry(store, sid: str, step: int, messages: int) -> int:
    """The number `durable-agents history` gives the entry of ``step`` with ``messages`` messages."""
    return next(
        n for n, e in enumerate(store.history(sid), 1) if e.step == step and len(e.checkpoint.messages) == messages
    )


async def test_kept_steps_arrive_on_the_client_through_temporal(run_worker):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        with pytest.raises(CheckpointNotFoundError) as err:
            await client.fork(sid, 42)
    assert err.value.kept_steps == [0, 1, 2, 3] and err.value.session_id == sid
    assert err.value.code == "CHECKPOINT_NOT_FOUND"


async def test_a_wrong_entry_is_refused_through_temporal_with_the_kept_steps(run_worker):
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        with pytest.raises(CheckpointNotFoundError, match="entry 1 is a checkpoint of step 3, not step 1") as err:
            await client.fork(sid, 1, entry=1)
    assert err.value.kept_steps == [0, 1, 2, 3]


async def test_fork_of_a_chosen_entry_with_a_result_for_the_second_pending_call(run_worker, store):
    """Step 1 has several kept checkpoints; the one before any tool ran is forked, and only the
    second call (Rome) is given a result: the first (Paris) runs on resume, Rome does not."""
    sid = session_id()
    async with run_worker([agents.weather_agent]) as client:
        source = await client.send("booker", "Book a table for 2 tonight", session_id=sid)
        turn = source.messages[2]
        entry = _entry(store, sid, 1, 3)  # the turn asked for Paris and Rome; neither ran
        rome = ToolResultPatch(tool_call_id=turn.tool_calls[1].id, result={"city": "Rome", "sky": "hail", "high_c": 2})
        made = await client.fork(sid, 1, Patch(tool_result=rome), entry=entry)
        assert made.step == 1 and made.entry == entry and made.message_count == 3
        agents.CALL_LOG.clear()
        forked = await client.resume(made.session_id)
    assert forked.finish_reason == FinishReason.STOP
    assert [(n, a) for n, _, a in agents.CALL_LOG][:1] == [("get_weather", {"city": "Paris"})]
    assert ("get_weather", {"city": "Rome"}) not in [(n, a) for n, _, a in agents.CALL_LOG]
    results = [m for m in store.load(made.session_id).messages if m.role == Role.TOOL]
    assert [m.tool_call_id for m in results[:2]] == [c.id for c in turn.tool_calls]  # one each, in call order
    assert json.loads(results[1].content)["sky"] == "hail"


async def test_a_gated_call_whose_result_a_fork_recorded_is_not_gated_again(run_worker, store):
    """A fork gives the second charge its result: on resume only the first charge waits for a human."""
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)  # weather, charge 10, charge 20
        turn = store.load(sid).messages[1]
        entry = _entry(store, sid, 1, 2)  # right after the model turn: no call has run
        patch = Patch(tool_result=ToolResultPatch(tool_call_id=turn.tool_calls[2].id, result={"charged": 0}))
        made = await client.fork(sid, 1, patch, entry=entry)
        await client.cancel(sid)
        agents.CALL_LOG.clear()
        first = await client.resume(made.session_id)
        assert first.finish_reason == "awaiting-approval" and first.approval_id != paused.approval_id
        assert (await client.pending_approval(made.session_id)).arguments == {"amount": 10}
        done = await client.approve(made.session_id, first.approval_id)
    assert done.finish_reason == FinishReason.STOP  # no second pause for the charge that has a result
    assert [(n, a) for n, _, a in agents.CALL_LOG] == [
        ("get_weather", {"city": "Rome"}),
        ("charge_card", {"amount": 10}),
    ]
    results = [json.loads(m.content) for m in store.load(made.session_id).messages if m.role == Role.TOOL]
    assert results[2] == {"charged": 0}
