"""Cutting a transcript down to what one model request carries, and reading it back.

Pure functions over a transcript (no Temporal, no LLM SDK), used by the model
activity to build each request and by ``durable-agents show --as-sent`` to print
it: the same code both ways, so the printed request is the one that was sent.

Cost: a plan looks at the transcript's head (its leading system messages and the
run's first user message) and walks back from its end only as far as the policy
keeps, so a step's work is bounded by what is sent, not by the session's length.
The newest context summary is found through the checkpoint's ``contextSummary``.

Instructions: a request sends the session's current instructions first. They are its leading
system messages until an instructions change (a ``system`` message marked
``instructionsChange``, stored before the first turn that was sent other instructions, e.g.
after a ``migrate``) replaces them: from then on the newest change is sent in their place (the
checkpoint's ``instructionsAt`` says where it is), and no change is sent at its own position.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

from durable_agents.checkpoint.context_policy import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    ContextWindow,
    KeepLastTurns,
    SummarizeOlder,
    TokenBudget,
)
from durable_agents.checkpoint.format import InstructionsChange, Message, Role
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart

__all__ = [
    "SUMMARY_HEADING",
    "ContextPlan",
    "SummaryTask",
    "TurnContext",
    "context_after_summary",
    "current_instructions",
    "estimate_tokens",
    "instructions_in_effect",
    "is_instructions_change",
    "is_summary",
    "newest_instructions_change",
    "plan_context",
    "render_window",
    "sent_messages",
    "sent_without_policy",
    "step_position",
    "summary_request",
    "turn_context",
    "without_summaries",
]

SUMMARY_HEADING = "Summary of the earlier conversation (its older turns are not shown):"
"""How a context summary is introduced when it is sent (as a ``system`` message)."""
IMAGE_TOKENS = 1600
"""The estimate for an image or a PDF page's worth of document (providers count them by size)."""
MESSAGE_TOKENS = 4
"""The estimate of a message's own framing (role, separators)."""
SUMMARY_INPUT_CHARS = 4000
"""Each message's text is cut to this many characters in a summary request."""


def is_summary(message: Message) -> bool:
    return message.summary is not None and message.role == Role.SYSTEM


def is_instructions_change(message: Message) -> bool:
    return message.instructions_change is not None and message.role == Role.SYSTEM


def _sent_in_place(message: Message) -> bool:
    """A summary or an instructions change: sent in place of other messages, never at its own position."""
    return message.role == Role.SYSTEM and (message.summary is not None or message.instructions_change is not None)


def instructions_in_effect(messages: Sequence[Message], end: int, instructions_at: int | None) -> int | None:
    """Where the instructions change that the turn at ``end`` is sent is: ``instructions_at``
    (the checkpoint's ``instructionsAt``) when it is a change before ``end``; None: the
    transcript's leading system messages are its instructions."""
    if instructions_at is None or not 0 <= instructions_at < end:
        return None
    return instructions_at if is_instructions_change(messages[instructions_at]) else None


def newest_instructions_change(messages: Sequence[Message], end: int) -> int | None:
    """Where the newest instructions change before ``end`` is, found by walking back (for a
    reader without the checkpoint's ``instructionsAt`` of that time: ``show --as-sent``, a fork)."""
    for i in range(min(end, len(messages)) - 1, -1, -1):
        if is_instructions_change(messages[i]):
            return i
    return None


def current_instructions(messages: Sequence[Message], end: int, instructions_at: int | None) -> str:
    """The instructions the turn at ``end`` is sent (``instructions_at``: the checkpoint's ``instructionsAt``)."""
    at = instructions_in_effect(messages, end, instructions_at)
    if at is not None:
        return messages[at].content or ""
    return "\n\n".join(m.content or "" for m in messages[: _head_end(messages, end)])


def estimate_tokens(message: Message) -> int:
    """About 4 characters a token over the message's text, tool calls and parts (images
    and documents at a flat :data:`IMAGE_TOKENS`): an estimate, not a provider's tokenizer."""
    chars = len(message.content or "")
    for call in message.tool_calls or []:
        chars += len(call.name) + len(json.dumps(call.arguments, separators=(",", ":"), default=str))
    tokens = 0
    for part in message.parts or []:
        if isinstance(part, ImagePart | DocumentPart) and not (isinstance(part, DocumentPart) and part.text):
            tokens += IMAGE_TOKENS
        elif isinstance(part, DocumentPart) and part.text:
            chars += len(part.text)
        elif isinstance(part, OpaquePart):
            chars += len(json.dumps(part.data, default=str))
    return MESSAGE_TOKENS + tokens + (chars + 3) // 4


@dataclass(frozen=True)
class SummaryTask:
    """A summary to make before the request: of ``ranges`` (transcript order), together
    with the summary at ``previous``; it will stand for ``[start, end)``."""

    start: int
    end: int
    ranges: list[tuple[int, int]]
    previous: int | None = None


@dataclass(frozen=True)
class ContextPlan:
    window: ContextWindow
    """What the request is made of (with a summary to make: the window without it)."""
    summarize: SummaryTask | None = None


def plan_context(
    messages: Sequence[Message],
    end: int,
    policy: KeepLastTurns | TokenBudget | SummarizeOlder,
    *,
    run_start: int | None = None,
    summary_at: int | None = None,
    instructions_at: int | None = None,
) -> ContextPlan:
    """The window of ``messages[:end]`` that ``policy`` sends for the turn at ``end``.

    Always sent: the leading system messages and the run's first user message (the first
    user message from ``run_start``, the checkpoint's ``runStartIndex``; else the session's
    first). Tails start at a user or assistant message, so a turn's tool results are never
    cut from it. ``summary_at`` is the checkpoint's ``contextSummary``: the newest summary
    (only :class:`SummarizeOlder` sends one). ``instructions_at`` is the checkpoint's
    ``instructionsAt``: the instructions change sent in place of the leading system messages.
    """
    head = _head_end(messages, end)
    instructions = instructions_in_effect(messages, end, instructions_at)
    anchor = _anchor(messages, end, run_start, head)
    summary = _newest_summary(messages, end, summary_at) if isinstance(policy, SummarizeOlder) else None
    floor = head
    if summary is not None:
        marker = messages[summary].summary
        assert marker is not None
        floor = min(max(head, marker.end), end)
    first = range(head) if instructions is None else [instructions] if messages[instructions].content else []
    fixed = [i for i in (*first, summary, anchor) if i is not None]
    if isinstance(policy, KeepLastTurns):
        start = _cut_turns(messages, floor, end, policy.turns)
    elif isinstance(policy, TokenBudget):
        start = _cut_tokens(messages, floor, end, policy.max_tokens, fixed)
    else:
        start, task = _summarize_older(messages, floor, end, policy, fixed, summary)
        if task is not None:
            window = _window(messages, head, summary, anchor, start, end, instructions)
            return ContextPlan(window=window, summarize=task)
    return ContextPlan(window=_window(messages, head, summary, anchor, start, end, instructions))


def _summarize_older(
    messages: Sequence[Message],
    floor: int,
    end: int,
    policy: SummarizeOlder,
    fixed: list[int],
    summary: int | None,
) -> tuple[int, SummaryTask | None]:
    """Everything since the summary, or (past the policy's limit) a summary to make first."""
    if policy.max_turns is not None:
        over = _cut_turns(messages, floor, end, policy.max_turns) > floor
    else:
        assert policy.max_tokens is not None
        over = _cut_tokens(messages, floor, end, policy.max_tokens, fixed) > floor
    if not over:
        return floor, None
    if policy.keep_turns is not None and policy.max_turns is not None:
        keep = _cut_turns(messages, floor, end, policy.keep_turns)
        lower = _cut_turns(messages, floor, keep, policy.max_turns)  # a bounded input, however late enabled
    else:
        assert policy.keep_tokens is not None and policy.max_tokens is not None
        keep = _cut_tokens(messages, floor, end, policy.keep_tokens, fixed)
        lower = _cut_tokens(messages, floor, keep, policy.max_tokens, [])
    if keep <= floor:
        return floor, None  # the newest turn alone is over: nothing older to summarise
    previous = messages[summary].summary if summary is not None else None
    start = previous.start if previous is not None and lower == floor else lower
    ranges = _ranges(messages, lower, keep)
    return keep, SummaryTask(start=start, end=keep, ranges=ranges, previous=summary)


def _head_end(messages: Sequence[Message], end: int) -> int:
    head = 0
    while head < end and messages[head].role == Role.SYSTEM and not _sent_in_place(messages[head]):
        head += 1
    return head


def _anchor(messages: Sequence[Message], end: int, run_start: int | None, head: int) -> int | None:
    """The run's first user message (its input comes before its first turn), else the session's."""
    for start in dict.fromkeys((max(run_start if run_start is not None else head, head), head)):
        for i in range(start, end):
            role = messages[i].role
            if role == Role.USER:
                return i
            if role == Role.ASSISTANT:
                break
    return None


def _newest_summary(messages: Sequence[Message], end: int, summary_at: int | None) -> int | None:
    if summary_at is None or not 0 <= summary_at < end or not is_summary(messages[summary_at]):
        return None
    return summary_at


def _cut_turns(messages: Sequence[Message], floor: int, end: int, turns: int) -> int:
    """Where the tail of ``[floor, end)`` holding its last ``turns`` assistant turns starts."""
    seen = 0
    for i in range(end - 1, floor - 1, -1):
        if messages[i].role == Role.ASSISTANT:
            seen += 1
            if seen > turns:
                start = i + 1
                while start < end and messages[start].role == Role.TOOL:
                    start += 1
                return start
    return floor


def _cut_tokens(messages: Sequence[Message], floor: int, end: int, budget: int, fixed: list[int]) -> int:
    """Where the longest tail of whole turns of ``[floor, end)`` that fits ``budget`` (with
    the ``fixed`` messages) starts; the newest turn is kept even when it alone is over."""
    left = budget - sum(_tokens(messages[i]) for i in fixed)
    skip = set(fixed)
    total, start = 0, end
    for i in range(end - 1, floor - 1, -1):
        message = messages[i]
        if i not in skip and not _sent_in_place(message):
            total += estimate_tokens(message)
        if message.role == Role.TOOL:
            continue
        if total > left:
            return start if start < end else i
        start = i
    return start


def _tokens(message: Message) -> int:
    return estimate_tokens(_summary_message(message) if is_summary(message) else message)


def _ranges(messages: Sequence[Message], start: int, end: int) -> list[tuple[int, int]]:
    """``[start, end)`` as ranges around its context summaries and instructions changes (which
    are never sent at their own position)."""
    ranges: list[tuple[int, int]] = []
    run = None
    for i in range(start, end):
        if _sent_in_place(messages[i]):
            if run is not None:
                ranges.append((run, i))
            run = None
        elif run is None:
            run = i
    if run is not None:
        ranges.append((run, end))
    return ranges


def _window(
    messages: Sequence[Message],
    head: int,
    summary: int | None,
    anchor: int | None,
    start: int,
    end: int,
    instructions: int | None = None,
) -> ContextWindow:
    ranges: list[tuple[int, int]]
    if instructions is not None:  # the newest instructions change, in place of the first instructions
        ranges = [(instructions, instructions + 1)] if messages[instructions].content else []
    else:
        ranges = [(0, head)] if head else []
    if summary is not None:
        ranges.append((summary, summary + 1))
    if anchor is not None and anchor < start:
        ranges.append((anchor, anchor + 1))
    ranges += _ranges(messages, max(start, head), end)
    merged: list[tuple[int, int]] = []
    for a, b in ranges:
        if merged and merged[-1][1] == a:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return ContextWindow(ranges=merged)


# -- what is sent ----------------------------------------------------------------------
def render_window(messages: Sequence[Message], window: ContextWindow) -> list[Message]:
    """The request's messages: every message of the window's ranges, in their order; a
    context summary as a ``system`` message under :data:`SUMMARY_HEADING`; an instructions
    change as a plain ``system`` message."""
    out: list[Message] = []
    for a, b in window.ranges:
        for i in range(a, b):
            message = messages[i]
            if is_summary(message):
                out.append(_summary_message(message))
            elif is_instructions_change(message):
                out.append(Message.system(message.content or ""))
            else:
                out.append(message)
    return out


def _summary_message(message: Message) -> Message:
    return Message.system(f"{SUMMARY_HEADING}\n\n{message.content or ''}")


def without_summaries(messages: Sequence[Message], end: int) -> list[Message]:
    """Every message before ``end`` but context summaries."""
    return [m for m in messages[:end] if not is_summary(m)]


def sent_without_policy(messages: Sequence[Message], end: int, instructions_at: int | None) -> list[Message]:
    """What a turn without a policy is sent: every message before it but context summaries, with
    the instructions change at ``instructions_at`` (the checkpoint's ``instructionsAt``; when it is
    one) sent first in place of the leading system messages, and no change at its own position."""
    at = instructions_in_effect(messages, end, instructions_at)
    if at is None:
        return [m for m in messages[:end] if not _sent_in_place(m)]
    first = [Message.system(messages[at].content or "")] if messages[at].content else []
    return first + [m for m in messages[_head_end(messages, end) : end] if not _sent_in_place(m)]


def sent_messages(messages: Sequence[Message], position: int) -> list[Message]:
    """What the model was sent for the assistant turn at ``position``: its recorded window
    (``context``), or (a turn made without a policy) every message before it but context
    summaries, the newest instructions change before it in place of the first instructions.
    A ``before_model`` hook's changes are not recorded, so not shown."""
    turn = messages[position]
    if turn.context is not None:
        return render_window(messages, turn.context)
    return sent_without_policy(messages, position, newest_instructions_change(messages, position))


def step_position(messages: Sequence[Message], step: int) -> int | None:
    """Where the transcript's ``step``-th assistant turn (from 1, as ``show`` counts) is."""
    seen = 0
    for i, message in enumerate(messages):
        if message.role == Role.ASSISTANT:
            seen += 1
            if seen == step:
                return i
    return None


# -- the summary request --------------------------------------------------------------
def summary_request(messages: Sequence[Message], task: SummaryTask, instructions: str | None = None) -> list[Message]:
    """The messages of the request that makes ``task``'s summary: the summariser's
    instructions, then the previous summary and the messages to summarise, as text."""
    lines: list[str] = []
    if task.previous is not None:
        lines += ["<previous-summary>", messages[task.previous].content or "", "</previous-summary>", ""]
    lines.append("<conversation>")
    for a, b in task.ranges:
        lines += [_as_text(messages[i]) for i in range(a, b)]
    lines += ["</conversation>", "", "Write the updated summary."]
    return [Message.system(instructions or DEFAULT_SUMMARY_INSTRUCTIONS), Message.user("\n".join(lines))]


def _as_text(message: Message) -> str:
    text = _cut(message.content or "")
    if message.role == Role.TOOL:
        return f"[tool result {message.tool_name}{' (error)' if message.is_error else ''}] {text}"
    if message.role == Role.ASSISTANT:
        calls = [
            f"[calls {c.name} {_cut(json.dumps(c.arguments, default=str), 500)}]" for c in message.tool_calls or []
        ]
        return " ".join(filter(None, [f"[assistant] {text}" if text else "[assistant]", *calls]))
    return f"[{message.role}] {text}"


def _cut(text: str, limit: int = SUMMARY_INPUT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


# -- one model turn's context, decided once --------------------------------------------------------


@dataclass(frozen=True)
class TurnContext:
    """What the model turn at a position needs decided before its request (:func:`turn_context`)."""

    position: int
    """Where the turn goes: after the instructions change and the summary stored for it (by an
    earlier attempt, or by this one: ``change``)."""
    transcript: Sequence[Message]
    """The transcript up to ``position``, with ``change`` (when there is one) in it."""
    stored: Message | None = None
    """The turn, when an earlier attempt stored it: it is returned, never made (or paid for) again."""
    change: Message | None = None
    """An instructions change to store first, at ``position - 1``."""
    summarize: SummaryTask | None = None
    """A summary to make and store first, at ``position`` (then :func:`context_after_summary`)."""
    messages: list[Message] = field(default_factory=list)
    """What the request sends, when there is no summary to make."""
    window: ContextWindow | None = None
    """How ``messages`` were cut from the transcript (None: no policy, everything is sent)."""


def turn_context(
    messages: Sequence[Message],
    count: int,
    position: int,
    *,
    instructions: str,
    policy: KeepLastTurns | TokenBudget | SummarizeOlder | None,
    run_start: int | None = None,
    summary_at: int | None = None,
    instructions_at: int | None = None,
) -> TurnContext:
    """Everything the model turn at ``position`` needs decided from the stored transcript
    (``messages``, ``count`` of them; the other arguments as the checkpoint's header has them),
    in one call: where the turn goes (after an instructions change or a summary stored for it),
    the turn itself when an earlier attempt stored it, the instructions change to store first
    when the run's ``instructions`` are not the ones the session is sent, and what ``policy``
    sends (or the summary it asks for first)."""
    while count > position and _sent_in_place(messages[position]):
        position += 1
    if count > position and messages[position].role == Role.ASSISTANT:
        return TurnContext(position, messages, stored=messages[position])
    change = None
    if current_instructions(messages, position, instructions_at) != instructions:
        previous = instructions_in_effect(messages, position, instructions_at)
        change = Message(
            role=Role.SYSTEM, content=instructions, instructions_change=InstructionsChange(previous=previous)
        )
        messages, instructions_at = _Extended(messages, position, change), position
        position += 1
    if policy is None:  # everything (but summaries a policy made before: sent only in its windows)
        if summary_at is None and instructions_at is None:
            sent = messages[:position]
            return TurnContext(position, messages, change=change, messages=list(sent))
        return TurnContext(
            position, messages, change=change, messages=sent_without_policy(messages, position, instructions_at)
        )
    plan = plan_context(
        messages, position, policy, run_start=run_start, summary_at=summary_at, instructions_at=instructions_at
    )
    if plan.summarize is not None:
        return TurnContext(position, messages, change=change, summarize=plan.summarize)
    return TurnContext(
        position, messages, change=change, messages=render_window(messages, plan.window), window=plan.window
    )


def context_after_summary(
    turn: TurnContext,
    summary: Message,
    policy: SummarizeOlder,
    *,
    run_start: int | None = None,
    instructions_at: int | None = None,
) -> tuple[list[Message], ContextWindow]:
    """What the turn is sent once the summary its context asked for is stored at ``turn.position``
    (the turn then goes after it), and the window that says so."""
    grown = _Extended(turn.transcript, turn.position, summary)
    plan = plan_context(
        grown,
        turn.position + 1,
        policy,
        run_start=run_start,
        summary_at=turn.position,
        instructions_at=turn.position - 1 if turn.change is not None else instructions_at,
    )
    return render_window(grown, plan.window), plan.window


class _Extended(Sequence[Message]):
    """``transcript[:length]`` and one more message, without copying the transcript."""

    def __init__(self, transcript: Sequence[Message], length: int, message: Message) -> None:
        self._transcript, self._length, self._message = transcript, length, message

    def __len__(self) -> int:
        return self._length + 1

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index == self._length:
            return self._message
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._transcript[index]
