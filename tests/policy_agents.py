"""An agent whose payments are gated, and auto-mode evaluators, for the approval-policy tests
(importable by worker subprocesses: ``tests.policy_agents:ALL``).

``payer`` pays once for each number in the user's message (``"1000 9000"``: two calls of
``pay`` in one turn), then says ``Paid.``. Every execution of ``pay`` is appended to
``CALL_LOG`` and, when ``POLICY_TOOL_LOG`` names a file, to that file (one JSON line each):
how a test with worker processes counts executions.
"""

from __future__ import annotations

import asyncio
import json
import os

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from durable_agents.checkpoint import Message, Role
from durable_agents.testing import CrashWindow, crash_point

CALL_LOG: list[tuple[str, dict]] = []


class PayArgs(BaseModel):
    amount_cents: int
    to: str = "acme"


@tool(needs_approval=True)
async def pay(args: PayArgs, ctx: ToolContext) -> dict:
    """Pay someone (gated)."""
    CALL_LOG.append((ctx.tool_call_id, args.model_dump()))
    log = os.environ.get("POLICY_TOOL_LOG")
    if log:
        with open(log, "a") as f:
            line = {"session": ctx.session_id, "call": ctx.tool_call_id, "pid": os.getpid(), **args.model_dump()}
            f.write(json.dumps(line) + "\n")
    # a worker armed with this window SIGKILLs itself here once per session (the payment made,
    # its result not recorded): how a test crashes a run between a policy's decision and the result
    crash_point(CrashWindow.AFTER_TOOL_BEFORE_RECORD, ctx.session_id, tool_call_id=ctx.tool_call_id)
    return {"paid": args.amount_cents, "key": ctx.idempotency_key}


@tool(needs_approval=True, approval_timeout=1)
async def pay_soon(args: PayArgs, ctx: ToolContext) -> dict:
    """Pay someone (gated; nobody deciding within a second rejects it)."""
    CALL_LOG.append((ctx.tool_call_id, args.model_dump()))
    return {"paid": args.amount_cents}


def _payments_with(tool_name: str):
    def play(messages: list[Message]) -> ScriptedTurn:
        last = messages[-1]
        if last.role == Role.USER:
            amounts = [int(word) for word in (last.content or "").split() if word.isdigit()]
            calls = [ScriptedToolCall(name=tool_name, arguments={"amount_cents": a}) for a in amounts]
            return ScriptedTurn(tool_calls=calls)
        return ScriptedTurn(text="Paid.")

    return play


register_script("payments", _payments_with("pay"))
register_script("payments-soon", _payments_with("pay_soon"))
payer = Agent(name="payer", model="scripted:payments", tools=[pay])
payer_local = Agent(name="payer-local", model="scripted:payments", tools=[pay], local_activities=True)
"""``payer`` on local activities: a call the policy approves runs in its model turn."""
hasty = Agent(name="hasty", model="scripted:payments-soon", tools=[pay_soon])

ALL = [payer, payer_local, hasty]


# -- evaluators (``python: "tests.policy_agents:<name>"``) ---------------------------------------


def judge_sure(call, criteria) -> dict:
    small = call.arguments.get("amount_cents", 0) <= 5000
    return {
        "verdict": "approve" if small else "deny",
        "confidence": 0.95,
        "reasoning": f"{'small' if small else 'large'} payment by {criteria.name}",
    }


def judge_unsure(call, criteria) -> dict:
    return {"verdict": "approve", "confidence": 0.3, "reasoning": "not sure at all"}


def judge_broken(call, criteria) -> dict:
    raise RuntimeError("the evaluator's backend is down")


async def judge_slow(call, criteria) -> dict:
    await asyncio.sleep(60)
    return {"verdict": "approve", "confidence": 1.0, "reasoning": "slowly sure"}


def judge_escalates(call, criteria) -> dict:
    return {"verdict": "escalate", "confidence": 0.9, "reasoning": "a person should look"}


def _model_judge(messages: list[Message]) -> ScriptedTurn:
    body = json.loads(messages[-1].content or "{}")
    amount = body["call"]["arguments"]["amount_cents"]
    verdict = {"verdict": "approve" if amount <= 5000 else "deny", "confidence": 0.9, "reasoning": f"{amount} cents"}
    return ScriptedTurn(text=json.dumps(verdict))


register_script("judge", _model_judge)
register_script("judge-prose", lambda messages: ScriptedTurn(text="I think this is fine, approve it."))
