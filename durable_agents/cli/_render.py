"""Human-readable rendering for the CLI: transcripts, checkpoints, approvals, tables."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from durable_agents.checkpoint.format import (
    Checkpoint,
    Decision,
    HistoryEntry,
    Message,
    Role,
    SessionSummary,
    ToolCall,
)
from durable_agents.checkpoint.transcript import pending_tool_calls

_WIDTH = 100


def plural(count: int, noun: str) -> str:
    """``1 step``, ``2 steps``, ``0 tool calls``: a count with its noun in agreement."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _short(text: str, width: int = _WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _args(arguments: dict[str, Any], width: int = 60) -> str:
    return _short(json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, default=str), width)


def call_text(call: ToolCall, width: int = 60) -> str:
    return f"{call.name}({_args(call.arguments, width)}) [{call.id}]"


def render_message(message: Message, marks: dict[str, str] | None = None) -> list[str]:
    """One message as lines; ``marks`` annotates tool calls by id (e.g. awaiting approval)."""
    if message.role == Role.SYSTEM:
        return [f"  system     {_short(message.content or '')}"]
    if message.role == Role.USER:
        return [f"  user       {_short(message.content or '')}"]
    if message.role == Role.TOOL:
        mark, label = ("✗", "error ") if message.is_error else ("→", "result")
        return [f"  {mark} {label}   {message.tool_name} [{message.tool_call_id}] {_short(message.content or '', 70)}"]
    lines = []
    if message.content:
        lines.append(f"  assistant  {_short(message.content)}")
    for call in message.tool_calls or []:
        note = (marks or {}).get(call.id)
        lines.append(f"  ⚙ tool     {call_text(call)}" + (f"  {note}" if note else ""))
    return lines or ["  assistant  (empty)"]


def render_transcript(
    messages: list[Message],
    *,
    start: int = 0,
    steps: bool = False,
    marks: dict[str, str] | None = None,
    after: dict[int, list[str]] | None = None,
) -> str:
    """``messages[start:]``; with ``steps``, a header before each assistant turn (counted from 1);
    ``after`` adds lines after the message at a position (e.g. the decision on a call)."""
    lines: list[str] = []
    step = sum(1 for m in messages[:start] if m.role == Role.ASSISTANT)
    for position, message in enumerate(messages[start:], start):
        if steps and message.role == Role.ASSISTANT:
            step += 1
            lines.append(f"── step {step}")
        lines += render_message(message, marks)
        lines += (after or {}).get(position, [])
    return "\n".join(lines)


# -- times -------------------------------------------------------------------------------
def when(moment: datetime | None, *, now: datetime | None = None) -> str:
    """Local time plus age: ``2025-03-01 14:02:11 (3m ago)``."""
    if moment is None:
        return "-"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return f"{moment.astimezone().strftime('%Y-%m-%d %H:%M:%S')} ({age(now - moment)} ago)"


def age(delta: Any) -> str:
    seconds = max(0, int(delta.total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# -- approvals -------------------------------------------------------------------------------
def pending_lines(pending: Any, *, decide: str | None = None) -> list[str]:
    """A pending approval (``PendingApproval``): the call, what follows, how to decide."""
    call = ToolCall(id=pending.tool_call_id, name=pending.tool_name, arguments=pending.arguments)
    lines = [
        f"awaiting approval {pending.approval_id} since {when(pending.requested_at)}:",
        f"  ⏸ {call_text(call, 200)}",
    ]
    if getattr(pending, "timeout_at", None):
        lines.append(f"  rejected automatically at {when(pending.timeout_at).split(' (')[0]} if undecided")
    for later in pending.remaining_tool_calls or []:
        lines.append(f"  then: {call_text(later)}")
    if decide:
        lines += [
            f"approve: {decide} approve {pending.session_id} --approval-id {pending.approval_id}",
            f"reject:  {decide} reject {pending.session_id} --approval-id {pending.approval_id} --note 'why'",
        ]
    return lines


def decision_text(decision: Decision) -> str:
    """``✓ approved by alice at … , note '…', ran with {…}``: who, when, the note, the edited arguments."""
    mark, verb = ("✓", "approved") if decision.approved else ("✗", "rejected")
    parts = [f"{mark} {verb} by {decision.decided_by or 'unknown'} at {when(decision.decided_at)}"]
    if decision.note is not None:
        parts.append(f"note {_short(decision.note, 80)!r}")
    if decision.arguments is not None:
        parts.append(f"ran with {_args(decision.arguments, 80)} instead of the model's")
    return ", ".join(parts) + f" [approval {decision.approval_id}]"


def decision_lines(messages: list[Message], decisions: list[Decision] | None) -> tuple[dict[int, list[str]], list[str]]:
    """Each decision as a line after its call's result; those whose result is not there, apart."""
    after: dict[int, list[str]] = {}
    apart = []
    for decision in decisions or []:
        at = decision.position if decision.position is not None else -1
        result = messages[at] if 0 <= at < len(messages) else None
        if result is not None and result.role == Role.TOOL and result.tool_call_id == decision.tool_call_id:
            after.setdefault(at, []).append(f"      {decision_text(decision)}")
        else:
            apart.append(f"  {decision.tool_name} [{decision.tool_call_id}] {decision_text(decision)}")
    return after, apart


def approval_marks(pending: Any | None) -> dict[str, str]:
    marks = {}
    if pending is not None:
        marks[pending.tool_call_id] = f"⏸ awaiting approval {pending.approval_id}"
        for later in pending.remaining_tool_calls or []:
            marks[later.id] = "… waits for the approval"
    return marks


# -- whole checkpoints -----------------------------------------------------------------------
def pending_positions(messages: list[Message]) -> list[tuple[int, ToolCall]]:
    """The last turn's calls without a result in the transcript, with their results' positions."""
    pending, turn = pending_tool_calls(messages)
    first = turn + 1 + len(messages[turn].tool_calls or []) - len(pending) if pending else len(messages)
    return [(first + i, call) for i, call in enumerate(pending)]


def render_checkpoint(
    checkpoint: Checkpoint,
    pending: Any | None = None,
    *,
    decide: str | None = None,
    recorded: Collection[str] = (),
) -> str:
    """What ``show`` prints: the session's header, its turns, its pending approval.

    ``recorded``: ids of pending calls whose result is recorded already (e.g. by a fork's
    patch) and is appended once the calls before them have theirs."""
    cp = checkpoint
    status = cp.status.value + (f" ({cp.finish_reason.value})" if cp.finish_reason else "")
    head = [
        f"session   {cp.session_id}",
        f"agent     {cp.agent or '-'}" + (f"  model {cp.run_config.model}" if cp.run_config else ""),
        f"status    {status}",
        f"step      {cp.step_index}   messages {len(cp.messages)}   tokens "
        f"{cp.usage.input_tokens}+{cp.usage.output_tokens} in {plural(cp.usage.requests, 'request')}",
        f"updated   {when(cp.updated_at)}",
    ]
    if cp.business_state is not None:
        head.append(f"state     {_short(json.dumps(cp.business_state, default=str), 90)}")
    marks = {
        c.id: "… result recorded, appended once the calls before it have theirs"
        if c.id in recorded
        else "… no result yet"
        for c in pending_tool_calls(cp.messages)[0]
    }
    marks.update(approval_marks(pending))
    after, apart = decision_lines(cp.messages, cp.decisions)
    lines = [*head, "", render_transcript(cp.messages, steps=True, marks=marks, after=after)]
    if apart:
        lines += ["", "decisions on calls whose result is not in this transcript:", *apart]
    if cp.pending_input:
        lines += ["", "queued input (sent once the pending calls have results):"]
        lines += [f"  user       {_short(m.content or '')}" for m in cp.pending_input]
    if pending is not None:
        lines += ["", *pending_lines(pending, decide=decide)]
    return "\n".join(lines)


# -- tables ------------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in headers], *[["-" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def sessions_table(sessions: Sequence[SessionSummary], aborted: Collection[str] = ()) -> str:
    """``aborted``: ids of the in-progress sessions whose last run was aborted (shown as ``aborted``)."""

    def status(s: SessionSummary) -> str:
        return "aborted" if s.session_id in aborted else s.status.value

    rows = [(s.session_id, s.agent, status(s), s.step_index, when(s.updated_at), s.approval_id) for s in sessions]
    return table(("SESSION", "AGENT", "STATUS", "STEP", "UPDATED", "PENDING APPROVAL"), rows)


def approvals_table(pendings: Sequence[Any]) -> str:
    rows = [
        (p.session_id, p.agent, p.tool_name, _args(p.arguments, 40), p.approval_id, when(p.requested_at))
        for p in pendings
    ]
    return table(("SESSION", "AGENT", "TOOL", "ARGUMENTS", "APPROVAL ID", "SINCE"), rows)


def history_table(entries: Sequence[HistoryEntry]) -> str:
    """One row per entry, numbered from 1 (the newest): the number ``fork --entry`` takes."""
    rows = []
    for number, e in enumerate(entries, 1):
        last = e.checkpoint.messages[-1] if e.checkpoint.messages else None
        rows.append((number, e.step, when(e.saved_at), e.status.value, len(e.checkpoint.messages), _last_line(last)))
    return table(("#", "STEP", "SAVED", "STATUS", "MESSAGES", "LAST MESSAGE"), rows)


def _last_line(message: Message | None) -> str:
    if message is None:
        return "-"
    rendered = render_message(message)[-1].strip()
    return _short(rendered, 70)
