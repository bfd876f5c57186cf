"""A call that fails the run stops the rest of its batch (issue 28, item 1).

A model turn asks for lookup, refund, notify; refund raises ``PropagatingToolError`` (or a
``before_tool`` hook raises on an early call): no later call of the batch may start, or a
receipt goes out for a refund that never happened. The resume runs the failed call first,
then the rest, in order."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from durable_agents import (
    Agent,
    HookFailedError,
    Hooks,
    PropagatingToolError,
    ScriptedToolCall,
    ScriptedTurn,
    ToolCall,
    ToolContext,
    register_script,
    tool,
)
from tests.conftest import session_id

RAN: list[tuple[str, str]] = []
"""(session id, tool) of every tool execution in this process, in order."""
DOWN: set[str] = set()
"""Sessions whose refund provider is down, or whose hook raises."""


class Order(BaseModel):
    order: str


@tool(safe_to_retry=True)
async def lookup(args: Order, ctx: ToolContext) -> dict:
    """Look an order up."""
    RAN.append((ctx.session_id, "lookup"))
    return {"order": args.order, "paid_cents": 1200}


@tool
async def refund(args: Order, ctx: ToolContext) -> dict:
    """Refund an order (at most once)."""
    if ctx.session_id in DOWN:
        RAN.append((ctx.session_id, "refund raised"))
        raise PropagatingToolError("the payment provider is down; resume later")
    RAN.append((ctx.session_id, "refund"))
    return {"refunded_cents": 1200}


@tool
async def notify(args: Order, ctx: ToolContext) -> dict:
    """Email the customer a receipt (at most once)."""
    RAN.append((ctx.session_id, "notify"))
    return {"sent": True}


def _refuse_lookup(call: ToolCall, ctx: ToolContext) -> None:
    if call.name == "lookup" and ctx.session_id in DOWN:
        raise RuntimeError("the order service refused the hook's check")


register_script(
    "refund-batch",
    [
        ScriptedTurn(
            text="Refunding.",
            tool_calls=[ScriptedToolCall(name=n, arguments={"order": "o-1"}) for n in ("lookup", "refund", "notify")],
        ),
        ScriptedTurn(text="Refunded and notified."),
    ],
)
refunder = Agent(name="refunder", model="scripted:refund-batch", tools=[lookup, refund, notify], tool_concurrency=1)
hooked = Agent(
    name="hooked-refunder",
    model="scripted:refund-batch",
    tools=[lookup, refund, notify],
    tool_concurrency=1,
    hooks=Hooks(before_tool=_refuse_lookup),
)


def ran(sid: str) -> list[str]:
    return [name for s, name in RAN if s == sid]


async def test_a_propagating_tool_error_stops_the_rest_of_its_batch(run_worker):
    sid = session_id()
    DOWN.add(sid)
    async with run_worker([refunder]) as client:
        with pytest.raises(PropagatingToolError):
            await client.send("refunder", "Refund order o-1", session_id=sid)
        assert ran(sid) == ["lookup", "refund raised"]  # notify never started
        DOWN.discard(sid)
        done = await client.resume(sid)
    assert done.finish_reason == "stop"
    assert ran(sid) == ["lookup", "refund raised", "refund", "notify"]
    assert [m.tool_name for m in done.messages if m.role == "tool"] == ["lookup", "refund", "notify"]


async def test_a_hook_that_raises_on_an_early_call_stops_the_rest_of_its_batch(run_worker):
    sid = session_id()
    DOWN.add(sid)
    async with run_worker([hooked]) as client:
        with pytest.raises(HookFailedError):
            await client.send("hooked-refunder", "Refund order o-1", session_id=sid)
        assert ran(sid) == []  # neither refund nor notify started
        DOWN.discard(sid)
        done = await client.resume(sid)
    assert done.finish_reason == "stop"
    assert ran(sid) == ["lookup", "refund", "notify"]
