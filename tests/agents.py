"""Agents and tools the tests run (importable by worker subprocesses too)."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agents import (
    Agent,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    register_script,
    tool,
)

CALL_LOG: list[tuple[str, str, dict]] = []
"""(tool name, tool_call_id, arguments) of every tool execution in this process."""


class CityArgs(BaseModel):
    city: str


class Forecast(BaseModel):
    city: str
    sky: str
    high_c: int


class BookArgs(BaseModel):
    restaurant: str
    people: int


@tool(safe_to_retry=True)
async def get_weather(args: CityArgs, ctx: ToolContext) -> Forecast:
    """Today's weather in a city."""
    CALL_LOG.append(("get_weather", ctx.tool_call_id, args.model_dump()))
    return Forecast(city=args.city, sky="rain" if args.city == "Paris" else "sun", high_c=18)


@tool
async def book_table(args: BookArgs, ctx: ToolContext) -> dict:
    """Book a table; side effect, at most once."""
    CALL_LOG.append(("book_table", ctx.tool_call_id, args.model_dump()))
    return {"confirmation": f"BK-{ctx.tool_call_id}", "people": args.people}


@tool
async def flaky(args: CityArgs, ctx: ToolContext) -> dict:
    """Always raises: its exception becomes the result."""
    CALL_LOG.append(("flaky", ctx.tool_call_id, args.model_dump()))
    raise RuntimeError(f"no data for {args.city}")


register_script(
    "weather-then-book",
    [
        ScriptedTurn(
            text="Checking the weather.",
            tool_calls=[
                ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}),
                ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
            ],
        ),
        ScriptedTurn(
            text="Rome is sunny; booking.",
            tool_calls=[
                ScriptedToolCall(name="book_table", arguments={"restaurant": "Roscioli", "people": 2}),
            ],
        ),
        ScriptedTurn(text="Booked a table for 2 at Roscioli in Rome."),
    ],
)

register_script(
    "loop-forever",
    lambda messages: ScriptedTurn(
        text="again", tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"})]
    ),
)

register_script(
    "bad-calls",
    [
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall(name="no_such_tool", arguments={}),
                ScriptedToolCall(name="book_table", arguments={"restaurant": "X", "people": "many"}),
                ScriptedToolCall(name="flaky", arguments={"city": "Oslo"}),
            ]
        ),
        ScriptedTurn(text="Recovered from the errors."),
    ],
)

weather_agent = Agent(
    name="booker",
    model="scripted:weather-then-book",
    instructions="You book tables where the weather is good.",
    tools=[get_weather, book_table, flaky],
)
looping_agent = Agent(name="looper", model="scripted:loop-forever", tools=[get_weather], max_steps=4)
bad_agent = Agent(name="bad", model="scripted:bad-calls", tools=[get_weather, book_table, flaky])


class SleepArgs(BaseModel):
    seconds: float


@tool(heartbeat_timeout=2.0)
async def slow_tool(args: SleepArgs, ctx: ToolContext) -> dict:
    """Sleeps; cancellable (its heartbeats carry the cancellation)."""
    import asyncio

    CALL_LOG.append(("slow_tool", ctx.tool_call_id, args.model_dump()))
    await asyncio.sleep(args.seconds)
    return {"slept": args.seconds}


register_script(
    "slow-then-answer",
    [
        ScriptedTurn(
            text="Working on it.",
            tool_calls=[
                ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
                ScriptedToolCall(name="slow_tool", arguments={"seconds": 60}),
            ],
        ),
        ScriptedTurn(text="Understood, changing course."),
    ],
)

slow_agent = Agent(name="slow", model="scripted:slow-then-answer", tools=[get_weather, slow_tool], tool_concurrency=2)


class ChargeArgs(BaseModel):
    amount: int


class EmailArgs(BaseModel):
    to: str


@tool(needs_approval=True)
async def charge_card(args: ChargeArgs, ctx: ToolContext) -> dict:
    """Charge the customer (gated by a human)."""
    CALL_LOG.append(("charge_card", ctx.tool_call_id, args.model_dump()))
    return {"charged": args.amount, "idempotency_key": ctx.tool_call_id}


@tool(needs_approval=True, approval_timeout=86_400)
async def wire_money(args: ChargeArgs, ctx: ToolContext) -> dict:
    """Wire money; nobody deciding within a day rejects it."""
    CALL_LOG.append(("wire_money", ctx.tool_call_id, args.model_dump()))
    return {"wired": args.amount}


@tool(needs_approval=lambda args, ctx: not args.to.endswith("@ours.example"))
async def send_email(args: EmailArgs, ctx: ToolContext) -> dict:
    """Email; only external addresses need approval."""
    CALL_LOG.append(("send_email", ctx.tool_call_id, args.model_dump()))
    return {"sent_to": args.to}


register_script(
    "free-gated-gated",
    [
        ScriptedTurn(
            text="Looking up, then charging twice.",
            tool_calls=[
                ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
                ScriptedToolCall(name="charge_card", arguments={"amount": 10}),
                ScriptedToolCall(name="charge_card", arguments={"amount": 20}),
            ],
        ),
        ScriptedTurn(text="All calls have results."),
    ],
)
register_script(
    "wire",
    [
        ScriptedTurn(tool_calls=[ScriptedToolCall(name="wire_money", arguments={"amount": 500})]),
        ScriptedTurn(text="Wire handled."),
    ],
)
register_script(
    "emails",
    [
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall(name="send_email", arguments={"to": "team@ours.example"}),
                ScriptedToolCall(name="send_email", arguments={"to": "client@else.example"}),
            ]
        ),
        ScriptedTurn(text="Emails handled."),
    ],
)

payments_agent = Agent(name="payments", model="scripted:free-gated-gated", tools=[get_weather, charge_card])
wire_agent = Agent(name="wire", model="scripted:wire", tools=[wire_money])
email_agent = Agent(name="emailer", model="scripted:emails", tools=[send_email])
