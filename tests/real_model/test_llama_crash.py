"""A worker subprocess talking to the real llama server is SIGKILLed while a tool
runs (the model's turn is stored); a fresh worker finishes the run without asking
the server for that turn again (counted at the recording proxy)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from durable_agents import AgentClient
from durable_agents.checkpoint import FinishReason, Role, SqliteStore
from durable_agents.testing import SIDE_EFFECTS, WorkerProcess, check_guarantees, read_records
from tests.conftest import session_id
from tests.real_model.conftest import API_KEY
from tests.real_model.proxy import RecordingProxy
from tests.real_model.server import ROOT

pytestmark = pytest.mark.integration

AGENT = "real-crash"


async def _until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


async def test_sigkill_during_a_tool_then_resume_asks_the_model_nothing_twice(env, llama, tmp_path):
    with RecordingProxy(llama.base_url) as wire:
        worker = WorkerProcess(
            ["tests.real_model.agents:CRASH"],
            address=env.client.service_client.config.target_host,
            store_url=f"sqlite:///{tmp_path / 'store.db'}",
            task_queue=f"real-crash-{uuid.uuid4().hex[:8]}",
            log_dir=tmp_path / "logs",
            cwd=ROOT,
            env={"OPENAI_BASE_URL": wire.base_url, "OPENAI_API_KEY": API_KEY},
        )
        store = SqliteStore(tmp_path / "store.db")
        try:
            await worker.start_ready(env.client)
            client = AgentClient(env.client, store, worker.task_queue)
            sid = session_id()
            handle = await client.start(AGENT, "Which city?", session_id=sid)

            def tool_started() -> bool:
                return any(r["event"] == "start" for r in read_records(worker.log_dir, SIDE_EFFECTS))

            await _until(tool_started, 60, f"the tool never started:\n{worker.log()[-3000:]}")
            worker.kill()  # SIGKILL, mid-tool (it takes 3 s in the first step)

            (first,) = wire.chat()
            (call,) = first.response["choices"][0]["message"]["tool_calls"]
            stored = store.load(sid)
            assert [m.role for m in stored.messages] == [Role.SYSTEM, Role.USER, Role.ASSISTANT]
            assert [c.id for c in stored.messages[2].tool_calls] == [call["id"]]

            await worker.start_ready(env.client)
            result = await asyncio.wait_for(client.result(sid, handle), 120)
            saved = store.load(sid)
        finally:
            worker.stop()
            store.close()

    # two model turns in all: the stored one was not asked for again; the second
    # request is the next turn, carrying the stored call and its re-run's result
    assert result.finish_reason == FinishReason.MAX_STEPS
    first, second = wire.chat()
    assert len(first.request["messages"]) == 2 and len(second.request["messages"]) == 4
    assert second.request["messages"][2]["tool_calls"][0]["id"] == call["id"]
    rerun = json.loads(second.request["messages"][3]["content"])
    assert (rerun["tool_call_id"], rerun["attempt"]) == (call["id"], 2)  # safe to retry: run again, same id

    summary = check_guarantees(saved, worker.log_dir, worker.log_dir)
    assert summary.provider_calls == 2 and summary.regenerated_uncommitted == 0
    assert summary.executions[call["id"]] == [1, 2]
