"""Sub-agents as child workflows (issue 12, items 1 and 2), on a real Temporal dev server.

``lead`` delegates to ``researcher`` (no approval) and ``writer`` (whose
``publish`` needs one) in one turn: the writer's pause pauses the lead, a
decision given to the lead reaches the writer, and the lead goes on once the
writer's answer is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from temporalio.client import WorkflowExecutionStatus

from durable_agents import Agent, ApprovalNotPendingError, ConfigurationError
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role
from durable_agents.providers import scripted
from durable_agents.testing import SIDE_EFFECTS, check_guarantees, configured, read_records
from tests import subagent_agents as sa
from tests.conftest import session_id


def results(store, sid: str) -> list[dict]:
    return [json.loads(m.content or "null") for m in store.load(sid).messages if m.role == Role.TOOL]


async def runs_of(client, workflow_id: str, expected: int) -> list:
    """The Temporal executions of ``workflow_id`` (visibility catches up within moments)."""
    for _ in range(50):
        found = [w async for w in client.temporal.list_workflows(f'WorkflowId = "{workflow_id}"')]
        if len(found) >= expected:
            return found
        await asyncio.sleep(0.1)
    return found


def executions(log_dir, tool: str) -> list[dict]:
    return [r for r in read_records(log_dir, SIDE_EFFECTS) if r["tool"] == tool and r["event"] == "start"]


def generated_twice(sessions: set[str]) -> list:
    """Model turns generated more than once for one (session, position): never allowed here."""
    counts = Counter((sid, position) for _, sid, position in scripted.calls if sid in sessions)
    return [key for key, n in counts.items() if n > 1]


async def test_the_gated_subagent_pauses_the_parent_and_approving_the_parent_continues_both(
    run_worker, store, tmp_path
):
    sid = session_id()
    research, write = f"{sid}/3", f"{sid}/4"  # <parent>/<the call's result position>
    with configured(log_dir=tmp_path):
        async with run_worker([sa.lead]) as client:
            paused = await asyncio.wait_for(client.send("lead", "Rome", session_id=sid), 60)
            assert paused.finish_reason == FinishReason.AWAITING_APPROVAL

            # the parent's checkpoint waits on the writer's approval, with a snapshot of it
            parent, child = store.load_header(sid), store.load_header(write)
            assert child.status == CheckpointStatus.AWAITING_APPROVAL
            assert parent.status == CheckpointStatus.AWAITING_APPROVAL
            assert paused.approval_id == parent.approval_id == child.approval_id
            snap = parent.subagent_approval
            assert (snap.session_id, snap.agent, snap.approval_id) == (write, "writer", paused.approval_id)
            assert snap.tool_call.name == "publish" and snap.tool_call.arguments == {"text": "Note: a note on Rome"}
            assert snap.remaining_tool_calls == [] and snap.fingerprint == sa.writer.fingerprint()
            assert parent.remaining_tool_calls == []  # write_note is the turn's last call
            # the researcher ran first and its answer is recorded, linked to its session
            assert results(store, sid) == [
                {"result": "Found facts about: facts on Rome", "subagentSessionId": research}
            ]
            for child_id, call in ((research, "call_2_0"), (write, "call_2_1")):
                header = store.load_header(child_id)
                assert (header.parent_session_id, header.parent_tool_call_id) == (sid, call)
                assert header.parent_session_uid == parent.session_uid

            pending = await client.pending_approval(sid)
            assert (pending.session_id, pending.subagent_session_id, pending.subagent_agent) == (sid, write, "writer")
            assert (pending.tool_name, pending.arguments) == ("publish", {"text": "Note: a note on Rome"})
            listed = [p for p in await client.waiting_approvals() if p.approval_id == paused.approval_id]
            assert [(p.session_id, p.subagent_session_id) for p in listed] == [(sid, write)]  # once, both sessions

            done = await asyncio.wait_for(client.approve(sid, paused.approval_id, decided_by="alice"), 60)
            assert done.finish_reason == FinishReason.STOP
            assert results(store, sid)[1] == {"result": "Published.", "subagentSessionId": write}
            assert done.text.startswith("Team done: ")
            with pytest.raises(ApprovalNotPendingError):
                await client.approve(sid, paused.approval_id)

            # one child run each, linked to the parent's; the writer's decision in its own checkpoint
            for child_id in (research, write):
                assert len(await runs_of(client, child_id, 1)) == 1
                description = await client.temporal.get_workflow_handle(child_id).describe()
                assert description.status == WorkflowExecutionStatus.COMPLETED and description.parent_id == sid
            decision = store.load_header(write).decisions[0]
            assert (decision.approval_id, decision.decided_by, decision.tool_name) == (
                paused.approval_id,
                "alice",
                "publish",
            )
            assert [r["tool"] for r in read_records(tmp_path, SIDE_EFFECTS) if r["event"] == "start"] == [
                "look_up",
                "publish",
            ]
            for each in (sid, research, write):
                check_guarantees(store.load(each), tmp_path)
            assert generated_twice({sid, research, write}) == []
            statuses = [e.status for e in store.history(sid)]
            assert CheckpointStatus.AWAITING_APPROVAL in statuses and statuses[0] == CheckpointStatus.FINISHED
            assert store.load_header(sid).subagent_approval is None


async def test_a_subagent_pausing_again_pauses_the_parent_under_the_new_id(run_worker, store, tmp_path):
    sid = session_id()
    with configured(log_dir=tmp_path):
        async with run_worker([sa.lead]) as client:
            first = await asyncio.wait_for(client.send("lead", "Rome again", session_id=sid), 60)
            second = await asyncio.wait_for(client.approve(sid, first.approval_id), 60)
            assert second.finish_reason == FinishReason.AWAITING_APPROVAL and second.approval_id != first.approval_id
            assert store.load_header(sid).approval_id == second.approval_id == store.load_header(f"{sid}/4").approval_id
            assert (await client.pending_approval(sid)).arguments == {"text": "Correction"}
            done = await asyncio.wait_for(client.reject(sid, second.approval_id, note="no corrections"), 60)
            assert done.finish_reason == FinishReason.STOP
            assert results(store, sid)[1] == {"result": "Not published.", "subagentSessionId": f"{sid}/4"}
            writer = results(store, f"{sid}/4")
            assert writer[1] == {"error": "rejected by a human reviewer", "note": "no corrections"}
            assert len(executions(tmp_path, "publish")) == 1  # the rejected one never ran


async def test_deciding_in_the_subagents_session_moves_the_parent_on(run_worker, store):
    sid = session_id()
    async with run_worker([sa.lead]) as client:
        paused = await asyncio.wait_for(client.send("lead", "Oslo", session_id=sid), 60)
        child = await asyncio.wait_for(client.approve(f"{sid}/4", paused.approval_id), 60)
        assert child.finish_reason == FinishReason.STOP and child.session_id == f"{sid}/4"
        done = await asyncio.wait_for(client.outcome(sid), 60)
        assert done.finish_reason == FinishReason.STOP and store.load_header(sid).status == CheckpointStatus.FINISHED
        with pytest.raises(ConfigurationError, match="sub-agent session"):  # its runs are the parent's to start
            await client.send("writer", "more", session_id=f"{sid}/4")


async def test_a_decision_given_after_the_parents_run_closed_reaches_the_subagent(run_worker, store, tmp_path):
    """The parent's run is terminated while the writer waits (Temporal terminates the writer's
    run with it); approving the parent starts its next run, which resumes the writer's session
    with the decision: its pending call runs once, no model turn is generated again."""
    sid = session_id()
    write = f"{sid}/4"
    with configured(log_dir=tmp_path):
        async with run_worker([sa.lead]) as client:
            paused = await asyncio.wait_for(client.send("lead", "Lima", session_id=sid), 60)
            await client.temporal.get_workflow_handle(sid).terminate("an operator closed it")
            for _ in range(50):  # the parent close policy terminates the child's run
                if (
                    await client.temporal.get_workflow_handle(write).describe()
                ).status != WorkflowExecutionStatus.RUNNING:
                    break
                await asyncio.sleep(0.1)
            assert store.load_header(sid).approval_id == paused.approval_id
            # deciding in the child's session goes through its parent's next run
            done = await asyncio.wait_for(client.approve(write, paused.approval_id), 60)
            assert (done.session_id, done.finish_reason) == (sid, FinishReason.STOP)
            assert results(store, sid)[1] == {"result": "Published.", "subagentSessionId": write}
            assert len(executions(tmp_path, "publish")) == 1
            assert len(await runs_of(client, write, 2)) == 2  # the terminated run, and the one that resumed it
            assert len(await runs_of(client, f"{sid}/3", 1)) == 1  # the finished researcher is not run again
            assert generated_twice({sid, f"{sid}/3", write}) == []
            for each in (sid, f"{sid}/3", write):
                check_guarantees(store.load(each), tmp_path)


async def test_cancelling_the_parent_cancels_the_subagent_and_its_calls(run_worker, store, tmp_path):
    sid = session_id()
    child = f"{sid}/3"
    with configured(log_dir=tmp_path):
        async with run_worker([sa.slow_lead]) as client:
            await client.start("slow-lead", "go", session_id=sid)
            for _ in range(200):
                if executions(tmp_path, "slow_once"):
                    break
                await asyncio.sleep(0.05)
            aborted = await asyncio.wait_for(client.cancel(sid), 60)
            assert aborted.finish_reason == FinishReason.ABORTED
            assert results(store, child) == [{"error": "cancelled"}]  # the child's call
            assert results(store, sid) == [{"error": "cancelled"}]  # and the parent's call
            assert store.load_header(child).finish_reason == FinishReason.ABORTED
            assert (
                await client.temporal.get_workflow_handle(child).describe()
            ).status == WorkflowExecutionStatus.COMPLETED

            # interrupt=True: the same, then the new input continues the parent
            other = session_id()
            await client.start("slow-lead", "go", session_id=other)
            for _ in range(200):
                if any(r["session"] == f"{other}/3" for r in executions(tmp_path, "slow_once")):
                    break
                await asyncio.sleep(0.05)
            changed = await asyncio.wait_for(
                client.send("slow-lead", "Stop; do something else.", session_id=other, interrupt=True), 60
            )
            assert changed.finish_reason == FinishReason.STOP and changed.text == "Changed course."
            assert results(store, f"{other}/3") == [{"error": "cancelled"}]
            for each in (sid, child, other, f"{other}/3"):
                check_guarantees(store.load(each), tmp_path)


async def test_a_subagent_with_subagents_relays_its_childs_pause_up(run_worker, store):
    sid = session_id()
    lead, write = f"{sid}/3", f"{sid}/3/4"
    async with run_worker([sa.chief]) as client:
        paused = await asyncio.wait_for(client.send("chief", "Kyoto", session_id=sid), 60)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        top = store.load_header(sid)
        assert top.approval_id == store.load_header(lead).approval_id == store.load_header(write).approval_id
        assert (top.subagent_approval.session_id, top.subagent_approval.subagent_approval.session_id) == (lead, write)
        assert top.subagent_approval.innermost().tool_call.name == "publish"
        pending = await client.pending_approval(sid)
        assert (pending.session_id, pending.subagent_session_id, pending.tool_name) == (sid, write, "publish")
        listed = [p for p in await client.waiting_approvals() if p.approval_id == paused.approval_id]
        assert [(p.session_id, p.subagent_session_id) for p in listed] == [(sid, write)]
        done = await asyncio.wait_for(client.approve(sid, paused.approval_id), 60)
        assert done.finish_reason == FinishReason.STOP and done.text == "Chief done."
        assert json.loads(store.load(lead).messages[-2].content)["result"] == "Published."


async def test_the_local_activity_path_runs_subagents_too(run_worker, store):
    sid = session_id()
    async with run_worker([sa.local_lead]) as client:
        paused = await asyncio.wait_for(client.send("local-lead", "Rome", session_id=sid), 60)
        done = await asyncio.wait_for(client.approve(sid, paused.approval_id), 60)
        assert done.finish_reason == FinishReason.STOP
        assert [r["subagentSessionId"] for r in results(store, sid)] == [f"{sid}/3", f"{sid}/4"]


async def test_bad_subagent_arguments_get_a_validation_error_and_no_child(run_worker, store):
    scripted.register_script(
        "bad-lead",
        [
            scripted.ScriptedTurn(tool_calls=[scripted.ScriptedToolCall(name="researcher", arguments={"topic": 1})]),
            scripted.ScriptedTurn(text="Fixed."),
        ],
    )
    bad = Agent(name="bad-lead", model="scripted:bad-lead", subagents=[sa.researcher])
    sid = session_id()
    async with run_worker([bad]) as client:
        done = await asyncio.wait_for(client.send("bad-lead", "go", session_id=sid), 60)
        assert done.finish_reason == FinishReason.STOP
        (result,) = results(store, sid)
        assert result["error"] == "invalid arguments for researcher" and result["details"][0]["loc"] == ["task"]
        assert store.load_header(f"{sid}/2") is None and await runs_of(client, f"{sid}/2", 0) == []


async def test_the_depth_limit_holds_at_run_time(run_worker, store):
    """Checked when agents are built; the run checks it again (an agent changed after)."""
    chief = Agent(name="shallow-chief", model="scripted:chief", subagents=[sa.lead], max_subagent_depth=2)
    chief.max_subagent_depth = 1  # after construction: only the run can tell
    sid = session_id()
    async with run_worker([chief]) as client:
        done = await asyncio.wait_for(client.send("shallow-chief", "Lima", session_id=sid), 60)
        assert done.finish_reason == FinishReason.STOP
        lead_results = results(store, f"{sid}/2")  # (this chief has no instructions: no system message)
        assert [r.get("kind") for r in lead_results] == ["subagent-depth-limit", "subagent-depth-limit"]


async def test_outcome_after_a_signalled_decision_is_the_next_pause_not_the_old_one(run_worker):
    """(Found while relaying sub-agent decisions; top-level runs had it too.) A decision sent
    as a signal, then ``outcome()``: the old pause was returned again, as if undecided."""
    from durable_agents import ApprovalDecision
    from tests import agents

    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await asyncio.wait_for(client.send("payments", "Charge me twice", session_id=sid), 60)
        handle = client.temporal.get_workflow_handle(sid)
        await handle.signal("approve", ApprovalDecision(approval_id=paused.approval_id, approved=True))
        following = await asyncio.wait_for(client.outcome(sid), 60)
        assert following.finish_reason == FinishReason.AWAITING_APPROVAL
        assert following.approval_id not in (None, paused.approval_id)


async def test_two_gated_subagents_at_once_are_shown_one_after_the_other(run_worker, store, tmp_path):
    """With tool_concurrency=2 both writers pause; the parent waits on one approval at a time."""
    sid = session_id()
    with configured(log_dir=tmp_path):
        async with run_worker([sa.pair_lead]) as client:
            first = await asyncio.wait_for(client.send("pair-lead", "go", session_id=sid), 60)
            waiting = {store.load_header(f"{sid}/{p}").approval_id for p in (3, 4)}
            assert first.approval_id in waiting and None not in waiting  # both children wait
            second = await asyncio.wait_for(client.approve(sid, first.approval_id), 60)
            assert second.finish_reason == FinishReason.AWAITING_APPROVAL
            assert {first.approval_id, second.approval_id} == waiting
            done = await asyncio.wait_for(client.approve(sid, second.approval_id), 60)
            assert done.finish_reason == FinishReason.STOP
            assert [r["result"] for r in results(store, sid)] == ["Published.", "Published."]
            assert len(executions(tmp_path, "publish")) == 2


async def test_a_failed_subagent_fails_the_parent_and_resuming_the_parent_resumes_it(run_worker, store):
    """The child's failure (here: its model's script is missing) fails the parent with the
    same typed error, naming the sub-agent; both checkpoints stay resumable, and resuming the
    parent resumes the child's session (a second run of it) without generating a turn again."""
    from durable_agents import ConfigurationError as Configuration

    name = f"helper-script-{session_id()}"
    scripted.register_script(
        "flaky-lead",
        lambda ms: (
            scripted.ScriptedTurn(text="Recovered.")
            if any(m.role == Role.TOOL for m in ms)
            else scripted.ScriptedTurn(tool_calls=[scripted.ScriptedToolCall(name="helper", arguments={"task": "x"})])
        ),
    )
    helper = Agent(name="helper", model=f"scripted:{name}")
    lead = Agent(name="flaky-lead", model="scripted:flaky-lead", subagents=[helper])
    sid = session_id()
    child = f"{sid}/2"
    async with run_worker([lead]) as client:
        with pytest.raises(Configuration, match=rf"sub-agent helper \(session {child}\) failed: no script named"):
            await asyncio.wait_for(client.send("flaky-lead", "go", session_id=sid), 60)
        parent = store.load_header(sid)
        assert parent.status == CheckpointStatus.IN_PROGRESS and "sub-agent helper" in parent.last_error.message
        assert store.load_header(child).last_error is not None
        scripted.register_script(name, [scripted.ScriptedTurn(text="Helped.")])
        done = await asyncio.wait_for(client.resume(sid), 60)
        assert done.finish_reason == FinishReason.STOP and done.text == "Recovered."
        assert results(store, sid) == [{"result": "Helped.", "subagentSessionId": child}]
        assert len(await runs_of(client, child, 2)) == 2
        assert generated_twice({sid, child}) == []


async def test_a_terminated_parent_terminates_its_running_subagent_and_its_next_run_resumes_it(
    run_worker, store, tmp_path
):
    """Terminated (not cancelled, not crashed) while its sub-agent's at-most-once tool runs: the
    parent close policy terminates the sub-agent's run too. Resuming the parent starts its next
    run, which re-attaches to the sub-agent's session in a second run of it: its stored turn is
    not generated again, its started tool is not run again (a durability error result, as after
    a crash), and both finish."""
    sid = session_id()
    child = f"{sid}/3"
    with configured(log_dir=tmp_path):
        async with run_worker([sa.slow_lead]) as client:
            await client.start("slow-lead", "go", session_id=sid)
            for _ in range(200):
                if executions(tmp_path, "slow_once"):
                    break
                await asyncio.sleep(0.05)
            assert executions(tmp_path, "slow_once")
            await client.temporal.get_workflow_handle(sid).terminate("an operator closed it")
            for _ in range(100):
                if (await client.temporal.get_workflow_handle(child).describe()).status != (
                    WorkflowExecutionStatus.RUNNING
                ):
                    break
                await asyncio.sleep(0.1)
            described = await client.temporal.get_workflow_handle(child).describe()
            assert described.status == WorkflowExecutionStatus.TERMINATED
            # the running tool learns that its run is gone at its next heartbeat (at most 1 s on):
            # what it leaves behind then (no result: it was not aborted) is what the next run finds
            await asyncio.sleep(1.5)
            assert store.load_header(child).status == CheckpointStatus.IN_PROGRESS  # resumable, not aborted
            assert results(store, child) == []

            done = await asyncio.wait_for(client.resume(sid), 60)
            assert done.finish_reason == FinishReason.STOP and done.text == "Slow done."
            [outcome] = results(store, child)
            assert outcome["kind"] == "tool-durability-error" and outcome["toolName"] == "slow_once"
            assert results(store, sid) == [{"result": "Slow work done.", "subagentSessionId": child}]
            assert len(executions(tmp_path, "slow_once")) == 1  # never fired twice
            assert len(await runs_of(client, child, 2)) == 2  # the terminated run, and the one that resumed it
            assert generated_twice({sid, child}) == []
            for each in (sid, child):
                check_guarantees(store.load(each), tmp_path)
