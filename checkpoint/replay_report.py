"""The regression report of a replay batch: per session and over the batch.

Per session: where the replay diverged from its source (``divergedAt``, as
``compare_trajectories`` says), the drift (tool order, arguments, step count, finish
reason), whether the final answer changed, tokens and cost before and after, and the
scores of your functions (a pair of runs in, a number out). Over the batch: how many
trajectories are identical, how many reach the same tools, cost and run time deltas, the
worst cases first. A run's time is its own working time (:func:`working_seconds`): a
wait for an approval decision is not the agent's latency. Written as a table, JSON or JUnit XML; :meth:`ReplayReport.over`
says whether a threshold is passed (what gates a CI job). Engine-independent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

from pydantic import Field

from durable_agents.checkpoint.compare import (
    TrajectoryDrift,
    compare_trajectories,
    trajectory_steps,
)
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, FormatModel, HistoryEntry, Role, Usage
from durable_agents.checkpoint.pricing import cost_usd, price_of

Scorer = Callable[[Checkpoint, Checkpoint], float]
"""A scoring function: the source run and its replay in, a number out (a report column)."""
ReplayStatus = Literal["identical", "diverged", "failed", "missing"]
ANSWER_CHARS = 2000
"""How much of each final answer a report keeps."""


@dataclass
class ReplayPair:
    """A source run and its replay (None when the replay made no session), with what the
    batch said of it and how long each worked (:func:`working_seconds`; None when unknown)."""

    source: Checkpoint
    replay: Checkpoint | None
    replay_session_id: str
    error: str | None = None
    source_seconds: float | None = None
    replay_seconds: float | None = None


class SessionReplay(FormatModel):
    source_session_id: str
    replay_session_id: str
    status: ReplayStatus
    diverged_at: int | None = None
    drift: TrajectoryDrift = Field(default_factory=TrajectoryDrift)
    same_tools: bool = False
    """Both runs called the same tools in the same order (arguments aside)."""
    answer_changed: bool = False
    answer_before: str | None = None
    answer_after: str | None = None
    steps_before: int = 0
    steps_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    cost_before: float | None = None
    cost_after: float | None = None
    seconds_before: float | None = None
    """The source's own working time (:func:`working_seconds`): its waits for approval
    decisions and the idle time between its runs left out. None: unknown (a dataset)."""
    seconds_after: float | None = None
    """The replay's working time (a replay never waits for approval)."""
    scores: dict[str, float] = Field(default_factory=dict)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.status != "identical"


class ReplayReport(FormatModel):
    tag: str
    sessions: list[SessionReplay] = Field(default_factory=list)
    """Worst first: failed, then different tools, then other divergences (earliest first)."""
    total: int = 0
    identical: int = 0
    same_tools: int = 0
    diverged: int = 0
    failed: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    cost_before: float | None = None
    cost_after: float | None = None
    seconds_before: float | None = None
    seconds_after: float | None = None
    score_means: dict[str, float] = Field(default_factory=dict)

    @property
    def changed(self) -> int:
        return self.diverged + self.failed

    def over(self, threshold: str | int | float) -> str | None:
        """Why the report passes ``threshold`` (changed sessions allowed: a count such as
        ``0`` or ``3``, or a share such as ``"10%"``), or None when it does not."""
        limit = parse_threshold(threshold)
        allowed = limit.count if limit.count is not None else limit.share * self.total  # type: ignore[operator]
        if self.changed <= allowed:
            return None
        return f"{self.changed} of {self.total} replayed sessions changed (allowed: {limit.text})"

    def table(self, limit: int | None = None, *, changed_only: bool = False) -> str:
        return format_report(self, limit, changed_only=changed_only)

    def junit_xml(self) -> str:
        return junit_xml(self)


@dataclass(frozen=True)
class Threshold:
    text: str
    count: int | None = None
    share: float | None = None


_THRESHOLD = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def parse_threshold(value: str | int | float) -> Threshold:
    """``3`` (at most 3 changed sessions) or ``"10%"`` (at most a tenth of them)."""
    match = _THRESHOLD.match(str(value))
    if not match or (not match.group(2) and "." in match.group(1)):
        raise ConfigurationError(f"threshold {value!r}: give a number of sessions (e.g. 0 or 3) or a share (e.g. 10%)")
    if match.group(2):
        share = float(match.group(1)) / 100
        if share > 1:
            raise ConfigurationError(f"threshold {value!r}: a share is at most 100%")
        return Threshold(text=f"{match.group(1)}%", share=share)
    return Threshold(text=match.group(1), count=int(match.group(1)))


# -- building it ---------------------------------------------------------------------------
def working_seconds(saves: Iterable[HistoryEntry]) -> float | None:
    """How long a session's runs worked, read from its kept saves (any order): the time from
    each save to the next, except from a save that ends a wait for someone else, a pause for
    an approval decision (``awaiting-approval``), or the end of a run (``finished``, or a
    failed run's save with ``lastError``) until the next run begins. None: fewer than two
    saves kept. The first run's time before its first save (its input stored) is not seen."""
    ordered = sorted(saves, key=lambda entry: entry.saved_at)
    if len(ordered) < 2:
        return None
    worked = 0.0
    for entry, following in pairwise(ordered):
        idle = entry.status != CheckpointStatus.IN_PROGRESS or entry.checkpoint.last_error is not None
        if not idle:
            worked += (following.saved_at - entry.saved_at).total_seconds()
    return worked


def _answer(checkpoint: Checkpoint) -> str | None:
    for message in reversed(checkpoint.messages):
        if message.role == Role.ASSISTANT:
            return message.content if not message.tool_calls else None
    return None


def _bounded(text: str | None) -> str | None:
    return text if text is None or len(text) <= ANSWER_CHARS else text[: ANSWER_CHARS - 1] + "…"


def _cost(checkpoint: Checkpoint) -> float | None:
    model = checkpoint.run_config.model if checkpoint.run_config is not None else None
    price = price_of(model) if model else None
    return cost_usd(checkpoint.usage, price) if price is not None else None


def _tokens(usage: Usage) -> int:
    return usage.input_tokens + usage.output_tokens


def session_replay(pair: ReplayPair, scorers: Mapping[str, Scorer] | None = None) -> SessionReplay:
    source = pair.source
    before = SessionReplay(
        source_session_id=source.session_id,
        replay_session_id=pair.replay_session_id,
        status="missing",
        steps_before=len(trajectory_steps(source)),
        tokens_before=_tokens(source.usage),
        cost_before=_cost(source),
        seconds_before=pair.source_seconds,
        answer_before=_bounded(_answer(source)),
        error=pair.error,
    )
    replay = pair.replay
    if replay is None:
        before.error = pair.error or "the replay made no session"
        return before
    cmp = compare_trajectories(source, replay)
    tools = [[c.name for c in s.tool_calls] for s in cmp.a] == [[c.name for c in s.tool_calls] for s in cmp.b]
    answer = _answer(replay)
    identical = cmp.diverged_at is None and cmp.drift.empty
    status: ReplayStatus = "failed" if pair.error else ("identical" if identical else "diverged")
    return before.model_copy(
        update={
            "status": status,
            "diverged_at": cmp.diverged_at,
            "drift": cmp.drift,
            "same_tools": tools,
            "answer_changed": answer != _answer(source),
            "answer_after": _bounded(answer),
            "steps_after": len(cmp.b),
            "tokens_after": _tokens(replay.usage),
            "cost_after": _cost(replay),
            "seconds_after": pair.replay_seconds,
            "scores": {name: float(score(source, replay)) for name, score in (scorers or {}).items()},
        }
    )


def _rank(s: SessionReplay) -> tuple[int, int, int]:
    kind = 0 if s.status in ("failed", "missing") else 1 if not s.same_tools else 2 if s.changed else 3
    return kind, s.diverged_at or 10**9, -abs(s.tokens_after - s.tokens_before)


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known and len(known) == len(values) else None


def build_report(tag: str, pairs: Sequence[ReplayPair], scorers: Mapping[str, Scorer] | None = None) -> ReplayReport:
    """The report of a batch: one row per pair, worst first, and the batch's totals.

    Costs and durations are summed only when every session has one (a model without a
    listed price, a source read from a dataset: unknown, so None rather than a partial sum)."""
    rows = sorted((session_replay(p, scorers) for p in pairs), key=_rank)
    means = {
        name: sum(r.scores[name] for r in rows if name in r.scores) / max(1, sum(1 for r in rows if name in r.scores))
        for name in (scorers or {})
    }
    return ReplayReport(
        tag=tag,
        sessions=rows,
        total=len(rows),
        identical=sum(1 for r in rows if r.status == "identical"),
        same_tools=sum(1 for r in rows if r.same_tools),
        diverged=sum(1 for r in rows if r.status == "diverged"),
        failed=sum(1 for r in rows if r.status in ("failed", "missing")),
        tokens_before=sum(r.tokens_before for r in rows),
        tokens_after=sum(r.tokens_after for r in rows),
        cost_before=_sum([r.cost_before for r in rows]),
        cost_after=_sum([r.cost_after for r in rows]),
        seconds_before=_sum([r.seconds_before for r in rows]),
        seconds_after=_sum([r.seconds_after for r in rows]),
        score_means=means,
    )


# -- writing it ----------------------------------------------------------------------------
def _delta(before: float | None, after: float | None, fmt: str) -> str:
    if before is None or after is None:
        return "unknown"
    return (
        f"{format(before, fmt)} -> {format(after, fmt)} ({'+' if after >= before else ''}{format(after - before, fmt)})"
    )


def drift_summary(s: SessionReplay) -> str:
    parts = []
    d = s.drift
    if d.tool_order:
        first = d.tool_order[0]
        parts.append(f"tools at step {first.step}: {','.join(first.a) or '-'} -> {','.join(first.b) or '-'}")
    if d.arguments:
        parts.append(f"arguments of {d.arguments[0].tool} at step {d.arguments[0].step}")
    if d.step_count:
        parts.append(f"steps {d.step_count.a} -> {d.step_count.b}")
    if d.finish_reason:
        fa, fb = d.finish_reason.a, d.finish_reason.b
        parts.append(f"finish {fa and fa.value} -> {fb and fb.value}")
    if s.answer_changed:
        parts.append("answer changed")
    if s.error:
        parts.append(s.error)
    return "; ".join(parts) or ("text differs" if s.changed else "")


def format_report(report: ReplayReport, limit: int | None = None, *, changed_only: bool = False) -> str:
    """A table of the sessions (worst first, ``limit`` of them; the changed ones only with
    ``changed_only``) and the batch's totals."""
    names = list(report.score_means)
    head = ["session", "status", "diverged", "steps", "tokens", *names, "drift"]
    rows = []
    listed = [s for s in report.sessions if s.changed] if changed_only else report.sessions
    for s in listed[:limit] if limit else listed:
        rows.append(
            [
                s.source_session_id,
                s.status,
                str(s.diverged_at) if s.diverged_at is not None else "-",
                f"{s.steps_before}->{s.steps_after}",
                f"{s.tokens_before}->{s.tokens_after}",
                *(f"{s.scores[n]:g}" if n in s.scores else "-" for n in names),
                drift_summary(s),
            ]
        )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in [head, *rows]]
    if len(rows) < len(listed):
        lines.append(f"… {len(listed) - len(rows)} more (see the JSON report)")
    lines += [
        "",
        f"{report.total} sessions: {report.identical} identical, {report.same_tools} with the same tools, "
        f"{report.diverged} diverged, {report.failed} failed",
        f"tokens: {_delta(report.tokens_before, report.tokens_after, 'd')}",
        f"cost (USD): {_delta(report.cost_before, report.cost_after, '.4f')}",
        f"run time (s, approval waits left out): {_delta(report.seconds_before, report.seconds_after, '.2f')}",
    ]
    lines += [f"score {name}: mean {mean:g}" for name, mean in report.score_means.items()]
    return "\n".join(line.rstrip() for line in lines)


def junit_xml(report: ReplayReport) -> str:
    """One ``testcase`` per session; a changed session is a ``failure`` saying where and how."""
    cases = []
    for s in report.sessions:
        name = quoteattr(s.source_session_id)
        time = f' time="{s.seconds_after:.3f}"' if s.seconds_after is not None else ""
        case = f"    <testcase classname={quoteattr('replay.' + report.tag)} name={name}{time}"
        if s.status == "identical":
            cases.append(case + "/>")
            continue
        where = f"diverged at step {s.diverged_at}" if s.diverged_at is not None else s.status
        message = quoteattr(f"{where}: {drift_summary(s)}")
        body = escape(
            f"replay session {s.replay_session_id}\nanswer before: {s.answer_before}\nanswer after: {s.answer_after}"
        )
        kind = "error" if s.status in ("failed", "missing") else "failure"
        cases.append(
            f'{case}>\n      <{kind} message={message} type="replay-{s.status}">{body}</{kind}>\n    </testcase>'
        )
    failures = report.diverged
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="durable-agents replay" tests="{report.total}" failures="{failures}" errors="{report.failed}">\n'
        f'  <testsuite name={quoteattr("replay " + report.tag)} tests="{report.total}" failures="{failures}" '
        f'errors="{report.failed}">\n' + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n"
    )


__all__ = [
    "ReplayPair",
    "ReplayReport",
    "ReplayStatus",
    "Scorer",
    "SessionReplay",
    "Threshold",
    "build_report",
    "format_report",
    "junit_xml",
    "parse_threshold",
    "session_replay",
    "working_seconds",
]
