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


register_script("weather-then-book", [
    ScriptedTurn(text="Checking the weather.", tool_calls=[
        ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}),
        ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
    ]),
    ScriptedTurn(text="Rome is sunny; booking.", tool_calls=[
        ScriptedToolCall(name="book_table", arguments={"restaurant": "Roscioli", "people": 2}),
    ]),
    ScriptedTurn(text="Booked a table for 2 at Roscioli in Rome."),
])

register_script("loop-forever", lambda messages: ScriptedTurn(
    text="again", tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"})]))

register_script("bad-calls", [
    ScriptedTurn(tool_calls=[
        ScriptedToolCall(name="no_such_tool", arguments={}),
        ScriptedToolCall(name="book_table", arguments={"restaurant": "X", "people": "many"}),
        ScriptedToolCall(name="flaky", arguments={"city": "Oslo"}),
    ]),
    ScriptedTurn(text="Recovered from the errors."),
])

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


register_script("slow-then-answer", [
    ScriptedTurn(text="Working on it.", tool_calls=[
        ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
        ScriptedToolCall(name="slow_tool", arguments={"seconds": 60}),
    ]),
    ScriptedTurn(text="Understood, changing course."),
])

slow_agent = Agent(name="slow", model="scripted:slow-then-answer", tools=[get_weather, slow_tool],
                   tool_concurrency=2)
