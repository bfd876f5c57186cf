"""The replay policy and the agent a replay runs: the changed agent, its tools answered
from the recording.

``replay_agent(agent, store=…, recordings=…, policy=…)`` is ``agent`` with each tool
wrapped: a call the policy matches to a recorded call gets the recorded result and the
tool does not run; a call with no recording gets, by ``policy.unrecorded``, an error
result the model sees (the default), a live run when the tool is ``safe_to_retry`` or
named in ``policy.live_tools``, or your stub's answer. No other tool ever runs: a tool
with side effects runs during a replay only when you name it. The agent loop is not
changed: the wrapper is the tool the activity runs, and it reads the replay's own
transcript (the call's place) and its source's recording from the worker's store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import Tool, ToolContext, ToolResultError
from durable_agents.checkpoint.dataset import Recordings
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Message
from durable_agents.checkpoint.replay import (
    MatchPolicy,
    RecordedCall,
    ReplayCall,
    match_call,
    recorded_calls,
    replay_calls,
    source_of,
)
from durable_agents.checkpoint.stores.base import CheckpointStore

StubFn = Callable[[ReplayCall, ToolContext], Any]
"""Answers a call that has no recording (``def`` or ``async def``); its return value is the
call's result (raise ``ToolResultError`` for an error result)."""
Unrecorded = Literal["error", "live"] | StubFn
UNRECORDED_KIND = "replay-unrecorded"
"""The ``kind`` of the error result a call without a recording gets."""


@dataclass(frozen=True)
class ReplayPolicy:
    """How a replay answers its tool calls.

    ``match``: ``"arguments"`` (the default: same tool, same arguments), ``"position"``
    (the recorded call at the same place, of the same tool) or a function
    (``durable_agents.checkpoint.replay.MatchFn``). ``unrecorded``: ``"error"`` (the
    default: an error result the model sees), ``"live"`` (run the tool when it is
    ``safe_to_retry`` or in ``live_tools``; an error result otherwise) or a stub function.
    ``live_tools``: tools you allow to run for real in a replay although they are not
    ``safe_to_retry`` (with ``unrecorded="live"``).
    """

    match: MatchPolicy = "arguments"
    unrecorded: Unrecorded = "error"
    live_tools: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not callable(self.match) and self.match not in ("arguments", "position"):
            raise ConfigurationError(f"ReplayPolicy(match={self.match!r}): use 'arguments', 'position' or a function")
        if not callable(self.unrecorded) and self.unrecorded not in ("error", "live"):
            raise ConfigurationError(
                f"ReplayPolicy(unrecorded={self.unrecorded!r}): use 'error', 'live' or a stub function"
            )
        if isinstance(self.live_tools, str):
            raise ConfigurationError("ReplayPolicy(live_tools=…) takes a list of tool names, not one string")


class _Sources:
    """The recorded calls of the sources this worker replays (a few hundred kept)."""

    def __init__(self, recordings: Recordings, keep: int = 256) -> None:
        self.recordings, self.keep = recordings, keep
        self._calls: OrderedDict[str, list[RecordedCall]] = OrderedDict()

    def calls(self, source: str) -> list[RecordedCall] | None:
        found = self._calls.get(source)
        if found is None:
            checkpoint = self.recordings.load(source)
            if checkpoint is None:
                return None
            found = recorded_calls(checkpoint.messages)
            self._calls[source] = found
            while len(self._calls) > self.keep:
                self._calls.popitem(last=False)
        else:
            self._calls.move_to_end(source)
        return found


def replay_agent(
    agent: Agent, *, store: CheckpointStore, recordings: Recordings, policy: ReplayPolicy | None = None
) -> Agent:
    """``agent`` for replays: same name, model, instructions and tool schemas (its
    fingerprint is the same), each tool answered from the recording under ``policy``;
    no tool waits for approval (the recording holds what was decided) and drift is
    ignored (the changed agent is the point). ``store`` is the one the replay sessions are
    in; ``recordings`` where their sources are. Agents with sub-agents or MCP servers are
    refused: their calls run outside the wrapped tools."""
    policy = policy or ReplayPolicy()
    if agent.subagents or agent.mcp_servers:
        what = "sub-agents" if agent.subagents else "MCP servers"
        raise ConfigurationError(
            f"agent {agent.name!r} has {what}: their calls cannot be answered from a recording yet, so it "
            "cannot be replayed without side effects"
        )
    names = {t.name for t in agent.tools}
    unknown = [n for n in policy.live_tools if n not in names]
    if unknown:
        raise ConfigurationError(
            f"ReplayPolicy(live_tools=…) names {', '.join(map(repr, unknown))}, which agent {agent.name!r} "
            f"does not have (its tools: {', '.join(sorted(names)) or 'none'})"
        )
    sources = _Sources(recordings)
    tools = [_wrapped(t, store, sources, policy) for t in agent.tools]
    return dataclasses.replace(agent, tools=tools, on_agent_drift="ignore")


def _wrapped(tool: Tool, store: CheckpointStore, sources: _Sources, policy: ReplayPolicy) -> Tool:
    live = tool.safe_to_retry or tool.name in policy.live_tools

    async def answer(args: BaseModel, ctx: ToolContext) -> Any:
        source = source_of(ctx.session_id)
        if source is None or ctx.position is None:
            raise ToolResultError(
                {"error": f"session {ctx.session_id!r} is not a replay session: {tool.name} does not run"},
                kind=UNRECORDED_KIND,
            )
        found = await asyncio.to_thread(_lookup, store, sources, policy, source, ctx)
        if found is not None:
            return _recorded(found)
        return await _unrecorded(tool, args, ctx, store, policy, live)

    # an answer from the recording has no effect: it may run again after a crash; a live
    # tool keeps its own class
    return dataclasses.replace(
        tool,
        fn=answer,
        needs_approval=False,
        approval_timeout_seconds=None,
        safe_to_retry=tool.safe_to_retry or tool.name not in policy.live_tools,
    )


def _lookup(
    store: CheckpointStore, sources: _Sources, policy: ReplayPolicy, source: str, ctx: ToolContext
) -> RecordedCall | None:
    assert ctx.position is not None
    recorded = sources.calls(source)
    if recorded is None:
        raise ToolResultError({"error": f"the recording of session {source!r} is not found"}, kind=UNRECORDED_KIND)
    messages: list[Message] = store.load_messages(ctx.session_id, 0, ctx.position)
    earlier, call = replay_calls(messages, ctx.position)
    return match_call(policy.match, call, recorded, earlier)


def _recorded(call: RecordedCall) -> Any:
    if call.content is None:  # the source asked for it but recorded no result (it ended there)
        raise ToolResultError(
            {"error": f"the recorded call of {call.name} has no result", "kind": UNRECORDED_KIND},
            kind=UNRECORDED_KIND,
        )
    if call.is_error:
        result = call.result
        raise ToolResultError(result if isinstance(result, dict) else {"error": result}, kind="error")
    return call.result


async def _unrecorded(
    tool: Tool, args: BaseModel, ctx: ToolContext, store: CheckpointStore, policy: ReplayPolicy, live: bool
) -> Any:
    if callable(policy.unrecorded):
        messages = await asyncio.to_thread(store.load_messages, ctx.session_id, 0, ctx.position)
        _, call = replay_calls(messages, ctx.position or 0)
        out = policy.unrecorded(call, ctx)
        return await out if inspect.isawaitable(out) else out
    if policy.unrecorded == "live" and live:
        run: Callable[[BaseModel, ToolContext], Awaitable[Any]] = tool.fn
        return await run(args, ctx)
    why = (
        "it is not safe_to_retry and not named in live_tools, so it does not run"
        if policy.unrecorded == "live"
        else "the replay policy answers such calls with this error"
    )
    raise ToolResultError(
        {
            "error": f"replay: no recorded result for this call of {tool.name}; {why}",
            "kind": UNRECORDED_KIND,
        },
        kind=UNRECORDED_KIND,
    )


__all__ = ["UNRECORDED_KIND", "ReplayPolicy", "StubFn", "Unrecorded", "replay_agent"]
