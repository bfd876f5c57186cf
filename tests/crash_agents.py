"""Agents and tools for the crash tests (imported by worker subprocesses too).

Every tool logs its side effects to the crash harness's cross-process log
(``durable_agents.testing``): ``start`` and ``end`` with the call id and attempt.
Heartbeat timeouts are short so a killed worker is noticed within ~2 s.
"""

from __future__ import annotations

import dataclasses
import hashlib

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from durable_agents.checkpoint.format import Message, Role
from durable_agents.testing import side_effect_tool

HEARTBEAT = 2.0  # seconds; the SDK sends heartbeats every 0.8 x this, so keep some slack


class WorkArgs(BaseModel):
    item: int
    seconds: float = 0.05


@tool(safe_to_retry=True, heartbeat_timeout=HEARTBEAT, timeout=60)
async def safe_work(args: WorkArgs, ctx: ToolContext) -> dict:
    """A read-like tool: safe to run again after a crash (keyed by tool_call_id)."""
    return await side_effect_tool("safe_work", ctx, safe=True, seconds=args.seconds, item=args.item)


@tool(heartbeat_timeout=HEARTBEAT, timeout=60)
async def once_work(args: WorkArgs, ctx: ToolContext) -> dict:
    """A side effect: at most once; a lost result becomes a durability error."""
    return await side_effect_tool("once_work", ctx, safe=False, seconds=args.seconds, item=args.item)


@tool(needs_approval=True, heartbeat_timeout=HEARTBEAT, timeout=60)
async def gated_work(args: WorkArgs, ctx: ToolContext) -> dict:
    """A side effect behind a human's approval: at most once."""
    return await side_effect_tool("gated_work", ctx, safe=False, seconds=args.seconds, item=args.item)


def _two_calls(name: str, seconds: float = 0.3) -> list[ScriptedTurn]:
    return [
        ScriptedTurn(
            text=f"Two {name} calls.",
            tool_calls=[
                ScriptedToolCall(name=name, arguments={"item": 1, "seconds": seconds}),
                ScriptedToolCall(name=name, arguments={"item": 2, "seconds": seconds}),
            ],
        ),
        ScriptedTurn(text="Both done."),
    ]


register_script("crash-safe", _two_calls("safe_work"))
register_script(
    "crash-gated",
    [
        ScriptedTurn(
            text="One side effect, approved first.",
            tool_calls=[ScriptedToolCall(name="gated_work", arguments={"item": 1, "seconds": 0.3})],
        ),
        ScriptedTurn(text="Approved and done."),
    ],
)
register_script("crash-once", _two_calls("once_work"))
register_script(
    "crash-slow",
    [
        ScriptedTurn(
            text="A slow call, then a side effect.",
            tool_calls=[
                ScriptedToolCall(name="safe_work", arguments={"item": 1, "seconds": 4.0}),
                ScriptedToolCall(name="once_work", arguments={"item": 2, "seconds": 0.1}),
            ],
        ),
        ScriptedTurn(text="Both done."),
    ],
)
register_script(
    "crash-abort",
    lambda messages: (
        ScriptedTurn(text="Noted, changing course.")
        if any(m.role == Role.USER and m.content == "Stop that; do something else." for m in messages)
        else ScriptedTurn(
            text="A very slow side effect.",
            tool_calls=[ScriptedToolCall(name="once_work", arguments={"item": 1, "seconds": 60})],
        )
    ),
)

SOAK_STEPS = 8


def soak_turn(messages: list[Message]) -> ScriptedTurn:
    """SOAK_STEPS turns of 1-3 calls (safe and at-most-once mixed, 100-600 ms each),
    derived from the session's first input and the turn's position: deterministic."""
    turns = sum(m.role == Role.ASSISTANT for m in messages)
    if turns >= SOAK_STEPS:
        return ScriptedTurn(text=f"Finished after {turns} turns.")
    seed = next((m.content or "" for m in messages if m.role == Role.USER), "")
    digest = hashlib.sha256(f"{seed}/{len(messages)}".encode()).digest()
    calls = [
        ScriptedToolCall(
            name="safe_work" if digest[1 + i] % 2 else "once_work",
            arguments={"item": i, "seconds": 0.1 + digest[5 + i] / 255 * 0.5},
        )
        for i in range(1 + digest[0] % 3)
    ]
    return ScriptedTurn(text=f"Turn {turns + 1}.", tool_calls=calls)


register_script("crash-soak", soak_turn)


def _agent(name: str, script: str, **kwargs) -> Agent:
    kwargs.setdefault("tools", [safe_work, once_work, gated_work])
    return Agent(
        name=name,
        model=f"scripted:{script}",
        instructions=f"Crash-test agent {name}.",
        model_heartbeat_timeout=HEARTBEAT,
        model_timeout=30,
        **kwargs,
    )


safe_agent = _agent("crash-safe", "crash-safe")
once_agent = _agent("crash-once", "crash-once")
slow_agent = _agent("crash-slow", "crash-slow")
gated_agent = _agent("crash-gated", "crash-gated")
abort_agent = _agent("crash-abort", "crash-abort")
soak_agent = _agent("crash-soak", "crash-soak", max_steps=SOAK_STEPS + 2)
# the local-activity fast path: steps re-run (instead of resuming) after a crash
safe_local_agent = _agent("crash-safe-local", "crash-safe", local_activities=True)
once_local_agent = _agent("crash-once-local", "crash-once", local_activities=True)
soak_local_agent = _agent("crash-soak-local", "crash-soak", max_steps=SOAK_STEPS + 2, local_activities=True)
# activities="auto": model turns and store steps local, once_work (declared long) a regular activity
long_once_work = dataclasses.replace(once_work, timeout_seconds=600.0)
once_auto_agent = _agent("crash-once-auto", "crash-once", activities="auto", tools=[safe_work, long_once_work])

ALL = [
    once_auto_agent,
    safe_agent,
    once_agent,
    slow_agent,
    gated_agent,
    abort_agent,
    soak_agent,
    safe_local_agent,
    once_local_agent,
    soak_local_agent,
]
