"""The events of a run, as ``AgentClient.stream`` and ``AgentClient.watch`` yield them.

    async for event in client.stream("booker", "Book a table for 2", session_id="chat-42"):
        match event:
            case TextDelta(text=text):
                print(text, end="", flush=True)
            case ToolCallStarted(name=name):
                print(f"\\n[{name}…]")
            case RunFinished(result=result) | RunPaused(result=result):
                print(f"\\n{result.finish_reason}")

Every event has ``type`` (its JSON tag), ``session_id`` and ``offset`` (its place
in the session's event log, from 1: ``watch(session_id, after=offset)`` goes on
from there). The model's text: ``TextDelta`` (per step and attempt);
``StepRetried`` voids the deltas of attempts that never stored their turn,
``TurnStored`` carries the turn as stored; :func:`step_text` adds a step's
deltas up (it equals ``TurnStored.text``). See ``durable_agents.checkpoint.events``
for the stored format and the sub-agent contract (``SubAgentStarted``,
``SubAgentEvent``).
"""

from __future__ import annotations

from durable_agents.checkpoint import events as _events
from durable_agents.checkpoint.events import *  # noqa: F403 (this face is the format's events, name for name)

__all__: list[str] = []
__all__ += _events.__all__
