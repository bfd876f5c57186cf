"""A streamed run on the terminal: the model's text as it streams, tools and approvals as
they happen (``run`` and ``watch`` with ``--stream``), or every event as one JSON line
(``--events``). Both return the run's outcome for the summary that follows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

from durable_agents.checkpoint.format import ToolCall
from durable_agents.cli._render import call_text
from durable_agents.client.result import RunResult
from durable_agents.events import (
    ApprovalDecided,
    ApprovalRequested,
    Drift,
    Event,
    RunFailed,
    RunFinished,
    RunPaused,
    StepRetried,
    SubAgentEvent,
    SubAgentStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnStored,
)


def event_json(event: Event) -> dict[str, Any]:
    """An event as one JSON object: its offset first, a sub-agent's nested event with its own."""
    data: dict[str, Any] = {"offset": event.offset, **event.to_dict()}
    if isinstance(event, SubAgentEvent):
        data["event"] = event_json(event.event)
    return data


class LiveText:
    """Prints each event as it comes; ``text`` is whether a line of model text is open."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.open: tuple[int, int] | None = None  # (step, attempt) whose text is being printed

    def _line(self, text: str) -> None:
        self._close()
        print(text, file=self.out, flush=True)

    def _close(self) -> None:
        if self.open is not None:
            print(file=self.out, flush=True)
            self.open = None

    def show(self, event: Event, indent: str = "") -> None:
        if isinstance(event, TextDelta):
            if indent:
                return  # a sub-agent's text is shown when its turn is stored
            if self.open != (event.step, event.attempt):
                self._close()
                print("  assistant  ", end="", file=self.out)
                self.open = (event.step, event.attempt)
            print(event.text, end="", file=self.out, flush=True)
        elif isinstance(event, TurnStored):
            if indent and event.text:
                self._line(f"{indent}  assistant  {' '.join(event.text.split())[:100]}")
            self._close()
            for call in event.tool_calls:
                self._line(f"{indent}  ⚙ tool     {call_text(call)}")
        elif isinstance(event, StepRetried):
            self._line(f"{indent}  ↻ step {event.step} retried (attempt {event.attempt}): the text above is void")
        elif isinstance(event, ToolCallStarted):
            return  # the call was shown with its turn
        elif isinstance(event, ToolCallFinished):
            mark, label = ("✗", "error ") if event.is_error else ("→", "result")
            result = " ".join(event.result.split())
            self._line(f"{indent}  {mark} {label}   {event.name} [{event.tool_call_id}] {result[:70]}")
        elif isinstance(event, ApprovalRequested):
            call = ToolCall(id=event.tool_call_id, name=event.tool_name, arguments=event.arguments)
            where = f" (in sub-agent session {event.subagent_session_id})" if event.subagent_session_id else ""
            self._line(f"{indent}  ⏸ approval  {call_text(call)} needs approval {event.approval_id}{where}")
        elif isinstance(event, ApprovalDecided):
            verdict = "approved" if event.approved else "rejected"
            who = f" by {event.decided_by}" if event.decided_by else ""
            note = f": {event.note}" if event.note else ""
            self._line(f"{indent}  ✓ {verdict}{who} {event.tool_name} [{event.tool_call_id}]{note}")
        elif isinstance(event, Drift):
            self._line(f"{indent}  ! agent changed since the checkpoint: {event.description}")
        elif isinstance(event, SubAgentStarted):
            goes = " goes on" if event.resumed else ""
            self._line(
                f"{indent}  ↳ sub-agent {event.agent or ''} session {event.child_session_id}{goes}".replace(
                    "  ", " ", 1
                )
            )
        elif isinstance(event, SubAgentEvent):
            self.show(event.event, indent + "    ")
        elif isinstance(event, RunFailed) and indent:
            self._line(f"{indent}  ✗ failed: {event.message}")

    def done(self) -> None:
        self._close()


async def print_events(events: AsyncIterator[Event], *, as_json: bool, out: TextIO | None = None) -> RunResult:
    """Print ``events`` (live text, or JSON lines) and return the run's outcome (a failed
    run's error is raised after its ``RunFailed`` is printed)."""
    out = out or sys.stdout
    live = LiveText(out)
    result: RunResult | None = None
    try:
        async for event in events:
            if as_json:
                print(json.dumps(event_json(event), ensure_ascii=False), file=out, flush=True)
            else:
                live.show(event)
            if isinstance(event, RunFinished | RunPaused):
                result = event.result
    finally:
        live.done()
    if result is None:
        raise RuntimeError("the run's events ended without its outcome")
    return result
