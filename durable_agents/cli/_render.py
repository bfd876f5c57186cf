"""Human-readable rendering for the CLI: transcripts, checkpoints, approvals, tables."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointStatus,
    Decision,
    Evaluation,
    HistoryEntry,
    Message,
    Role,
    RunError,
    SessionSummary,
    ToolCall,
    Usage,
)
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart
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
    if message.role == Role.SYSTEM and message.summary is not None:  # a context policy's summary
        covered = f"messages {message.summary.start}–{message.summary.end - 1}"
        return [f"  summary    ({covered}) {_short(message.content or '', 80)}"]
    if message.role == Role.SYSTEM and message.instructions_change is not None:  # sent from here on
        return [f"  system     (instructions changed) {_short(message.content or '', 80)}"]
    if message.role == Role.SYSTEM:
        return [f"  system     {_short(message.content or '')}"]
    if message.role == Role.USER:
        return [f"  user       {_short(' '.join(filter(None, [message.content, *_attachments(message)])))}"]
    if message.role == Role.TOOL:
        mark, label = ("✗", "error ") if message.is_error else ("→", "result")
        return [f"  {mark} {label}   {message.tool_name} [{message.tool_call_id}] {_short(message.content or '', 70)}"]
    lines = [f"  {line}" for line in _opaque_lines(message)]
    if message.content:
        lines.append(f"  assistant  {_short(message.content)}")
    for call in message.tool_calls or []:
        note = (marks or {}).get(call.id)
        lines.append(f"  ⚙ tool     {call_text(call)}" + (f"  {note}" if note else ""))
    return lines or ["  assistant  (empty)"]


def _attachments(message: Message) -> list[str]:
    """``[image image/png 12 KB]``, ``[document invoice.pdf 80 KB]``: what a message carries besides text."""
    out = []
    for part in message.parts or []:
        if isinstance(part, ImagePart | DocumentPart):
            name = getattr(part, "title", None) or part.url or part.media_type
            size = f" {len(part.data) * 3 // 4 / 1024:.0f} KB" if part.data else ""
            out.append(f"[{part.type} {name}{size}]")
    return out


def _opaque_lines(message: Message) -> list[str]:
    """A provider's own blocks: thinking as its (shortened) text, others by kind."""
    lines = []
    for part in message.parts or []:
        if not isinstance(part, OpaquePart):
            continue
        thought = part.data.get("thinking") if part.kind == "thinking" else None
        if isinstance(thought, str):
            lines.append(f"thinking   {_short(thought, 90)}")
        else:
            lines.append(f"({part.provider} {part.kind.replace('_', ' ')})")
    return lines


def usage_text(usage: Usage) -> str:
    """``1200+50 in 3 requests (cache: 900 read, 250 written)``."""
    text = f"{usage.input_tokens}+{usage.output_tokens} in {plural(usage.requests, 'request')}"
    if usage.cache_read_tokens is not None or usage.cache_write_tokens is not None:
        text += f" (cache: {usage.cache_read_tokens or 0} read, {usage.cache_write_tokens or 0} written)"
    return text


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
    if getattr(pending, "subagent_session_id", None):  # the call waits in a sub-agent's session
        lines.append(f"  in sub-agent {pending.subagent_agent or '-'} (session {pending.subagent_session_id})")
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


def decided_by(decision: Decision) -> str:
    """Who or what decided: the person, ``allow rule 'small'``, ``grant g-1``, ``the evaluator
    (criteria 'payments', confidence 0.95)``, ``timeout``; with the policy version decided under."""
    source = decision.source or "person"
    if source == "person":
        who = decision.decided_by or "unknown"
    elif source in ("deny-rule", "allow-rule"):
        who = f"{source.replace('-', ' ')} {decision.rule!r}"
    elif source == "approve-all":
        who = "the policy's approveAll"
    elif source == "grant":
        who = f"grant {decision.grant_id}"
    elif source == "evaluator":
        confidence = decision.evaluation.confidence if decision.evaluation is not None else None
        who = f"the evaluator (criteria {decision.criteria!r}, confidence {confidence or 0:.2f})"
    else:
        who = "timeout"
    if decision.policy_version is not None:
        who += f" under policy v{decision.policy_version}"
    return who


def evaluation_cost(evaluation: Evaluation) -> str:
    """``the evaluator's verdict approve in 412 ms, $0.0004``: what it said, how long it took
    and what it cost (when its model has a price)."""
    took = f" in {evaluation.latency_ms:.0f} ms" if evaluation.latency_ms is not None else ""
    cost = f", ${evaluation.cost_usd:.4f}" if evaluation.cost_usd is not None else ""
    return f"the evaluator's verdict {evaluation.verdict or 'none'}{took}{cost}"


def decision_text(decision: Decision) -> str:
    """``✓ approved by alice at … , note '…', ran with {…}``: who or what decided, when, the
    note, the edited arguments, why (a rule's, a grant's, the evaluator's reason), a grant made."""
    mark, verb = ("✓", "approved") if decision.approved else ("✗", "rejected")
    if decision.source not in (None, "person", "timeout") and not decision.approved:
        verb = "denied"
    parts = [f"{mark} {verb} by {decided_by(decision)} at {when(decision.decided_at)}"]
    if decision.note is not None:
        parts.append(f"note {_short(decision.note, 80)!r}")
    if decision.arguments is not None:
        parts.append(f"ran with {_args(decision.arguments, 80)} instead of the model's")
    if decision.reason is not None and decision.source not in (None, "person", "timeout"):
        parts.append(f"because {_short(decision.reason, 120)}")
    evaluation = decision.evaluation
    if evaluation is not None and not evaluation.decided and evaluation.escalated:
        parts.append(f"the evaluator left it to a person ({_short(evaluation.escalated, 80)})")
        if evaluation.reasoning:
            parts.append(f"its reasoning {_short(evaluation.reasoning, 120)!r}")
    if evaluation is not None:
        parts.append(evaluation_cost(evaluation))
    if decision.grant_created is not None:
        parts.append(f"made grant {decision.grant_created}")
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
    marks: dict[str, str] = {}
    if pending is not None and getattr(pending, "subagent_session_id", None):
        return marks  # its call (and ids) are the sub-agent's: shown in its nested transcript
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
    nested: dict[int, list[str]] | None = None,
) -> str:
    """What ``show`` prints: the session's header, its turns, its pending approval.

    ``recorded``: ids of pending calls whose result is recorded already (e.g. by a fork's
    patch) and is appended once the calls before them have theirs. ``nested``: lines after a
    message's position (sub-agents' transcripts, ``cli/_subagents.py``)."""
    cp = checkpoint
    status = cp.status.value + (f" ({cp.finish_reason.value})" if cp.finish_reason else "")
    head = [
        f"session   {cp.session_id}",
        f"agent     {cp.agent or '-'}" + (f"  model {cp.run_config.model}" if cp.run_config else ""),
        f"status    {status}",
        f"step      {cp.step_index}   messages {len(cp.messages)}   tokens {usage_text(cp.usage)}",
        f"updated   {when(cp.updated_at)}",
    ]
    if cp.last_error is not None:
        head.insert(3, f"failed    {failure_line(cp.last_error)}")
    if cp.business_state is not None:
        head.append(f"state     {_short(json.dumps(cp.business_state, default=str), 90)}")
    if cp.parent_session_id is not None:
        head.append(f"parent    {cp.parent_session_id} (its call {cp.parent_tool_call_id} runs this sub-agent)")
    if cp.build is not None:  # Worker Versioning: the build its runs are on, and how it got there
        moved = f"   migrated from {cp.migrations[-1].from_build or '(no build)'}" if cp.migrations else ""
        head.append(f"build     {cp.build.canonical} ({cp.build.versioning}){moved}")
    marks = {
        c.id: "… result recorded, appended once the calls before it have theirs"
        if c.id in recorded
        else "… no result yet"
        for c in pending_tool_calls(cp.messages)[0]
    }
    marks.update(approval_marks(pending))
    after, apart = decision_lines(cp.messages, cp.decisions)
    for position, extra in (nested or {}).items():
        after.setdefault(position, []).extend(extra)
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
        if s.last_error is not None and s.status == CheckpointStatus.IN_PROGRESS:
            return "failed"
        return "aborted" if s.session_id in aborted else s.status.value

    rows = [(s.session_id, s.agent, status(s), s.step_index, when(s.updated_at), s.approval_id) for s in sessions]
    out = table(("SESSION", "AGENT", "STATUS", "STEP", "UPDATED", "PENDING APPROVAL"), rows)
    failed = [s for s in sessions if s.last_error is not None and s.status == CheckpointStatus.IN_PROGRESS]
    if failed:
        out += "\n\n" + "\n".join(
            f"{s.session_id} failed: {failure_line(s.last_error)}" for s in failed if s.last_error
        )
        out += "\n(resume with `durable-agents resume SESSION` once the cause is fixed)"
    return out


def failure_line(error: RunError) -> str:
    """One line: why the last run failed, at which step, when."""
    return f"{_short(error.message, 160)} (step {error.step}, {when(error.at)})"


def approvals_table(pendings: Sequence[Any]) -> str:
    """One row per approval; ``IN SUB-AGENT`` (only when one waits in a sub-agent): the agent
    and session where the call is (``SESSION`` is the one to approve)."""
    rows: list[tuple[Any, ...]] = [
        (p.session_id, p.agent, p.tool_name, _args(p.arguments, 40), p.approval_id, when(p.requested_at))
        for p in pendings
    ]
    headers: tuple[str, ...] = ("SESSION", "AGENT", "TOOL", "ARGUMENTS", "APPROVAL ID", "SINCE")
    if any(getattr(p, "subagent_session_id", None) for p in pendings):
        inside = [f"{p.subagent_agent} {p.subagent_session_id}" if p.subagent_session_id else None for p in pendings]
        rows = [(*row[:2], where, *row[2:]) for row, where in zip(rows, inside)]
        headers = (*headers[:2], "IN SUB-AGENT", *headers[2:])
    return table(headers, rows)


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
