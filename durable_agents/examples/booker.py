"""The example agent of the demo: `durable_agents.examples.booker:booker`.

On the offline ``scripted:booker-demo`` model it behaves like a small
planner: it checks the weather in two cities, books (with a human's
approval) where it stays dry, and emails a confirmation when asked. Its
choices follow the tool results, so a fork with a patched forecast takes
another path.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint.format import Message, Role
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script

OUTBOX = Path(os.environ.get("DURABLE_AGENTS_DEMO_DIR", ".durable-agents/demo")) / "outbox.jsonl"
CITIES = ("Paris", "Rome")


class CityArgs(BaseModel):
    city: str


class BookingArgs(BaseModel):
    city: str
    restaurant: str
    people: int


class EmailArgs(BaseModel):
    to: str
    subject: str


@tool(safe_to_retry=True)
async def get_weather(args: CityArgs, ctx: ToolContext) -> dict:
    """Tonight's forecast for a city."""
    return {"city": args.city, "forecast": "rain" if args.city in {"Paris", "London"} else "clear"}


@tool(needs_approval=True)
async def book_table(args: BookingArgs, ctx: ToolContext) -> dict:
    """Book a restaurant table. A side effect: a human approves it, and it runs at most once."""
    code = hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()[:6].upper()
    return {"confirmation": f"BK-{code}", "restaurant": args.restaurant, "city": args.city, "people": args.people}


@tool(safe_to_retry=True, heartbeat_timeout=2.0)
async def send_email(args: EmailArgs, ctx: ToolContext) -> dict:
    """Send an email. Slow; safe to retry because the outbox is keyed by the idempotency key."""
    OUTBOX.parent.mkdir(parents=True, exist_ok=True)
    with OUTBOX.open("a") as f:
        f.write(json.dumps({"event": "sending", "key": ctx.idempotency_key, "attempt": ctx.attempt}) + "\n")
    for _ in range(6):  # a slow mail server; heartbeats tell Temporal we are alive
        await asyncio.sleep(0.5)
        ctx.heartbeat()
    sent = [json.loads(line) for line in OUTBOX.read_text().splitlines()]
    if not any(e["event"] == "sent" and e["key"] == ctx.idempotency_key for e in sent):
        with OUTBOX.open("a") as f:
            f.write(json.dumps({"event": "sent", "key": ctx.idempotency_key, "to": args.to}) + "\n")
    return {"sent": True, "idempotency_key": ctx.idempotency_key}


def _results(messages: list[Message], tool: str) -> list[dict]:
    out = []
    for m in messages:
        if m.role == Role.TOOL and m.tool_name == tool:
            try:
                out.append(json.loads(m.content or "{}"))
            except ValueError:
                out.append({"error": m.content})
    return out


def plan(messages: list[Message]) -> ScriptedTurn:
    """The scripted model's next turn, from what the transcript shows."""
    last = messages[-1]
    if last.role == Role.USER and "email" in (last.content or "").lower():
        return ScriptedTurn(
            text="Sending the confirmation now.",
            tool_calls=[
                ScriptedToolCall(
                    name="send_email", arguments={"to": "you@example.com", "subject": "Your table tonight"}
                )
            ],
        )
    if last.role == Role.TOOL and last.tool_name == "send_email":
        return ScriptedTurn(text="The confirmation email is on its way.")
    weather = _results(messages, "get_weather")
    if not weather:
        return ScriptedTurn(
            text="Let me check tonight's weather in both cities.",
            tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": c}) for c in CITIES],
        )
    booking = _results(messages, "book_table")
    if booking:
        if "error" in booking[-1]:
            return ScriptedTurn(text=f"I did not book: {booking[-1].get('note', booking[-1]['error'])}.")
        b = booking[-1].get("result", booking[-1])  # an approval with a note wraps the result
        return ScriptedTurn(
            text=f"Booked a table for {b['people']} at {b['restaurant']} in {b['city']} "
            f"tonight (confirmation {b['confirmation']})."
        )
    dry = [w["city"] for w in weather if w.get("forecast") == "clear"]
    if not dry:
        return ScriptedTurn(text="Rain everywhere tonight: I did not book. Shall I look for a covered terrace?")
    return ScriptedTurn(
        text=f"{dry[0]} stays dry: booking there.",
        tool_calls=[
            ScriptedToolCall(name="book_table", arguments={"city": dry[0], "restaurant": "Da Enzo", "people": 2})
        ],
    )


register_script("booker-demo", plan)

booker = Agent(
    name="booker",
    model="scripted:booker-demo",
    instructions="You book restaurant tables where tonight's weather is good, and confirm by email.",
    tools=[get_weather, book_table, send_email],
)
