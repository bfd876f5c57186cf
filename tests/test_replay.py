"""Replay recorded runs against a changed agent (issue 32): 20 sessions recorded with the
scripted model and tools that count their side effects, then replayed against the same
agent (every trajectory identical, no side effect), a changed instruction and a removed
tool (the report names the sessions and the step each diverged at), from a dataset file
with the store gone (the same report), and a batch of forks."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET

import pytest

from durable_agents import Agent, ToolContext, tool
from durable_agents.checkpoint import CheckpointStatus, SqliteStore
from durable_agents.checkpoint.dataset import DatasetRecordings, read_dataset
from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError
from durable_agents.checkpoint.fork import Patch
from durable_agents.client.client import AgentClient
from durable_agents.replay import ReplayPolicy, fork_batch, replay
from tests.replay_agents import EFFECTS_ENV, Refund, effects, lookup, support, support_no_refund, support_strict

SESSIONS = 20
LATE = [i for i in range(SESSIONS) if i % 3 == 0]  # lookup says late: the recorded run refunded


@pytest.fixture
def effects_log(tmp_path, monkeypatch):
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv(EFFECTS_ENV, str(path))
    return str(path)


@pytest.fixture
async def recorded(run_worker, effects_log):
    """20 recorded sessions of `support` (rec-0 … rec-19), then the worker is gone."""
    async with run_worker([support]) as client:
        await asyncio.gather(
            *(client.send("support", f"Where is order {i}?", session_id=f"rec-{i}") for i in range(SESSIONS))
        )
    names = [f"rec-{i}" for i in range(SESSIONS)]
    tools = [e for e in effects(effects_log) if e["kind"] == "tool"]
    assert len([e for e in tools if e["tool"] == "refund"]) == len(LATE)
    return names


def tool_runs(path: str) -> list[dict]:
    return [e for e in effects(path) if e["kind"] == "tool"]


async def test_replay_against_the_same_agent_is_identical_and_runs_no_tool(
    env, store, task_queue, recorded, effects_log
):
    before = len(tool_runs(effects_log))
    client = AgentClient(env.client, store, task_queue)
    report = await replay(client, recorded, against=support, tag="same", concurrency=6)
    assert (report.total, report.identical, report.same_tools, report.failed) == (SESSIONS, SESSIONS, SESSIONS, 0)
    assert report.over(0) is None
    assert len(tool_runs(effects_log)) == before  # every call answered from the recording
    for name in recorded:
        source, again = store.load(name), store.load(f"{name}.replay-same")
        assert again is not None and again.agent == "support"
        assert [m.content for m in again.messages if m.role != "system"] == [
            m.content for m in source.messages if m.role != "system"
        ]
    assert report.tokens_before == report.tokens_after


async def test_a_changed_instruction_is_reported_where_each_session_diverged(
    env, store, task_queue, recorded, effects_log
):
    before = len(tool_runs(effects_log))
    client = AgentClient(env.client, store, task_queue)
    report = await replay(client, recorded, against=support_strict, tag="strict")
    changed = {s.source_session_id: s for s in report.sessions if s.changed}
    assert set(changed) == {f"rec-{i}" for i in LATE}
    assert {s.diverged_at for s in changed.values()} == {2}  # the turn that refunded
    assert all(s.answer_changed and s.drift.step_count and s.drift.step_count.b == 2 for s in changed.values())
    assert report.sessions[0].changed  # worst first
    assert report.identical == SESSIONS - len(LATE)
    assert report.over(len(LATE)) is None and report.over(len(LATE) - 1) is not None
    assert report.over("40%") is None and report.over("30%") is not None
    assert len(tool_runs(effects_log)) == before
    junit = ET.fromstring(report.junit_xml())
    failed = [c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None]
    assert sorted(failed) == sorted(changed)


async def test_a_removed_tool_diverges_and_never_runs_the_side_effect(env, store, task_queue, recorded, effects_log):
    before = len(tool_runs(effects_log))
    client = AgentClient(env.client, store, task_queue)
    report = await replay(
        client, recorded, against=support_no_refund, tag="norefund", policy=ReplayPolicy(unrecorded="live")
    )
    changed = {s.source_session_id: s for s in report.sessions if s.changed}
    assert set(changed) == {f"rec-{i}" for i in LATE}
    assert {s.diverged_at for s in changed.values()} == {2}
    assert all(s.same_tools for s in changed.values())  # it asked for the same tools; one is gone
    assert all("refund failed" in (s.answer_after or "") for s in changed.values())
    assert len(tool_runs(effects_log)) == before


async def test_unrecorded_calls_follow_the_policy(env, store, task_queue, recorded, effects_log):
    """`position` matching against changed arguments: nothing matches, so the call gets an
    error result (default), runs live only when safe_to_retry or named, or gets a stub."""

    def other_order(call, recorded_calls, earlier):  # a user policy: never matches
        return None

    client = AgentClient(env.client, store, task_queue)
    before = len(tool_runs(effects_log))
    errors = await replay(client, ["rec-3"], against=support, tag="err", policy=ReplayPolicy(match=other_order))
    assert errors.sessions[0].changed and errors.sessions[0].diverged_at == 1
    assert len(tool_runs(effects_log)) == before
    live = await replay(
        client, ["rec-3"], against=support, tag="live", policy=ReplayPolicy(match=other_order, unrecorded="live")
    )
    # lookup is safe_to_retry: it ran; refund is not and was not named: it did not
    ran = [e["tool"] for e in tool_runs(effects_log)[before:]]
    assert ran == ["lookup"] and live.sessions[0].diverged_at == 2
    named = await replay(
        client, ["rec-3"], against=support, tag="named",
        policy=ReplayPolicy(match=other_order, unrecorded="live", live_tools=["refund"]),
    )  # fmt: skip
    assert [e["tool"] for e in tool_runs(effects_log)[before:]] == ["lookup", "lookup", "refund"]
    assert named.sessions[0].status == "identical"

    def stub(call, ctx):
        return {"order": call.arguments["order"], "status": "shipped"} if call.name == "lookup" else {}

    stubbed = await replay(
        client, ["rec-3"], against=support, tag="stub", policy=ReplayPolicy(match=other_order, unrecorded=stub)
    )
    assert stubbed.sessions[0].answer_after == "Order 3 is shipped."
    assert [e["tool"] for e in tool_runs(effects_log)[before:]] == ["lookup", "lookup", "refund"]


async def test_export_delete_the_store_and_replay_from_the_file(env, tmp_path, store, task_queue, recorded):
    client = AgentClient(env.client, store, task_queue)
    from_store = await replay(client, recorded, against=support_strict, tag="fromstore")
    dataset = tmp_path / "runs.jsonl"

    def redact(checkpoint):  # e.g. mask the customer's words; the replay sends what is kept
        return checkpoint

    assert client.export(recorded, str(dataset), redact=redact) == SESSIONS
    store.close()
    (tmp_path / "store.db").unlink()
    fresh = SqliteStore(tmp_path / "other.db")
    try:
        other = AgentClient(env.client, fresh, task_queue)
        recordings = DatasetRecordings(dataset)
        from_file = await replay(other, None, against=support_strict, recordings=recordings, tag="fromfile")
    finally:
        fresh.close()

    def rows(report):
        return sorted(
            (s.source_session_id, s.status, s.diverged_at, s.steps_before, s.steps_after, s.answer_after)
            for s in report.sessions
        )

    assert rows(from_file) == rows(from_store)
    assert (from_file.identical, from_file.diverged) == (from_store.identical, from_store.diverged)


def test_a_malformed_dataset_line_is_refused_naming_it(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"sessionId": "a", "messages": []}\n{"sessionId": \n')
    with pytest.raises(ConfigurationError, match="line 2: malformed JSON"):
        read_dataset(path)
    path.write_text('{"messages": []}\n')
    with pytest.raises(ConfigurationError, match="line 1: not a checkpoint"):
        read_dataset(path)


async def test_an_unknown_session_is_refused_before_anything_starts(env, store, task_queue, recorded):
    client = AgentClient(env.client, store, task_queue)
    with pytest.raises(CheckpointNotFoundError, match="nope"):
        await replay(client, [recorded[0], "nope"], against=support, tag="unknown")
    assert store.load_header(f"{recorded[0]}.replay-unknown") is None


async def test_a_fork_batch_with_a_patch_reports_each_fork_against_its_source(run_worker, recorded, store):
    async with run_worker([support]) as client:
        report = await fork_batch(
            client, recorded[:4], from_step=2, patch=Patch(append_input="And order 7?"), tag="more"
        )
    assert report.total == 4 and report.identical == 0
    assert all(s.diverged_at == 3 for s in report.sessions if s.source_session_id != "rec-0")
    fork = store.load("rec-1.fork-more")
    assert fork is not None and fork.messages[-1].content == "Order 7 is shipped."
    assert json.loads(report.model_dump_json())["total"] == 4


async def test_assert_replay_passes_on_the_same_agent_and_fails_naming_the_changed_sessions(
    env, tmp_path, store, task_queue, recorded
):
    from durable_agents.testing import assert_replay

    dataset = tmp_path / "fixture.jsonl"
    AgentClient(env.client, store, task_queue).export(recorded[:6], str(dataset))
    report = await assert_replay(env.client, dataset, against=support)
    assert report.identical == 6
    with pytest.raises(AssertionError, match=r"2 of 6 replayed sessions changed") as failed:
        await assert_replay(env.client, dataset, against=support_strict)
    assert "rec-0" in str(failed.value) and "rec-3" in str(failed.value) and "rec-1 " not in str(failed.value)
    await assert_replay(env.client, dataset, against=support_strict, max_changed="34%")


async def test_a_replay_from_a_step_starts_from_the_sources_first_steps(env, store, task_queue, recorded, effects_log):
    client = AgentClient(env.client, store, task_queue)
    late = [f"rec-{i}" for i in LATE[:3]]
    same = await replay(client, late, against=support, from_step=1, tag="step1")
    assert (same.identical, same.total) == (3, 3)
    strict = await replay(client, late, against=support_strict, from_step=1, tag="step1strict")
    assert [(s.status, s.diverged_at) for s in strict.sessions] == [("diverged", 2)] * 3
    again = store.load(f"{late[0]}.replay-step1strict")
    assert again.messages[:4] == store.load(late[0]).messages[:4]  # the source's step 1, as recorded
    assert again.messages[-1].content == "Order 0 is late; I cannot refund it."
    with pytest.raises(ConfigurationError, match="fewer than 9 steps"):
        await replay(client, late, against=support, from_step=9, tag="toofar")


async def test_the_batch_workflows_history_replays_deterministically_and_stays_small(env, store, task_queue, recorded):
    from temporalio.worker import Replayer

    from durable_agents.plugin import DurableAgentsPlugin
    from durable_agents.workflows.replay import ReplayBatchWorkflow

    client = AgentClient(env.client, store, task_queue)
    await replay(client, recorded[:5], against=support_strict, tag="history", concurrency=2)
    history = await env.client.get_workflow_handle("replay-batch-history").fetch_history()
    # ≈ 10 events a session: a batch of MAX_BATCH_SESSIONS stays far below Temporal's 51,200
    assert len(history.events) <= 12 * 5 + 10
    replayer = Replayer(workflows=[ReplayBatchWorkflow], plugins=[DurableAgentsPlugin()])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None


async def test_the_recorded_model_replays_the_sources_turns(env, store, task_queue, recorded, effects_log):
    """`recorded:turns` answers with the source's turns: a changed instruction changes nothing,
    a removed tool changes the result of the call the source made to it."""
    from durable_agents.replay import RECORDED_MODEL

    client = AgentClient(env.client, store, task_queue)
    models_before = len([e for e in effects(effects_log) if e["kind"] == "model"])
    three = [f"rec-{i}" for i in (0, 1, 3)]
    strict = await replay(client, three, against=support_strict, model=RECORDED_MODEL, tag="recmodel")
    assert strict.identical == 3 and strict.tokens_after == 0
    gone = await replay(client, three, against=support_no_refund, model=RECORDED_MODEL, tag="recgone")
    assert sorted((s.source_session_id, s.diverged_at) for s in gone.sessions if s.changed) == [
        ("rec-0", 2), ("rec-3", 2)
    ]  # fmt: skip
    assert len([e for e in effects(effects_log) if e["kind"] == "model"]) == models_before  # no scripted turn


@tool(name="refund", needs_approval=True)
async def refund_once_approved(args: Refund, ctx: ToolContext) -> dict:
    """Refund an order, once a person approved it."""
    return {"refunded": args.amount, "order": args.order}


support_approving = Agent(
    name="support",
    model="scripted:replay-support",
    instructions="Help customers.",
    tools=[lookup, refund_once_approved],
)
"""The recorded agent, its refunds decided by a person."""


async def test_the_reports_time_is_the_runs_own_without_its_wait_for_approval(run_worker, env, store, task_queue):
    """A source run that waited for a person: the report's time before is the run's own
    working time (from each save to the next), not the wait for the decision."""
    async with run_worker([support_approving]) as client:
        paused = await client.send("support", "Where is order 3?", session_id="waited")  # late: a refund to approve
        assert paused.finish_reason == "awaiting-approval"
        await asyncio.sleep(0.5)  # the person takes their time
        done = await client.approve("waited", paused.approval_id)
    assert done.finish_reason == "stop"
    saves = sorted(store.history("waited"), key=lambda e: e.saved_at)
    (pause,) = [i for i, e in enumerate(saves) if e.status == CheckpointStatus.AWAITING_APPROVAL]
    waited = (saves[pause + 1].saved_at - saves[pause].saved_at).total_seconds()
    span = (saves[-1].saved_at - saves[0].saved_at).total_seconds()
    assert waited >= 0.5

    report = await replay(AgentClient(env.client, store, task_queue), ["waited"], against=support, tag="waited")
    (row,) = report.sessions
    assert row.seconds_before == pytest.approx(span - waited)
    assert report.seconds_before == row.seconds_before and row.seconds_after is not None
    assert "\nrun time (s, approval waits left out): " in report.table()


def test_working_time_leaves_out_approval_waits_and_the_time_between_runs():
    from datetime import UTC, datetime, timedelta

    from durable_agents.checkpoint.format import Checkpoint, HistoryEntry, RunError
    from durable_agents.checkpoint.replay_report import working_seconds

    start = datetime(2026, 1, 1, tzinfo=UTC)

    def save(second: float, status: CheckpointStatus, failed: bool = False) -> HistoryEntry:
        error = RunError(type="ModelProviderError", message="refused") if failed else None
        checkpoint = Checkpoint(session_id="s", status=status, last_error=error)
        return HistoryEntry(step=0, saved_at=start + timedelta(seconds=second), status=status, checkpoint=checkpoint)

    run, paused, finished = CheckpointStatus.IN_PROGRESS, CheckpointStatus.AWAITING_APPROVAL, CheckpointStatus.FINISHED
    saves = [
        save(0, run), save(1, paused),  # 1 s of work, then a person decides for an hour
        save(3601, run), save(3603, finished),  # 2 s more to the run's end
        save(7200, run), save(7204, run, failed=True),  # a run a day later: 4 s, then it fails
        save(9000, run), save(9001, finished),  # its resume: 1 s
    ]  # fmt: skip
    assert working_seconds(reversed(saves)) == 1 + 2 + 4 + 1  # newest first, as history() gives them
    assert working_seconds(saves[:1]) is None
