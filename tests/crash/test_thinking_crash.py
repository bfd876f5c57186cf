"""Extended-thinking blocks survive a worker SIGKILL byte for byte: the worker dies
right after the thinking tool-use turn is stored, a fresh worker runs the tool and
sends the turn back to the wire-format fake, which refuses (400) a tool turn whose
thinking is missing or altered, as the Anthropic API does."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path

from durable_agents import AgentClient
from durable_agents.checkpoint import FinishReason, OpaquePart, SqliteStore
from durable_agents.testing import CrashWindow, WorkerProcess, check_guarantees
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
PATH = "/v1/messages"


async def test_thinking_blocks_round_trip_through_a_worker_kill(env, tmp_path):
    with FakeLLMServer() as llm:
        hidden = llm.anthropic.thinking.redacted("reasoning the API keeps encrypted")
        llm.anthropic.reply_tool_calls(
            [("safe_work", {"item": 1, "seconds": 0.05}, "toolu_k1")],
            text="Working on it.",
            thinking=["One safe call is enough; then I answer.", hidden],
        )
        llm.anthropic.reply_text("All done.")
        worker = WorkerProcess(
            ["tests.crash_thinking_agents:ALL"],
            address=env.client.service_client.config.target_host,
            store_url=f"sqlite:///{tmp_path / 'store.db'}",
            task_queue=f"crash-thinking-{uuid.uuid4().hex[:8]}",
            log_dir=tmp_path / "logs",
            crash_window=CrashWindow.AFTER_MODEL_TURN_STORED,
            cwd=ROOT,
            env={"ANTHROPIC_BASE_URL": llm.anthropic_base_url, "ANTHROPIC_API_KEY": "test-key"},
        )
        try:
            await worker.start_ready(env.client)
            store = SqliteStore(tmp_path / "store.db")
            client = AgentClient(env.client, store, worker.task_queue)
            sid = session_id()
            handle = await client.start("crash-thinking", "Do one thing, carefully.", session_id=sid)
            assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
            stored_turn = store.load(sid).messages[2]  # as the killed worker stored it
            await worker.start_ready(env.client)
            result = await asyncio.wait_for(client.result(sid, handle), 90)
        finally:
            worker.stop()

        assert result.finish_reason == FinishReason.STOP and result.text == "All done."
        served = llm.replies(PATH)[0]["content"]
        assert len(llm.bodies(PATH)) == 2  # the stored turn was not asked for again
        resent = llm.bodies(PATH)[1]["messages"][1]["content"]
        # byte for byte: the same blocks, the same keys in the same order, the same signatures
        assert json.dumps(resent[:2]) == json.dumps(served[:2])
        assert [b["type"] for b in resent] == ["thinking", "redacted_thinking", "text", "tool_use"]
        assert [p.data for p in stored_turn.parts if isinstance(p, OpaquePart)] == served[:2]
        assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 2048} for b in llm.bodies(PATH))
        summary = check_guarantees(store.load(sid), tmp_path / "logs", tmp_path / "logs")
        assert summary.provider_calls == 2 and summary.regenerated_uncommitted == 0
        store.close()
