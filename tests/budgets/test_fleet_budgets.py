"""Budgets on a real Temporal dev server, with the official SDKs against the rate-limited fake:
many sessions share one budget, a 429 pauses everyone, fair shares, a wait is visible."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agents.activities import budget_wait
from durable_agents.checkpoint.format import FinishReason
from durable_agents.providers.budgets import Budget, FairShare
from durable_agents.workflows import budget_waits
from tests.budgets.agents import BUDGETED, agent

MODEL = "anthropic:claude-fake"


def sid(prefix: str = "s") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def until(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = await check() if asyncio.iscoroutinefunction(check) else check()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.slow
async def test_200_sessions_share_a_budget_without_429s_and_use_it(rate_limited, run_worker):
    """200 sessions (two model calls each) against limits that admit about 24 calls per window:
    with the budget declared, a handful of 429s at most, and at least 90 % of the input-token
    limit used while they wait for it."""
    window, tokens = 4.0, 6_000
    fake = rate_limited(input_tokens_per_window=tokens, requests_per_window=1000, window=window)
    budget = Budget(MODEL, input_tokens_per_minute=tokens, requests_per_minute=1000, window_seconds=window)
    async with run_worker([BUDGETED], budgets=[budget]) as client:
        results = await asyncio.gather(*[client.send("budgeted", f"go {i}", session_id=sid()) for i in range(200)])
    assert [r.finish_reason for r in results] == [FinishReason.STOP] * 200
    assert len(fake.refused) <= 3, f"{len(fake.refused)} requests refused with 429"
    start, end = fake.admitted[0].at, fake.admitted[-1].at
    used = fake.tokens_per_window(start, end)
    for k in range(int((end - start) // window) + 1):
        print(k, sum(a.input_tokens for a in fake.admitted if start + k * window <= a.at < start + (k + 1) * window))
    print("calls", len(fake.admitted), "avg tokens", sum(a.input_tokens for a in fake.admitted) / len(fake.admitted))
    assert len(fake.admitted) == 400
    assert used >= 0.9 * tokens, f"{used:.0f} input tokens a window of {tokens} allowed"


async def test_without_a_budget_the_same_fleet_is_refused(rate_limited, run_worker):
    """The comparison (and the proof the fake enforces its limits): no budget, 429s."""
    fake = rate_limited(requests_per_window=5, window=4.0, tool_turns=0)
    async with run_worker([BUDGETED]) as client:
        await asyncio.gather(
            *[client.send("budgeted", f"go {i}", session_id=sid()) for i in range(40)], return_exceptions=True
        )
    assert len(fake.refused) > 10, f"only {len(fake.refused)} 429s"


async def test_a_429_pauses_the_budget_for_every_session_and_its_call_goes_first(rate_limited, run_worker):
    fake = rate_limited(requests_per_window=1000, window=60.0, tool_turns=0)
    fake.overload(1, retry_after=3)
    budget = Budget(MODEL, requests_per_minute=1000)
    async with run_worker([BUDGETED], budgets=[budget]) as client:
        first = sid("first")
        started = [await client.start("budgeted", first, session_id=first)]
        await until(lambda: fake.refused, "the first call's 529")
        refused_at = fake.refused[0][0]
        others = [sid("other") for _ in range(5)]
        started += [await client.start("budgeted", s, session_id=s) for s in others]
        for handle in started:
            await handle.result()
    assert len(fake.refused) == 1
    assert fake.admitted[0].tag == first  # the call that got it goes first
    assert all(a.at >= refused_at + 3 - 0.05 for a in fake.admitted), "a call was sent during the pause"
    assert {a.tag for a in fake.admitted} == {first, *others}


async def test_one_tenants_burst_does_not_starve_another(rate_limited, run_worker, env):
    """150 sessions of tenant A wait for a budget of 5 calls a second when 5 of tenant B start:
    each B call waits for its share (about one A call per B call ahead of it), not behind A's queue."""
    per_window = 5
    fake = rate_limited(requests_per_window=per_window, window=1.0, tool_turns=0)
    budget = Budget(MODEL, requests_per_minute=per_window, window_seconds=1.0)
    share = FairShare(key=lambda call: call.session_id.split("-")[0])
    a_ids = [sid("tenantA") for _ in range(150)]
    b_ids = [sid("tenantB") for _ in range(5)]
    async with run_worker([BUDGETED], budgets=[budget], fair_share=share) as client:
        await asyncio.gather(*[client.start("budgeted", s, session_id=s) for s in a_ids])
        await until(lambda: len(fake.admitted) >= 2 * per_window, "A's calls under way")
        b_handles = await asyncio.gather(*[client.start("budgeted", s, session_id=s) for s in b_ids])
        a_waiting = 150 - sum(1 for a in fake.admitted if a.tag.startswith("tenantA"))  # ahead of B in one queue
        for handle in b_handles:
            await handle.result()
        await asyncio.gather(*[env.client.get_workflow_handle(s).terminate() for s in a_ids], return_exceptions=True)
    ahead = []
    for handle in b_handles:  # A's calls sent while this B call waited (from its activity's start)
        history = await handle.fetch_history()
        started = next(
            e.event_time.ToDatetime().replace(tzinfo=UTC).timestamp()
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and history.events[
                e.activity_task_started_event_attributes.scheduled_event_id - 1
            ].activity_task_scheduled_event_attributes.activity_type.name.endswith("model_turn")
        )
        sent = next(a.at for a in fake.admitted if a.tag == handle.id)
        ahead.append(sum(1 for a in fake.admitted if a.tag.startswith("tenantA") and started < a.at < sent))
    # fair: a few of A's calls per B call ahead of it, where one queue would put B behind A's 50+
    # waiting calls. The bound leaves room for a B call's first wait, which it hands to a timer
    # (a workflow task and a new activity each way: on a loaded 2-core host, seconds of A's calls)
    assert max(ahead) <= 3 * len(b_ids) + 2, f"A's calls sent while each B call waited: {ahead}"
    assert a_waiting >= 50, f"tenant A's queue was short when B came ({a_waiting}): the test shows nothing"
    assert not fake.refused


def budget_events(history) -> tuple[list[str], int, list[str]]:
    """A run's failed activities' types, its timers, and its signals' names."""
    failed = [
        e.activity_task_failed_event_attributes.failure.cause.application_failure_info.type
        or e.activity_task_failed_event_attributes.failure.application_failure_info.type
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    timers = sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED)
    signals = [
        e.workflow_execution_signaled_event_attributes.signal_name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    return failed, timers, signals


async def test_a_waiting_call_shows_in_current_details_and_heartbeats(rate_limited, run_worker):
    """One call a 6 s window, three calls: the second hands its wait to a timer (the run had no
    slack yet), the third waits in its activity: heartbeating, said in the run's Current Details."""
    fake = rate_limited(requests_per_window=100, window=60.0, tool_turns=2)
    budget = Budget(MODEL, requests_per_minute=1, window_seconds=6.0)
    async with run_worker([agent(model_heartbeat_timeout=2.0)], budgets=[budget]) as client:
        session = sid()
        handle = await client.start("budgeted", session, session_id=session)

        async def waiting_in_activity() -> str | None:
            described = await handle.describe()
            pending = described.raw_description.pending_activities
            beat = bool(pending) and pending[0].HasField("last_heartbeat_time")
            meta = await handle.query("__temporal_workflow_metadata")
            text = meta.get("currentDetails", "") if isinstance(meta, dict) else meta.current_details
            return text if beat and "rate-limit budget" in text and "on a timer" not in text else None

        said = await until(waiting_in_activity, "a heartbeating wait in Current Details", timeout=60)
        result = await client.result(session)
        failed, timers, signals = budget_events(await handle.fetch_history())
    assert "waiting for the anthropic:claude-fake rate-limit budget (requests, about" in said
    assert result.finish_reason == FinishReason.STOP
    assert len(fake.admitted) == 3 and not fake.refused
    assert (failed, timers, signals) == (["BudgetWait"], 1, ["budget_wait"])


async def test_a_wait_longer_than_the_attempts_slack_waits_on_a_timer(rate_limited, run_worker, monkeypatch):
    """One call an 8 s window, three calls: the second hands its wait back at once (no slack
    yet); the third waits its slack in its activity, then hands the rest back. Each wait is a
    timer, none a failed attempt of the call: the run ends with every call made once. (The
    slack is 30 s; 3 s here, so that a wait longer than it takes seconds, not minutes, and the
    wait in the activity is said to the run after 1 s of it instead of 2 s.)"""
    monkeypatch.setattr(budget_waits, "BUDGET_WAIT_SLACK_SECONDS", 3.0)
    monkeypatch.setattr(budget_wait, "NOTICE_AFTER_SECONDS", 1.0)
    fake = rate_limited(requests_per_window=100, window=60.0, tool_turns=2)
    budget = Budget(MODEL, requests_per_minute=1, window_seconds=8.0)
    async with run_worker([BUDGETED], budgets=[budget]) as client:
        session = sid()
        result = await client.send("budgeted", session, session_id=session)
        failed, timers, signals = budget_events(await client.temporal.get_workflow_handle(session).fetch_history())
    assert result.finish_reason == FinishReason.STOP
    assert len(fake.admitted) == 3 and not fake.refused
    assert (failed, timers, signals) == (["BudgetWait", "BudgetWait"], 2, ["budget_wait"])
