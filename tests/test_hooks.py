"""Hooks around tool calls and model turns, and tools that fail the run on purpose."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path

import pytest

from durable_agents import AgentClient, PropagatingToolError
from durable_agents.checkpoint import CheckpointStatus, FinishReason, Role, SqliteStore
from durable_agents.testing import SIDE_EFFECTS, CrashWindow, WorkerProcess, configured, read_records
from tests import hook_agents
from tests.conftest import session_id

ROOT = Path(__file__).resolve().parents[1]


def hook_runs(logs: Path, sid: str) -> list[dict]:
    return [r for r in read_records(logs, hook_agents.HOOKS_LOG) if r.get("session") in (sid, None)]


def side_effects(logs: Path, sid: str) -> list[tuple[str, str, str]]:
    return [(r["tool"], r["event"], r["tool_call_id"]) for r in read_records(logs, SIDE_EFFECTS) if r["session"] == sid]


def check_transcript(messages) -> None:
    results = {m.tool_call_id: m for m in messages if m.role == Role.TOOL}
    forecast, big, small = next(m for m in messages if m.tool_calls).tool_calls
    assert json.loads(results[forecast.id].content) | {"attempt": 0, "tool_call_id": ""} == {
        "city": "Roma",  # before_tool rewrote the arguments
        "sky": "clear",
        "checked_by": "after_tool",  # after_tool rewrote the result
        "attempt": 0,
        "tool_call_id": "",
    }
    assert results[big.id].is_error and json.loads(results[big.id].content) == {
        "error": "charges over 100 need a human"  # vetoed
    }
    assert json.loads(results[small.id].content)["charged"] == 20
    assert messages[-1].content == "Done, briefly. [reviewed]"  # before_model's note, after_model's mark


async def test_hooks_veto_rewrite_and_see_each_step_once(run_worker, store, tmp_path):
    sid = session_id()
    with configured(log_dir=tmp_path):
        async with run_worker([hook_agents.hooked_agent]) as client:
            result = await client.send("hooked", "Plan the trip.", session_id=sid)
    assert result.finish_reason == FinishReason.STOP
    check_transcript(store.load(sid).messages)
    # the vetoed charge never ran; the others ran once
    assert [(t, e) for t, e, _ in side_effects(tmp_path, sid)] == [
        ("forecast", "start"),
        ("forecast", "end"),
        ("charge", "start"),
        ("charge", "end"),
    ]
    counts = {}
    for r in hook_runs(tmp_path, sid):
        counts[r["hook"]] = counts.get(r["hook"], 0) + 1
    assert counts == {"before_tool": 3, "after_tool": 2, "before_model": 2, "after_model": 2}


def _worker(env, tmp_path: Path, window: CrashWindow) -> tuple[WorkerProcess, SqliteStore]:
    worker = WorkerProcess(
        ["tests.hook_agents:ALL"],
        address=env.client.service_client.config.target_host,
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        task_queue=f"hooks-{uuid.uuid4().hex[:8]}",
        log_dir=tmp_path / "logs",
        crash_window=window,
        cwd=ROOT,
    )
    return worker, SqliteStore(tmp_path / "store.db")


@pytest.mark.parametrize("window", [CrashWindow.DURING_TOOL, CrashWindow.AFTER_LAST_RESULT])
async def test_hooks_survive_a_worker_kill(env, tmp_path, window):
    """DURING_TOOL is armed inside before_tool of the first call: it runs again with the
    step, nothing else twice. AFTER_LAST_RESULT: every call is recorded, so no tool hook
    and no model hook of the recorded turn runs again."""
    worker, store = _worker(env, tmp_path, window)
    sid = session_id()
    try:
        await worker.start_ready(env.client)
        client = AgentClient(env.client, store, worker.task_queue)
        handle = await client.start("hooked", "Plan the trip.", session_id=sid)
        assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
        await worker.start_ready(env.client)
        result = await asyncio.wait_for(client.result(sid, handle), 90)
    finally:
        worker.stop()
    assert result.finish_reason == FinishReason.STOP
    check_transcript(store.load(sid).messages)
    logs = tmp_path / "logs"
    effects = side_effects(logs, sid)
    assert [t for t, e, _ in effects if e == "end"] == ["forecast", "charge"]  # each ran to its end once
    runs = [(r["hook"], r.get("call")) for r in hook_runs(logs, sid)]
    first_call = next(m for m in store.load(sid).messages if m.tool_calls).tool_calls[0].id
    expected_before_tool = 4 if window == CrashWindow.DURING_TOOL else 3
    assert sum(1 for h, _ in runs if h == "before_tool") == expected_before_tool
    if window == CrashWindow.DURING_TOOL:
        assert runs.count(("before_tool", first_call)) == 2  # killed inside it, then once to its end
    assert sum(1 for h, _ in runs if h == "after_tool") == 2
    assert sum(1 for h, _ in runs if h == "before_model") == 2 and sum(1 for h, _ in runs if h == "after_model") == 2


async def test_a_propagating_tool_error_fails_the_run_resumably(run_worker, store, tmp_path):
    sid = session_id()
    hook_agents.PAYMENTS["down"] = True
    try:
        with configured(log_dir=tmp_path):
            async with run_worker([hook_agents.propagating_agent]) as client:
                with pytest.raises(PropagatingToolError) as raised:
                    await client.send("propagating", "Pay.", session_id=sid)
                assert "stopped the run: the payment provider is down" in str(raised.value)
                assert raised.value.session_id == sid and raised.value.code == "PROPAGATING_TOOL_ERROR"
                header = store.load_header(sid)
                assert header.status == CheckpointStatus.IN_PROGRESS
                assert header.last_error.type == "PropagatingToolError"
                assert [m.role for m in store.load(sid).messages] == [Role.USER, Role.ASSISTANT]  # no result
                hook_agents.PAYMENTS["down"] = False
                result = await client.resume(sid)
    finally:
        hook_agents.PAYMENTS["down"] = False
    assert result.text == "Ok."
    charged = [json.loads(m.content) for m in result.messages if m.role == Role.TOOL]
    assert charged[0]["charged"] == 5 and charged[0]["attempt"] == 1  # its start was forgotten: not a durability error
