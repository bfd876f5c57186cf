"""The same loop on Pydantic AI's Temporal integration (``pip install '.[bench]'``).

An agent with an instant function model (a ~1 KB turn with one tool call per
step) and a ~1 KB no-op tool, made durable by ``TemporalDurability``: its model
requests and tool calls run as Temporal activities (regular ones: the
integration has no local-activity mode). Importing this module raises
ImportError when ``pydantic-ai-slim[temporal]`` is not installed.
"""

from __future__ import annotations

import json

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow

PAD = "x" * 1000


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A tool call per step until the run's ``steps=N`` prompt is met (counted from the last result)."""
    last = messages[-1]
    n, limit = 0, 0
    for part in last.parts if isinstance(last, ModelRequest) else []:
        if isinstance(part, ToolReturnPart):
            n = json.loads(part.model_response_str())["n"] + 1
    for message in messages[:1]:
        for part in message.parts:
            content = getattr(part, "content", "")
            if isinstance(content, str) and content.startswith("steps="):
                limit = int(content.split("=")[1])
    if n >= limit:
        return ModelResponse(parts=[TextPart(f"done after {n}")])
    return ModelResponse(parts=[TextPart(f"step {n} {PAD}"), ToolCallPart("noop", {"n": n})])


agent = Agent(FunctionModel(scripted), name="pyd-bench", capabilities=[TemporalDurability()])


@agent.tool_plain
async def noop(n: int) -> dict:
    """Returns a ~1 KB result."""
    return {"n": n, "pad": PAD}


@workflow.defn(name="PydanticAIBenchLoop")
class PydanticAIBenchLoop(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, prompt: str) -> int:
        result = await agent.run(prompt)
        return sum(1 for m in result.all_messages() if isinstance(m, ModelResponse))
