"""Compare two runs step by step: where they diverge and how they drift.

A run is a checkpoint or a plain transcript. Each assistant turn is a step:
its text and its tool calls with their results (matched by call id), numbered
from 1 like ``stepIndex`` (so ``divergedAt`` is a step ``fork`` can start
after: fork from ``divergedAt - 1`` to replay the divergence). Call
ids never count as a difference: two providers, or two replays, name the same
call differently. Engine-independent: no Temporal, no LLM SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import Field

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Checkpoint, FinishReason, FormatModel, Message, Role

Run = Checkpoint | Sequence[Message]


class StepToolCall(FormatModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    """The recorded result, parsed as JSON when it is JSON; None while pending."""
    is_error: bool = False


class TrajectoryStep(FormatModel):
    index: int
    text: str | None = None
    tool_calls: list[StepToolCall] = Field(default_factory=list)


class ToolOrderDrift(FormatModel):
    step: int
    a: list[str]
    b: list[str]


class ArgumentDrift(FormatModel):
    step: int
    tool: str
    a: dict[str, Any]
    b: dict[str, Any]


class StepCountDrift(FormatModel):
    a: int
    b: int


class FinishReasonDrift(FormatModel):
    a: FinishReason | None = None
    b: FinishReason | None = None


class TrajectoryDrift(FormatModel):
    tool_order: list[ToolOrderDrift] = Field(default_factory=list)
    arguments: list[ArgumentDrift] = Field(default_factory=list)
    step_count: StepCountDrift | None = None
    finish_reason: FinishReasonDrift | None = None

    @property
    def empty(self) -> bool:
        return not (self.tool_order or self.arguments or self.step_count or self.finish_reason)


class TrajectoryComparison(FormatModel):
    diverged_at: int | None = None
    a: list[TrajectoryStep] = Field(default_factory=list)
    b: list[TrajectoryStep] = Field(default_factory=list)
    drift: TrajectoryDrift = Field(default_factory=TrajectoryDrift)


# -- steps --------------------------------------------------------------------------
def _messages(run: Run) -> list[Message]:
    if isinstance(run, Checkpoint):
        return run.messages
    if isinstance(run, Iterable) and not isinstance(run, (str, bytes)):
        messages = list(run)
        if all(isinstance(m, Message) for m in messages):
            return messages
    raise ConfigurationError("compare_trajectories takes a Checkpoint or a list of Message")


def _parse(content: str | None) -> Any:
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content


def trajectory_steps(run: Run) -> list[TrajectoryStep]:
    """One step per assistant turn, each call with its result (by call id)."""
    turns: list[tuple[str | None, list[dict[str, Any]]]] = []
    open_calls: dict[str, dict[str, Any]] = {}
    for message in _messages(run):
        if message.role == Role.ASSISTANT:
            calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls or []]
            open_calls.update((c.id, d) for c, d in zip(message.tool_calls or [], calls))
            turns.append((message.content, calls))
        elif message.role == Role.TOOL and message.tool_call_id in open_calls:
            call = open_calls.pop(message.tool_call_id)
            call["result"] = _parse(message.content)
            call["is_error"] = bool(message.is_error)
    # numbered like ``stepIndex``: step k is the k-th model turn (and its results)
    return [
        TrajectoryStep(index=i, text=text, tool_calls=[StepToolCall(**c) for c in calls])
        for i, (text, calls) in enumerate(turns, start=1)
    ]


# -- comparison ---------------------------------------------------------------------
def _diverged_at(a: list[TrajectoryStep], b: list[TrajectoryStep]) -> int | None:
    for x, y in zip(a, b):
        if x != y:
            return x.index
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def _tool_drift(a: list[TrajectoryStep], b: list[TrajectoryStep]) -> TrajectoryDrift:
    drift = TrajectoryDrift()
    for x, y in zip(a, b):
        names_a = [c.name for c in x.tool_calls]
        names_b = [c.name for c in y.tool_calls]
        if names_a != names_b:
            drift.tool_order.append(ToolOrderDrift(step=x.index, a=names_a, b=names_b))
        for ca, cb in zip(x.tool_calls, y.tool_calls):
            if ca.name == cb.name and ca.arguments != cb.arguments:
                drift.arguments.append(ArgumentDrift(step=x.index, tool=ca.name, a=ca.arguments, b=cb.arguments))
    return drift


def _finish_drift(a: Run, b: Run) -> FinishReasonDrift | None:
    if not (isinstance(a, Checkpoint) and isinstance(b, Checkpoint)):
        return None
    if a.finish_reason == b.finish_reason:
        return None
    return FinishReasonDrift(a=a.finish_reason, b=b.finish_reason)


def compare_trajectories(a: Run, b: Run) -> TrajectoryComparison:
    """Where runs ``a`` and ``b`` first differ (call ids aside), and how they drift."""
    steps_a, steps_b = trajectory_steps(a), trajectory_steps(b)
    drift = _tool_drift(steps_a, steps_b)
    if len(steps_a) != len(steps_b):
        drift.step_count = StepCountDrift(a=len(steps_a), b=len(steps_b))
    drift.finish_reason = _finish_drift(a, b)
    return TrajectoryComparison(diverged_at=_diverged_at(steps_a, steps_b), a=steps_a, b=steps_b, drift=drift)


# -- text summary ---------------------------------------------------------------------
WIDTH = 44


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _step_lines(step: TrajectoryStep | None) -> list[str]:
    if step is None:
        return ["(no step)"]
    lines = [f"text: {_short(step.text, WIDTH)}"] if step.text else []
    for call in step.tool_calls:
        arrow = "-> error:" if call.is_error else "->"
        lines.append(_short(f"{call.name}({_short(call.arguments, 60)})", WIDTH))
        lines.append("  " + _short(f"{arrow} {_short(call.result, 60)}", WIDTH - 2))
    return lines or ["(empty turn)"]


def _step_rows(i: int, cmp: TrajectoryComparison) -> list[str]:
    x = cmp.a[i] if i < len(cmp.a) else None
    y = cmp.b[i] if i < len(cmp.b) else None
    left, right = _step_lines(x), (["(same)"] if x == y else _step_lines(y))
    marker = ">>" if i + 1 == cmp.diverged_at else ("!=" if x != y else "  ")
    rows = []
    for n in range(max(len(left), len(right))):
        label = f"{marker} {i + 1:>4}" if n == 0 else " " * 7
        cell_a = left[n] if n < len(left) else ""
        cell_b = right[n] if n < len(right) else ""
        rows.append(f"{label}  {cell_a:<{WIDTH}}  {cell_b}".rstrip())
    return rows


def _drift_lines(drift: TrajectoryDrift) -> list[str]:
    lines = [f"  tool order at step {d.step}: a {d.a}  b {d.b}" for d in drift.tool_order]
    lines += [
        f"  arguments of {d.tool} at step {d.step}: a {_short(d.a, 50)}  b {_short(d.b, 50)}" for d in drift.arguments
    ]
    if drift.step_count:
        lines.append(f"  step count: a {drift.step_count.a}  b {drift.step_count.b}")
    if drift.finish_reason:
        fa, fb = drift.finish_reason.a, drift.finish_reason.b
        lines.append(f"  finish reason: a {fa and fa.value}  b {fb and fb.value}")
    return ["drift:", *lines] if lines else ["drift: none"]


def format_comparison(cmp: TrajectoryComparison) -> str:
    """A side-by-side summary: each step of a and b, the divergence marked ``>>``."""
    if cmp.diverged_at is None:
        head = f"identical trajectories ({len(cmp.a)} steps)"
    else:
        head = f"diverged at step {cmp.diverged_at} (a: {len(cmp.a)} steps, b: {len(cmp.b)} steps)"
    lines = [head, f"{'step':>7}  {'a':<{WIDTH}}  b"]
    for i in range(max(len(cmp.a), len(cmp.b))):
        lines += _step_rows(i, cmp)
    lines += _drift_lines(cmp.drift)
    return "\n".join(lines)


__all__ = [
    "ArgumentDrift",
    "FinishReasonDrift",
    "StepCountDrift",
    "StepToolCall",
    "ToolOrderDrift",
    "TrajectoryComparison",
    "TrajectoryDrift",
    "TrajectoryStep",
    "compare_trajectories",
    "format_comparison",
    "trajectory_steps",
]
