"""Agents for ``recovery.py``: a model turn and a tool that each take SLOW seconds
and log when they start (pid, session, time) to ``$RECOVERY_LOG``."""

from __future__ import annotations

import asyncio
import json
import os
import time

from pydantic import BaseModel

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import Message, Role, ToolCall, Usage
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.registry import register_provider

SLOW = float(os.environ.get("RECOVERY_SLOW", "3"))
HEARTBEAT = float(os.environ["RECOVERY_HEARTBEAT"]) if os.environ.get("RECOVERY_HEARTBEAT") else None
"""Both heartbeat timeouts (the model call's and the tool's); unset: the defaults."""
TOOL_OPTIONS = {"heartbeat_timeout": HEARTBEAT} if HEARTBEAT else {}
AGENT_OPTIONS = {"model_heartbeat_timeout": HEARTBEAT} if HEARTBEAT else {}


def log(event: str, session_id: str) -> None:
    line = json.dumps({"event": event, "session": session_id, "pid": os.getpid(), "t": time.time()})
    with open(os.environ["RECOVERY_LOG"], "a") as f:
        f.write(line + "\n")


class Nothing(BaseModel):
    pass


@tool(safe_to_retry=True, **TOOL_OPTIONS)
async def slow_tool(args: Nothing, ctx: ToolContext) -> dict:
    """Takes SLOW seconds."""
    log("tool", ctx.session_id)
    await asyncio.sleep(SLOW)
    return {"ok": True}


class SlowModel:
    """``slow:`` — one tool call, then a final answer; every turn takes SLOW seconds."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        log("model", request.session_id)
        await asyncio.sleep(SLOW)
        done = request.messages[-1].role == Role.TOOL
        calls = None if done else [ToolCall(id=f"call_{request.step}", name="slow_tool", arguments={})]
        return ModelResponse(
            message=Message(role=Role.ASSISTANT, content="done" if done else "calling", tool_calls=calls),
            usage=Usage(input_tokens=1, output_tokens=1, requests=1),
            stop_reason="end_turn" if done else "tool_use",
        )


register_provider("slow", SlowModel)

AGENTS = [
    Agent(name="recovery-regular", model="slow:m", tools=[slow_tool], **AGENT_OPTIONS),
    Agent(name="recovery-local", model="slow:m", tools=[slow_tool], local_activities=True, **AGENT_OPTIONS),
]
