"""Agents for ``capacity.py``, in its process and in the worker processes it starts
(``durable-agents worker --agent _capacity_agents:AGENTS``), configured by environment:

  CAPACITY_MODEL_SECONDS  the model's latency (default 1)
  CAPACITY_STEPS          tool steps per run (then a last turn; default 4)
  CAPACITY_HEARTBEAT      Agent(model_heartbeat_timeout=…) (default: the default)
  CAPACITY_CALLS          a file that gets a line per model call (session, when it was asked), from every process
"""

from __future__ import annotations

import asyncio
import os
import time

from _agents import LIMIT, InstantModel, noop

from durable_agents.agent.agent import Agent
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.registry import register_provider

MODES = ("local", "regular", "auto")
SECONDS = float(os.environ.get("CAPACITY_MODEL_SECONDS", "1"))
LIMIT["steps"] = int(os.environ.get("CAPACITY_STEPS", "4"))
HEARTBEAT = {"model_heartbeat_timeout": float(h)} if (h := os.environ.get("CAPACITY_HEARTBEAT")) else {}


def model_call_starts() -> list[tuple[str, float]]:
    """Every model call so far, in every process: (session id, ``time.time()`` when asked)."""
    path = os.environ.get("CAPACITY_CALLS")
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [(sid, float(at)) for sid, at in (line.split() for line in f)]


def model_calls() -> int:
    """Model calls so far, in every process (more than stored turns: a live call was asked again)."""
    return len(model_call_starts())


class SecondModel(InstantModel):
    """``second:`` — the bench's instant model after CAPACITY_MODEL_SECONDS of waiting (a provider's latency)."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        if path := os.environ.get("CAPACITY_CALLS"):
            with open(path, "a") as f:  # noqa: ASYNC230 (one short line, appended: safe across processes)
                f.write(f"{request.session_id} {time.time():.6f}\n")
        await asyncio.sleep(SECONDS)
        return await super().generate(request)


register_provider("second", SecondModel)

AGENTS = [
    Agent(name=f"cap-{m}", model="second:m", tools=[noop], max_steps=1000, activities=m, **HEARTBEAT) for m in MODES
]
