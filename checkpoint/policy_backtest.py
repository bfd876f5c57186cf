"""Backtest: what a candidate approval policy would have done with the calls people decided.

:func:`backtest` runs :func:`decide` (policy only: no grants) over recorded decisions and
counts, for each, whether the policy agrees with the person, would have approved what they
rejected (the count that matters), approved what they approved only after editing its
arguments, denied what they approved, or would still ask a person. A call the policy leaves
to the auto mode's evaluator is judged by the evaluator's verdict on it recorded at run time
(the evaluator judged it, then a person decided), when the same evaluator judged it by the
same criteria set; by the evaluator itself, run through ``evaluate``, when asked (``policy
test --evaluate``); otherwise it counts as ``wouldAskEvaluator``. :func:`recorded_decisions`
reads those decisions from any checkpoint store: each session's ``decisions`` with the
arguments of its call, from the transcript. Pure but for that read and ``evaluate``; no Temporal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import Field

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.approval_decision import PolicyDecision, decide, describe_evaluator, judged
from durable_agents.checkpoint.approval_policy import ApprovalPolicy, AutoMode, CriteriaSet, PolicyCall
from durable_agents.checkpoint.format import Decision, Evaluation, Message, Role, ToolCall

if TYPE_CHECKING:
    from durable_agents.checkpoint.stores.base import CheckpointStore

__all__ = [
    "BacktestExample",
    "BacktestReport",
    "BacktestVerdict",
    "Evaluate",
    "RecordedDecision",
    "RuleTally",
    "backtest",
    "recorded_decision",
    "recorded_decisions",
]

TIMEOUT_NOTE_END = ": the approval timed out"
"""How the run's note on an approval its tool's ``approval_timeout`` rejected ends (the
workflow writes ``no decision within …: the approval timed out``, with no decider)."""

BacktestVerdict = Literal[
    "agree", "approve-rejected", "approve-edited", "deny-approved", "ask-person", "ask-evaluator", "no-person"
]
"""How the policy's outcome compares with the person's decision:

- ``agree``: it approves what they approved as it was, or denies what they rejected;
- ``approve-rejected``: it approves what they rejected (the count that matters);
- ``approve-edited``: it approves what they approved only with edited arguments;
- ``deny-approved``: it denies what they approved;
- ``ask-person``: it would still ask a person (also: the evaluator escalated, was unsure or failed);
- ``ask-evaluator``: the evaluator would judge it, and no verdict of it is known (not run);
- ``no-person``: no person decided (the approval timed out): not counted either way."""

_WRONG: tuple[BacktestVerdict, ...] = ("approve-rejected", "approve-edited", "deny-approved")


class RecordedDecision(FormatModel):
    """A gated call and what a person decided on it."""

    call: PolicyCall
    approved: bool
    edited_arguments: dict[str, Any] | None = None
    """The arguments the person approved instead of the model's; None: approved as it was."""
    timed_out: bool = False
    """No person decided: the tool's approval timeout rejected the call."""
    approval_id: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    note: str | None = None
    evaluation: Evaluation | None = None
    """What the auto mode's evaluator said of the call at run time, before the person decided."""


Evaluate = Callable[[PolicyCall, AutoMode, CriteriaSet], Evaluation]
"""Runs the auto mode's evaluator on one call by the criteria set covering it: its evaluation
(verdict, confidence, reasoning, cost), or one saying its error. It must not raise."""


class BacktestExample(FormatModel):
    """One call the policy would have decided against the person."""

    verdict: BacktestVerdict
    recorded: RecordedDecision
    decision: PolicyDecision
    evaluation: Evaluation | None = None
    """The evaluator's verdict the policy's outcome comes from (its ``auto`` mode)."""


class RuleTally(FormatModel):
    """How one rule (or ``approveAll``) fared: the calls it decided, with and against people."""

    decided: int = 0
    agree: int = 0
    against: int = 0


class BacktestReport(FormatModel):
    """The counts over every recorded decision (JSON: ``to_dict()`` / ``to_json()``)."""

    policy_version: int | None = None
    total: int = 0
    agree: int = 0
    would_approve_rejected: int = 0
    """Calls people rejected that the policy would approve: the count that matters."""
    would_approve_edited: int = 0
    """Calls people approved only with other arguments that the policy would approve as they were."""
    would_deny_approved: int = 0
    would_ask_person: int = 0
    would_ask_evaluator: int = 0
    """Calls the auto mode's evaluator would judge whose verdict is unknown: none recorded, not run."""
    evaluator_recorded: int = 0
    """Calls judged by the evaluator's verdict recorded at run time (same evaluator, same criteria set)."""
    evaluator_run: int = 0
    """Calls the evaluator was run on for this backtest (``policy test --evaluate``)."""
    evaluator_failed: int = 0
    """Of those, the runs that failed (an error, a timeout): each counts as asking a person."""
    evaluator_cost_usd: float | None = None
    """What the evaluator's runs cost, when its model's price is known."""
    no_person: int = 0
    """Decisions no person made (timed-out approvals): counted in ``total`` only."""
    by_rule: dict[str, RuleTally] = Field(default_factory=dict)
    """Per deciding rule (``approveAll`` for the approve-all layer): where agreement and disagreement come from."""
    examples: list[BacktestExample] = Field(default_factory=list)
    """The first calls of each disagreement (up to ``examples`` of each kind), worst kind first."""

    @property
    def automated(self) -> int:
        """Calls the policy would have approved or denied without asking."""
        return self.agree + self.would_approve_rejected + self.would_approve_edited + self.would_deny_approved

    def count(self, verdict: BacktestVerdict) -> int:
        return {
            "agree": self.agree,
            "approve-rejected": self.would_approve_rejected,
            "approve-edited": self.would_approve_edited,
            "deny-approved": self.would_deny_approved,
            "ask-person": self.would_ask_person,
            "ask-evaluator": self.would_ask_evaluator,
            "no-person": self.no_person,
        }[verdict]


def verdict_of(
    decision: PolicyDecision, recorded: RecordedDecision, evaluation: Evaluation | None = None
) -> BacktestVerdict:
    """How the policy's outcome on the call (with ``evaluation``: the evaluator's, for a call
    the policy leaves to it) compares with the person's decision."""
    if recorded.timed_out:
        return "no-person"
    outcome: str = decision.outcome
    if outcome == "ask-evaluator" and evaluation is not None:
        outcome = evaluation.verdict if evaluation.decided and evaluation.verdict is not None else "ask-person"
    if outcome == "approve":
        if not recorded.approved:
            return "approve-rejected"
        return "approve-edited" if recorded.edited_arguments is not None else "agree"
    if outcome == "deny":
        return "deny-approved" if recorded.approved else "agree"
    return "ask-person" if outcome == "ask-person" else "ask-evaluator"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def backtest(
    policy: ApprovalPolicy,
    recorded: Iterable[RecordedDecision],
    *,
    examples: int = 10,
    evaluate: Evaluate | None = None,
    rerun: bool = False,
) -> BacktestReport:
    """What ``policy`` would have decided for each recorded call, against what people decided.

    Grants are not applied (they are made at run time, by people). A call the policy leaves
    to its auto mode is judged by the evaluator's verdict recorded on it, when the same
    evaluator judged it by the same criteria set (its ``minConfidence`` is the candidate's);
    else by ``evaluate``, when given (``rerun``: every such call, recorded verdicts ignored:
    the criteria changed); else it counts as ``wouldAskEvaluator``."""
    counts: dict[BacktestVerdict, int] = dict.fromkeys(get_args(BacktestVerdict), 0)
    kept: dict[BacktestVerdict, list[BacktestExample]] = {verdict: [] for verdict in _WRONG}
    by_rule: dict[str, RuleTally] = {}
    judging = {"recorded": 0, "run": 0, "failed": 0}
    cost: float | None = None
    for record in recorded:
        decision = decide(policy, (), record.call, _aware(record.decided_at))
        evaluation = None
        if decision.outcome == "ask-evaluator" and policy.auto is not None and not record.timed_out:
            evaluation, origin = _evaluation(policy.auto, record, evaluate, rerun)
            if origin is not None:
                judging[origin] += 1
                if origin != "recorded" and evaluation is not None and evaluation.cost_usd is not None:
                    cost = (cost or 0.0) + evaluation.cost_usd
        verdict = verdict_of(decision, record, evaluation)
        counts[verdict] += 1
        if evaluation is not None and evaluation.decided and verdict != "no-person":
            tally = by_rule.setdefault(f"evaluator:{evaluation.criteria}", RuleTally())
            tally.decided += 1
            if verdict == "agree":
                tally.agree += 1
            else:
                tally.against += 1
        if decision.decided and verdict != "no-person":
            tally = by_rule.setdefault(decision.rule or "approveAll", RuleTally())
            tally.decided += 1
            if verdict == "agree":
                tally.agree += 1
            else:
                tally.against += 1
        if verdict in kept and len(kept[verdict]) < examples:
            kept[verdict].append(
                BacktestExample(verdict=verdict, recorded=record, decision=decision, evaluation=evaluation)
            )
    return BacktestReport(
        policy_version=policy.version,
        total=sum(counts.values()),
        agree=counts["agree"],
        would_approve_rejected=counts["approve-rejected"],
        would_approve_edited=counts["approve-edited"],
        would_deny_approved=counts["deny-approved"],
        would_ask_person=counts["ask-person"],
        would_ask_evaluator=counts["ask-evaluator"],
        no_person=counts["no-person"],
        evaluator_recorded=judging["recorded"],
        evaluator_run=judging["run"] + judging["failed"],
        evaluator_failed=judging["failed"],
        evaluator_cost_usd=cost,
        by_rule=dict(sorted(by_rule.items())),
        examples=[example for verdict in _WRONG for example in kept[verdict]],
    )


def _evaluation(
    auto: AutoMode, record: RecordedDecision, evaluate: Evaluate | None, rerun: bool
) -> tuple[Evaluation | None, Literal["recorded", "run", "failed"] | None]:
    """The evaluator's verdict on a call the policy leaves to it, judged by the candidate's
    ``minConfidence``, and where it comes from; (None, None): unknown."""
    criteria = auto.criteria_for(record.call)
    if criteria is None:  # (decide asks the evaluator only for a covered call)
        return None, None
    min_confidence = criteria.min_confidence if criteria.min_confidence is not None else auto.min_confidence
    said = record.evaluation
    if (
        not rerun
        and said is not None
        and said.verdict is not None
        and said.evaluator == describe_evaluator(auto.evaluator)
        and said.criteria == criteria.name
    ):
        return judged(said.model_copy(update={"min_confidence": min_confidence})), "recorded"
    if evaluate is None:
        return None, None
    ran = evaluate(record.call, auto, criteria).model_copy(update={"min_confidence": min_confidence})
    if ran.verdict is None:  # an error, a timeout: it escalates, as at run time
        return ran.model_copy(update={"decided": False}), "failed"
    return judged(ran), "run"


def _aware(moment: datetime | None) -> datetime:
    if moment is None:
        return _EPOCH
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- from a store -------------------------------------------------------------------------------


def recorded_decision(agent: str, session_id: str, decision: Decision, call: ToolCall) -> RecordedDecision:
    """A decision of the checkpoint's ``decisions`` as a backtest reads it (``call``: the call
    it decided, with the model's arguments, from the assistant turn)."""
    timed_out = (
        not decision.approved and decision.decided_by is None and (decision.note or "").endswith(TIMEOUT_NOTE_END)
    )
    return RecordedDecision(
        call=PolicyCall(agent=agent, session_id=session_id, tool=call.name, arguments=call.arguments),
        approved=decision.approved,
        edited_arguments=decision.arguments if decision.approved else None,
        timed_out=timed_out,
        approval_id=decision.approval_id,
        decided_by=decision.decided_by,
        decided_at=decision.decided_at,
        note=decision.note,
        evaluation=decision.evaluation,
    )


def recorded_decisions(
    store: CheckpointStore, *, agent: str | None = None, since: datetime | None = None
) -> Iterator[RecordedDecision]:
    """Every decision the store's sessions record (``agent``'s only, when named; those made at
    or after ``since``, when given), session by session, each with its call's arguments.

    Decisions the approval policy made (a rule, a grant, the evaluator) are left out: a
    backtest compares a policy with people. A decision whose call is not in its session's transcript (a fork that rewrote the
    messages before it) is left out: its arguments are unknown."""
    for summary in store.list_sessions(agent=agent):
        header = store.load_header(summary.session_id)
        if header is None or not header.decisions:
            continue
        wanted = [
            d
            for d in header.decisions
            if (since is None or _aware(d.decided_at) >= _aware(since)) and _by_a_person_or_timeout(d)
        ]
        if not wanted:
            continue
        messages = store.load_messages(header.session_id, 0, header.message_count)
        for decision in wanted:
            call = _decided_call(messages, decision)
            if call is not None:
                yield recorded_decision(header.agent or "", header.session_id, decision, call)


def _by_a_person_or_timeout(decision: Decision) -> bool:
    """A decision a backtest compares with: a person's or a timeout's, not one a policy made
    (a rule, a grant, the evaluator: ``source``), which would only agree with itself."""
    return decision.source in (None, "person", "timeout")


def _decided_call(messages: Sequence[Message], decision: Decision) -> ToolCall | None:
    """The call ``decision`` decided: the call of the assistant turn before its result's
    position whose result goes there (call ids repeat; positions do not); for a decision
    recorded without a position, the last call with its id and tool."""
    if decision.position is not None:
        for turn_position in range(min(decision.position, len(messages)) - 1, -1, -1):
            turn = messages[turn_position]
            if turn.role == Role.ASSISTANT:
                calls = turn.tool_calls or []
                index = decision.position - turn_position - 1
                return calls[index] if index < len(calls) and _same_call(calls[index], decision) else None
        return None
    for message in reversed(messages):
        for call in message.tool_calls or []:
            if _same_call(call, decision):
                return call
    return None


def _same_call(call: ToolCall, decision: Decision) -> bool:
    return call.id == decision.tool_call_id and call.name == decision.tool_name
