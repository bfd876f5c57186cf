"""Input queued behind pending tool calls lives in the checkpoint until it is appended."""

from __future__ import annotations

from durable_agents import FinishReason, Patch
from tests import agents
from tests.conftest import session_id


async def test_queued_input_survives_the_run_closing_at_a_gated_call(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)  # weather done, charge 10 gated
        # the newest save of step 1 is the pause: its two charges are pending in the fork
        fork = await client.fork(sid, from_step=1, patch=Patch(append_input="Also book a taxi."))
        await client.cancel(sid)
        assert store.load(fork.session_id).pending_input[0].content == "Also book a taxi."
        again = await client.resume(fork.session_id)  # the gated calls pause the fork too
        assert again.finish_reason == FinishReason.AWAITING_APPROVAL
        assert store.load(fork.session_id).pending_input[0].content == "Also book a taxi."  # still stored
        await client.temporal.get_workflow_handle(fork.session_id).terminate("operator cleanup")
        nxt = await client.approve(fork.session_id, again.approval_id)
        done = await client.approve(fork.session_id, nxt.approval_id)
    assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
    assert done.finish_reason == FinishReason.STOP
    texts = [(m.role, m.content) for m in done.messages]
    assert ("user", "Also book a taxi.") in texts
    last_tool = max(i for i, m in enumerate(done.messages) if m.role == "tool")
    assert texts.index(("user", "Also book a taxi.")) == last_tool + 1  # right after the turn's results
    assert store.load(fork.session_id).pending_input is None
