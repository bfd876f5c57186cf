"""Agents with hooks for tests/test_hooks.py (imported by worker subprocesses too).

Every hook logs each time it runs to the crash harness's cross-process log
(``hooks``), so a test can count runs across a SIGKILL and a fresh worker.
"""

from __future__ import annotations

from pydantic import BaseModel

from durable_agents import (
    Agent,
    Hooks,
    Message,
    ModelRequest,
    PropagatingToolError,
    Rewrite,
    ScriptedToolCall,
    ScriptedTurn,
    ToolCall,
    ToolContext,
    Veto,
    register_script,
    tool,
)
from durable_agents.testing import CrashWindow, crash_point, side_effect_tool
from durable_agents.testing._core import append_record
from tests.crash_agents import HEARTBEAT

HOOKS_LOG = "hooks.jsonl"
PAYMENTS = {"down": False}


class CityArgs(BaseModel):
    city: str


class AmountArgs(BaseModel):
    amount: int


@tool(safe_to_retry=True, heartbeat_timeout=HEARTBEAT)
async def forecast(args: CityArgs, ctx: ToolContext) -> dict:
    """The forecast for a city."""
    await side_effect_tool("forecast", ctx, safe=True, seconds=0.05, city=args.city)
    return {"city": args.city, "sky": "clear"}


@tool(heartbeat_timeout=HEARTBEAT)
async def charge(args: AmountArgs, ctx: ToolContext) -> dict:
    """Charge a card (at most once)."""
    if PAYMENTS["down"]:
        raise PropagatingToolError("the payment provider is down; retry the run later")
    done = await side_effect_tool("charge", ctx, safe=False, seconds=0.05, amount=args.amount)
    return {**done, "charged": args.amount}


def before_tool(call: ToolCall, ctx: ToolContext):
    append_record(HOOKS_LOG, {"hook": "before_tool", "call": call.id, "session": ctx.session_id})
    crash_point(CrashWindow.DURING_TOOL, ctx.session_id, at="before_tool")
    if call.name == "charge" and call.arguments.get("amount", 0) > 100:
        return Veto({"error": "charges over 100 need a human"})
    if call.name == "forecast" and call.arguments.get("city") == "Rome":
        return Rewrite(arguments={"city": "Roma"})
    return None


async def after_tool(call: ToolCall, result, ctx: ToolContext):
    append_record(HOOKS_LOG, {"hook": "after_tool", "call": call.id, "session": ctx.session_id})
    if call.name == "forecast":
        return Rewrite(result={**result, "checked_by": "after_tool"})
    return None


def before_model(request: ModelRequest):
    append_record(HOOKS_LOG, {"hook": "before_model", "step": request.step, "session": request.session_id})
    return request.model_copy(update={"messages": [*request.messages, Message.user("(be brief)")]})


def after_model(turn: Message):
    append_record(HOOKS_LOG, {"hook": "after_model"})
    if turn.content and not turn.tool_calls:
        return turn.model_copy(update={"content": turn.content + " [reviewed]"})
    return None


def _reply(messages: list[Message]) -> ScriptedTurn:
    turns = sum(1 for m in messages if m.role == "assistant")
    brief = messages[-1].content == "(be brief)"  # what before_model added reaches the model
    if turns == 0:
        return ScriptedTurn(
            text="Working.",
            tool_calls=[
                ScriptedToolCall(name="forecast", arguments={"city": "Rome"}),
                ScriptedToolCall(name="charge", arguments={"amount": 500}),
                ScriptedToolCall(name="charge", arguments={"amount": 20}),
            ],
        )
    return ScriptedTurn(text="Done, briefly." if brief else "Done.")


register_script("hooked", _reply)
register_script(
    "propagating",
    [ScriptedTurn(tool_calls=[ScriptedToolCall(name="charge", arguments={"amount": 5})]), ScriptedTurn(text="Ok.")],
)

HOOKS = Hooks(before_tool=before_tool, after_tool=after_tool, before_model=before_model, after_model=after_model)
hooked_agent = Agent(
    name="hooked",
    model="scripted:hooked",
    tools=[forecast, charge],
    hooks=HOOKS,
    model_heartbeat_timeout=HEARTBEAT,
    model_timeout=30,
)
propagating_agent = Agent(name="propagating", model="scripted:propagating", tools=[charge])

ALL = [hooked_agent, propagating_agent]
