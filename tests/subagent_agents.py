"""Agents with sub-agents for the tests (imported by worker subprocesses too).

``lead`` calls two sub-agents in one turn: ``researcher`` (a safe look-up, no
approval) and ``writer`` (whose ``publish`` needs a human's approval). Every
tool logs its side effects to the crash harness's cross-process log, so the
same agents serve the in-process tests and the crash tests.
"""

from __future__ import annotations

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool
from durable_agents.checkpoint.format import Message, Role
from durable_agents.testing import side_effect_tool

HEARTBEAT = 2.0


class TopicArgs(BaseModel):
    topic: str
    seconds: float = 0.3


class NoteArgs(BaseModel):
    text: str


@tool(safe_to_retry=True, heartbeat_timeout=HEARTBEAT, timeout=60)
async def look_up(args: TopicArgs, ctx: ToolContext) -> dict:
    """Look a topic up (a read: safe to run again)."""
    return await side_effect_tool("look_up", ctx, safe=True, seconds=args.seconds, topic=args.topic)


@tool(needs_approval=True, heartbeat_timeout=HEARTBEAT, timeout=60)
async def publish(args: NoteArgs, ctx: ToolContext) -> dict:
    """Publish a note (a side effect a human approves)."""
    return await side_effect_tool("publish", ctx, safe=False, seconds=0.2, text=args.text)


@tool(heartbeat_timeout=HEARTBEAT, timeout=120)
async def slow_once(args: TopicArgs, ctx: ToolContext) -> dict:
    """A slow side effect (at most once): long enough to cancel it midway."""
    return await side_effect_tool("slow_once", ctx, safe=False, seconds=args.seconds, topic=args.topic)


def _task(messages: list[Message]) -> str:
    return next((m.content or "" for m in messages if m.role == Role.USER), "")


def _results(messages: list[Message]) -> list[str]:
    return [m.content or "" for m in messages if m.role == Role.TOOL]


def researcher_turn(messages: list[Message]) -> ScriptedTurn:
    if not _results(messages):
        return ScriptedTurn(
            text="Looking it up.", tool_calls=[ScriptedToolCall(name="look_up", arguments={"topic": _task(messages)})]
        )
    return ScriptedTurn(text=f"Found facts about: {_task(messages)}")


def writer_turn(messages: list[Message]) -> ScriptedTurn:
    done = _results(messages)
    if not done:
        note = f"Note: {_task(messages)}"
        return ScriptedTurn(text="Publishing.", tool_calls=[ScriptedToolCall(name="publish", arguments={"text": note})])
    if len(done) == 1 and "again" in _task(messages):  # a second gated call: the parent follows a new pause
        return ScriptedTurn(
            text="Publishing the correction.",
            tool_calls=[ScriptedToolCall(name="publish", arguments={"text": "Correction"})],
        )
    return ScriptedTurn(text="Published." if '"error"' not in done[-1] else "Not published.")


def lead_turn(messages: list[Message]) -> ScriptedTurn:
    if not _results(messages):
        task = _task(messages)
        return ScriptedTurn(
            text="Delegating.",
            tool_calls=[
                ScriptedToolCall(name="researcher", arguments={"task": f"facts on {task}"}),
                ScriptedToolCall(name="write_note", arguments={"task": f"a note on {task}"}),
            ],
        )
    return ScriptedTurn(text="Team done: " + " | ".join(_results(messages)))


def pair_lead_turn(messages: list[Message]) -> ScriptedTurn:
    """Two gated sub-agent calls that run at the same time (tool_concurrency=2)."""
    if not _results(messages):
        return ScriptedTurn(
            text="Two notes at once.",
            tool_calls=[
                ScriptedToolCall(name="write_note", arguments={"task": "first"}),
                ScriptedToolCall(name="write_note", arguments={"task": "second"}),
            ],
        )
    return ScriptedTurn(text="Both notes handled.")


def solo_lead_turn(messages: list[Message]) -> ScriptedTurn:
    """One sub-agent call (the crash windows of one call)."""
    if not _results(messages):
        return ScriptedTurn(
            text="Asking the researcher.",
            tool_calls=[ScriptedToolCall(name="researcher", arguments={"task": _task(messages)})],
        )
    return ScriptedTurn(text="Lead done.")


def slow_lead_turn(messages: list[Message]) -> ScriptedTurn:
    if not _results(messages):
        return ScriptedTurn(
            text="Asking the slow one.", tool_calls=[ScriptedToolCall(name="slowpoke", arguments={"task": "wait"})]
        )
    if any(m.role == Role.USER and m.content == "Stop; do something else." for m in messages):
        return ScriptedTurn(text="Changed course.")
    return ScriptedTurn(text="Slow done.")


def slowpoke_turn(messages: list[Message]) -> ScriptedTurn:
    if not _results(messages):
        return ScriptedTurn(
            text="Working slowly.",
            tool_calls=[ScriptedToolCall(name="slow_once", arguments={"topic": "x", "seconds": 60})],
        )
    return ScriptedTurn(text="Slow work done.")


def chief_turn(messages: list[Message]) -> ScriptedTurn:
    """A sub-agent (``lead``) that has sub-agents of its own."""
    if not _results(messages):
        return ScriptedTurn(
            text="Over to the lead.", tool_calls=[ScriptedToolCall(name="lead", arguments={"task": _task(messages)})]
        )
    return ScriptedTurn(text="Chief done.")


register_script("researcher", researcher_turn)
register_script("writer", writer_turn)
register_script("lead", lead_turn)
register_script("solo-lead", solo_lead_turn)
register_script("pair-lead", pair_lead_turn)
register_script("slow-lead", slow_lead_turn)
register_script("slowpoke", slowpoke_turn)
register_script("chief", chief_turn)


def _agent(name: str, script: str, **kwargs) -> Agent:
    return Agent(
        name=name,
        model=f"scripted:{script}",
        instructions=f"Sub-agent test agent {name}.",
        model_heartbeat_timeout=HEARTBEAT,
        model_timeout=30,
        **kwargs,
    )


researcher = _agent("researcher", "researcher", tools=[look_up])
writer = _agent("writer", "writer", tools=[publish])
lead = _agent(
    "lead", "lead", subagents=[researcher, writer.as_tool(name="write_note", description="Write and publish a note")]
)
solo_lead = _agent("solo-lead", "solo-lead", subagents=[researcher])
solo_local_lead = _agent("solo-lead-local", "solo-lead", subagents=[researcher], local_activities=True)
slowpoke = _agent("slowpoke", "slowpoke", tools=[slow_once])
slow_lead = _agent("slow-lead", "slow-lead", subagents=[slowpoke])
chief = _agent("chief", "chief", subagents=[lead])
pair_lead = _agent(
    "pair-lead", "pair-lead", tool_concurrency=2,
    subagents=[writer.as_tool(name="write_note", description="Write and publish a note")],
)  # fmt: skip
local_lead = _agent(
    "local-lead", "lead", local_activities=True,
    subagents=[researcher, writer.as_tool(name="write_note", description="Write and publish a note")],
)  # fmt: skip

ALL = [lead, solo_lead, solo_local_lead, slow_lead, chief, local_lead, pair_lead]
