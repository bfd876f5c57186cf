"""Agents for ``capacity.py``, in its process and in the worker processes it starts
(``durable-agents worker --agent _capacity_agents:AGENTS``), configured by environment:

  CAPACITY_MODEL_SECONDS  the model's latency (default 1)
  CAPACITY_STEPS          tool steps per run (then a last turn; default 4)
  CAPACITY_HEARTBEAT      Agent(model_heartbeat_timeout=…) (default: the default)
  CAPACITY_CALLS          a file that gets one byte per model call, from every process
"""

from __future__ import annotations

import asyncio
import os

from _agents import LIMIT, InstantModel, noop

from durable_agents import Agent, ModelRequest, ModelResponse, register_provider

MODES = ("local", "regular", "auto")
SECONDS = float(os.environ.get("CAPACITY_MODEL_SECONDS", "1"))
LIMIT["steps"] = int(os.environ.get("CAPACITY_STEPS", "4"))
HEARTBEAT = {"model_heartbeat_timeout": float(h)} if (h := os.environ.get("CAPACITY_HEARTBEAT")) else {}


def model_calls() -> int:
    """Model calls so far, in every process (more than stored turns: a live call was asked again)."""
    path = os.environ.get("CAPACITY_CALLS")
    return os.path.getsize(path) if path and os.path.exists(path) else 0


class SecondModel(InstantModel):
    """``second:`` — the bench's instant model after CAPACITY_MODEL_SECONDS of waiting (a provider's latency)."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        if path := os.environ.get("CAPACITY_CALLS"):
            with open(path, "ab") as f:  # noqa: ASYNC230 (one byte, appended: safe across processes)
                f.write(b".")
        await asyncio.sleep(SECONDS)
        return await super().generate(request)


register_provider("second", SecondModel)

AGENTS = [
    Agent(name=f"cap-{m}", model="second:m", tools=[noop], max_steps=1000, activities=m, **HEARTBEAT) for m in MODES
]
