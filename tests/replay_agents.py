"""Agents for the replay tests (imported by replay-worker subprocesses too).

A support agent on a scripted model: it looks an order up, refunds it when the lookup
says it is late (unless its instructions say never to), and answers from what the tools
said. Each tool counts its side effects in a file (``REPLAY_EFFECTS``, one JSON line per
run), across processes; the model logs each turn it generates there too.
"""

from __future__ import annotations

import json
import os
import re
import time

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from durable_agents.checkpoint.format import Message, Role

EFFECTS_ENV = "REPLAY_EFFECTS"
MODEL_DELAY_ENV = "REPLAY_MODEL_DELAY"


def _log(kind: str, **fields: object) -> None:
    path = os.environ.get(EFFECTS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"kind": kind, "pid": os.getpid(), **fields}) + "\n")


def effects(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Order(BaseModel):
    order: int


class Refund(BaseModel):
    order: int
    amount: float


@tool(safe_to_retry=True)
async def lookup(args: Order, ctx: ToolContext) -> dict:
    """Look an order up."""
    _log("tool", tool="lookup", session=ctx.session_id)
    return {"order": args.order, "status": "late" if args.order % 3 == 0 else "shipped"}


@tool
async def refund(args: Refund, ctx: ToolContext) -> dict:
    """Refund an order (a side effect: at most once)."""
    _log("tool", tool="refund", session=ctx.session_id)
    return {"refunded": args.amount, "order": args.order}


def _support(messages: list[Message]) -> ScriptedTurn:
    system = " ".join(m.content or "" for m in messages if m.role == Role.SYSTEM)
    users = [m.content or "" for m in messages if m.role == Role.USER]
    found = re.search(r"\d+", users[-1] if users else "")
    order = int(found.group()) if found else 0
    since_user = max((i for i, m in enumerate(messages) if m.role == Role.USER), default=0)
    turns = sum(1 for m in messages[since_user:] if m.role == Role.ASSISTANT)
    results = [json.loads(m.content or "{}") for m in messages[since_user:] if m.role == Role.TOOL]
    _log("model", position=len(messages), users=len(users))
    delay = float(os.environ.get(MODEL_DELAY_ENV) or 0)
    if delay:
        time.sleep(delay)
    if turns == 0:
        return ScriptedTurn(
            text="Looking it up.", tool_calls=[ScriptedToolCall(name="lookup", arguments={"order": order})]
        )
    last = results[-1] if results else {}
    if turns == 1 and last.get("status") == "late":
        if "never refund" in system.lower():
            return ScriptedTurn(text=f"Order {order} is late; I cannot refund it.")
        return ScriptedTurn(
            text="It is late: refunding.",
            tool_calls=[ScriptedToolCall(name="refund", arguments={"order": order, "amount": 10.0 + order})],
        )
    if "refunded" in last:
        return ScriptedTurn(text=f"Order {order} was late; refunded {last['refunded']}.")
    if "error" in last:
        return ScriptedTurn(text=f"Order {order} is late; the refund failed.")
    return ScriptedTurn(text=f"Order {order} is {last.get('status', 'unknown')}.")


register_script("replay-support", _support)

support = Agent(name="support", model="scripted:replay-support", instructions="Help customers.", tools=[lookup, refund])
"""The agent the runs were recorded with."""

support_strict = Agent(
    name="support",
    model="scripted:replay-support",
    instructions="Help customers. Never refund.",
    tools=[lookup, refund],
)
"""A changed instruction: late orders are no longer refunded."""

support_no_refund = Agent(
    name="support", model="scripted:replay-support", instructions="Help customers.", tools=[lookup]
)
"""A removed tool: the model still asks for refunds, which no tool answers."""


def same_answer(source, replay) -> float:
    """A scoring function (a report column): 1.0 when the final answers are the same."""
    return float(source.messages[-1].content == replay.messages[-1].content)
