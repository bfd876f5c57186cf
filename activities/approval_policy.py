"""The approval policy in a run: decide a gated call by policy, and the auto mode's evaluator.

``decide_by_policy`` (a local activity: a few reads and at most one write) runs right before
a gated call would pause for a person. It reads the effective policy and the live grants
(``PolicyBook.decision_inputs``), runs ``approval_decision.decide`` on the call's stored
arguments at the activity's clock, takes one use of the grant that approves it
(``use_grant``, keyed by the call's idempotency key: a retry or a resume takes nothing
more), and for an approval or a denial records the decision in the checkpoint as
``record_decision`` does (a denial with its ``{error, note}`` result). A retry finds the
decision recorded and answers it again, whatever the policy says meanwhile.

``evaluate_call`` (a regular activity, the auto mode's timeout, heartbeating) asks the
auto mode's evaluator, plain Python or a model through the worker's providers, for a
verdict on the call against a criteria set. It never decides anything itself: it returns
the verdict, and the workflow applies it unless a person decided first. An evaluator that
fails, says nothing usable or is unsure escalates: the call stays with a person.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AwareDatetime, Field, ValidationError
from temporalio import activity

from durable_agents.activities import tracing
from durable_agents.activities.approvals import (
    decision_record,
    policy_record,
    record_decision_now,
    rejection_by_policy,
    rejection_content,
)
from durable_agents.activities.contracts import ApprovalDecision, PolicyVerdict, RecordDecisionInput
from durable_agents.activities.deps import ActivityDeps, asked_at, policy_book, policy_now
from durable_agents.activities.events import streams, write_events_now
from durable_agents.activities.keys import idempotency_key
from durable_agents.activities.step_events import approval_decided
from durable_agents.checkpoint.approval_decision import PolicyDecision, decide, describe_evaluator, judged
from durable_agents.checkpoint.approval_grants import Grant
from durable_agents.checkpoint.approval_policy import CriteriaSet, EvaluatorRef, PolicyCall
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    Decision,
    Evaluation,
    FormatModel,
    Message,
    Role,
    ToolCall,
    Usage,
)
from durable_agents.checkpoint.pricing import cost_usd, price_of
from durable_agents.checkpoint.run_config import RunConfig
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.registry import ProviderRegistry, split_model_string

DECIDE_BY_POLICY = "durable_agents.decide_by_policy"
EVALUATE_CALL = "durable_agents.evaluate_call"
_log = logging.getLogger(__name__)

_SOURCES: dict[str, Literal["deny-rule", "allow-rule", "approve-all", "grant"]] = {
    "deny-rule": "deny-rule",
    "allow-rule": "allow-rule",
    "approve-all": "approve-all",
    "grant": "grant",
}


class AutoModeCall(FormatModel):
    """What the evaluator is to judge the call by: copied from the policy the call was decided
    under, so a policy change while the call waits does not change what it is judged by."""

    evaluator: EvaluatorRef
    criteria: CriteriaSet
    min_confidence: float
    """The criteria set's ``minConfidence``, else the auto mode's."""
    timeout_seconds: float


class DecideByPolicyInput(FormatModel):
    session_id: str
    agent: str
    approval_id: str
    """The id the decision is recorded under (the workflow's, the same on replay)."""
    call: ToolCall
    batch_start: int
    batch: list[str]
    index: int
    turn_position: int | None = None
    """Set when ``call`` is a reference: its arguments are read from this turn."""
    asked_at: AwareDatetime | None = None
    """Temporal's time when the workflow asked (``workflow.now()``; this is a local activity,
    whose start time is the worker's clock): grants are judged at the latest of it and the
    worker's clock (None in older histories)."""


class DecideByPolicyOutput(FormatModel):
    verdict: PolicyVerdict
    recorded_through: int | None = None
    """Set when the policy decided (approve or deny) and the decision is recorded."""
    auto: AutoModeCall | None = None
    """Set when the verdict is ``ask-evaluator``."""


class EvaluateCallInput(FormatModel):
    session_id: str
    agent: str
    call: ToolCall
    position: int
    turn_position: int | None = None
    auto: AutoModeCall


class Verdict(FormatModel):
    """What an evaluator returns: approve, deny or escalate, how sure it is (0 to 1), and why.
    A Python evaluator may return this, or a mapping with these keys."""

    verdict: Literal["approve", "deny", "escalate"]
    confidence: float = Field(ge=0.0, le=1.0)
    reasoning: str = ""


class PolicyDecisionActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    def all(self) -> list[Any]:
        return [self.decide_by_policy, self.evaluate_call]

    @activity.defn(name=DECIDE_BY_POLICY)
    async def decide_by_policy(self, inp: DecideByPolicyInput) -> DecideByPolicyOutput:
        """Decide the gated call by policy, and record the decision when it is made here."""
        with asked_at(inp.asked_at):  # (the time grants are judged at)
            return await self.deps.in_store(self._decide, inp)

    def _decide(self, inp: DecideByPolicyInput) -> DecideByPolicyOutput:
        deps = self.deps
        header = deps.live_header(inp.session_id)
        record_inp = RecordDecisionInput(
            session_id=inp.session_id,
            decision=ApprovalDecision(approval_id=inp.approval_id, approved=False),
            call=inp.call,
            batch_start=inp.batch_start,
            batch=inp.batch,
            index=inp.index,
            agent=inp.agent,
            turn_position=inp.turn_position,
        )
        position = record_inp.position
        kept = next((d for d in header.decisions or [] if d.approval_id == inp.approval_id), None)
        if kept is None:  # a resumed run (a new approval id): the policy's decision on this very call
            kept = next(
                (
                    d
                    for d in reversed(header.decisions or [])
                    if d.position == position and d.tool_call_id == inp.call.id and d.source in _SOURCES
                ),
                None,
            )
        if kept is not None:  # a retry or a resume: the decision recorded is the decision
            return self._recorded(record_inp, kept)
        call = inp.call
        if inp.turn_position is not None:
            call = deps.stored_call(inp.session_id, inp.turn_position, position)
        ruled = policy_decision(deps, header, inp.agent, inp.session_id, call, position)
        if ruled is None:
            return DecideByPolicyOutput(verdict=PolicyVerdict(outcome="ask-person", reason="no policy book"))
        decision, verdict, auto = ruled
        if auto is not None:
            return DecideByPolicyOutput(verdict=verdict, auto=auto)
        if not decision.decided:
            return DecideByPolicyOutput(verdict=verdict)
        approved = decision.outcome == "approve"
        record_inp = record_inp.model_copy(
            update={
                "decision": ApprovalDecision(approval_id=inp.approval_id, approved=approved),
                "source": verdict.source,
                "policy": verdict,
            }
        )
        record = decision_record(record_inp, call.arguments)
        rejection = rejection_by_policy(decision.reason)
        return DecideByPolicyOutput(
            verdict=verdict, recorded_through=record_decision_now(deps, record_inp, record, rejection)
        )

    def _recorded(self, inp: RecordDecisionInput, kept: Decision) -> DecideByPolicyOutput:
        source = kept.source if kept.source in _SOURCES else None
        verdict = _kept_verdict(kept)
        inp = inp.model_copy(
            update={"decision": ApprovalDecision(approval_id=kept.approval_id, approved=kept.approved)}
        )
        rejection = rejection_by_policy(kept.reason or "") if source else rejection_content(kept.note)
        return DecideByPolicyOutput(
            verdict=verdict, recorded_through=record_decision_now(self.deps, inp, kept, rejection)
        )

    @activity.defn(name=EVALUATE_CALL)
    async def evaluate_call(self, inp: EvaluateCallInput) -> Evaluation:
        """The evaluator's verdict on the call (never raises for the evaluator's own failure: an
        error is an escalation, said in the evaluation)."""
        auto = inp.auto
        call = inp.call
        if inp.turn_position is not None:
            call = await self.deps.in_store(self.deps.stored_call, inp.session_id, inp.turn_position, inp.position)
        policy_call = PolicyCall(agent=inp.agent, session_id=inp.session_id, tool=call.name, arguments=call.arguments)
        beating = asyncio.create_task(_heartbeat())
        try:
            return await run_evaluator(
                self.deps.providers,
                auto.evaluator,
                auto.criteria,
                auto.min_confidence,
                policy_call,
                step=activity.info().attempt,
            )
        finally:
            beating.cancel()


async def run_evaluator(
    providers: ProviderRegistry,
    evaluator: EvaluatorRef,
    criteria: CriteriaSet,
    min_confidence: float,
    call: PolicyCall,
    *,
    step: int = 1,
    timeout_seconds: float | None = None,
) -> Evaluation:
    """The evaluator's verdict on ``call`` by ``criteria``: a Python function's, or a model's
    through ``providers`` (the model's answer parsed by :func:`parse_verdict`), with whether it
    decides the call, its usage, cost and latency. Never raises for the evaluator's own failure
    (nor, with ``timeout_seconds``, for its taking longer): an error is an escalation, said in
    the evaluation. The ``evaluate_call`` activity runs it (its timeout Temporal's); so does
    ``policy test --evaluate``."""
    evaluation = Evaluation(
        evaluator=describe_evaluator(evaluator), criteria=criteria.name, min_confidence=min_confidence
    )
    started, limit = time.monotonic(), asyncio.timeout(timeout_seconds)
    try:
        async with limit:
            if evaluator.python is not None:
                verdict, usage, cost = await _python_verdict(evaluator.python, call, criteria), None, None
            else:
                verdict, usage, cost = await _model_verdict(providers, evaluator.model or "", call, criteria, step)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 (the evaluator failed, whatever the way: escalate, never approve)
        if isinstance(e, TimeoutError) and limit.expired():
            return evaluation.model_copy(
                update={
                    "error": f"no verdict within {timeout_seconds:g} s",
                    "escalated": f"timeout: no verdict within {timeout_seconds:g} s",
                    "latency_ms": (time.monotonic() - started) * 1000,
                }
            )
        (activity.logger if activity.in_activity() else _log).warning(
            "approval evaluator %s failed: %s", evaluation.evaluator, e
        )
        return evaluation.model_copy(
            update={
                "error": f"{type(e).__name__}: {e}"[:2000],
                "escalated": f"error: {type(e).__name__}: {e}"[:2000],
                "latency_ms": (time.monotonic() - started) * 1000,
            }
        )
    return judged(
        evaluation.model_copy(
            update={
                "verdict": verdict.verdict,
                "confidence": verdict.confidence,
                "reasoning": verdict.reasoning,
                "usage": usage,
                "cost_usd": cost,
                "latency_ms": (time.monotonic() - started) * 1000,
            }
        )
    )


async def _model_verdict(
    providers: ProviderRegistry, model: str, call: PolicyCall, criteria: CriteriaSet, step: int
) -> tuple[Verdict, Usage, float | None]:
    provider_name, name = split_model_string(model)
    provider = providers.get(provider_name)
    response = await provider.generate(
        ModelRequest(
            model=name,
            messages=evaluator_prompt(call, criteria),
            max_tokens=1024,
            session_id=call.session_id,
            step=step,
        )
    )
    price = price_of(model)
    usage = response.usage
    return parse_verdict(response.message.content or ""), usage, cost_usd(usage, price) if price else None


def policy_decision(
    deps: ActivityDeps, header: CheckpointHeader, agent: str, session_id: str, call: ToolCall, position: int
) -> tuple[PolicyDecision, PolicyVerdict, AutoModeCall | None] | None:
    """The policy's decision on the gated call at ``position`` (its arguments as the model gave
    them), at this activity's clock: a grant's expiry is judged at each decision. A grant that
    approves it gives up one use (``use_grant``, keyed by the call's idempotency key: a retry or
    a resume takes nothing more); one revoked or used up meanwhile is passed over. With the
    auto mode's call when the verdict is ``ask-evaluator``. None: the store has no policy book.
    In the store call of the activity that decides."""
    book = policy_book(deps)
    if book is None:
        return None
    policy_call = PolicyCall(agent=agent, session_id=session_id, tool=call.name, arguments=call.arguments)
    now = policy_now()
    found = book.decision_inputs(agent, session_id, now, tool=call.name)
    grants: list[Grant] = list(found.grants)
    while True:
        decision = decide(found.policy, grants, policy_call, now)
        if decision.layer != "grant" or decision.grant_id is None:
            break
        used = book.take_use(decision.grant_id, idempotency_key(header, position), now)
        if used is not None:
            if used != decision.grant_id:  # this call used another grant before
                decision = decision.model_copy(update={"grant_id": used})
            break
        grants = [g for g in grants if g.id != decision.grant_id]  # revoked, used up meanwhile
    verdict = _verdict(decision, found.agent_policy_version, found.session_policy_version)
    if decision.outcome != "ask-evaluator":
        return decision, verdict, None
    assert found.policy is not None and found.policy.auto is not None
    auto, criteria = found.policy.auto, found.policy.auto.criteria_for(policy_call)
    assert criteria is not None
    return (
        decision,
        verdict,
        AutoModeCall(
            evaluator=auto.evaluator,
            criteria=criteria,
            min_confidence=criteria.min_confidence if criteria.min_confidence is not None else auto.min_confidence,
            timeout_seconds=auto.timeout_seconds,
        ),
    )


def in_turn_approval_id(header: CheckpointHeader, position: int) -> str:
    """The approval id of a call the policy approves in its model turn: the same on every
    attempt and resume (the call's idempotency key as a UUID)."""
    return uuid5_of_url(f"durable-agents:policy/{idempotency_key(header, position)}")


def uuid5_of_url(name: str) -> str:
    """``str(uuid.uuid5(uuid.NAMESPACE_URL, name))``, without ``uuid.UUID``'s checks (it runs
    with each gated call a policy approves in its turn)."""
    digest = bytearray(hashlib.sha1(_URL_NAMESPACE + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


_URL_NAMESPACE = uuid.NAMESPACE_URL.bytes


class InTurn(FormatModel):
    """The approval policy's approvals of a turn's gated calls, by their index in the turn."""

    approved: dict[int, PolicyVerdict] = Field(default_factory=dict)
    records: dict[int, Decision] = Field(default_factory=dict)
    """The decisions of ``approved`` to record (those not recorded yet)."""


def plan_in_turn(
    deps: ActivityDeps, config: RunConfig, header: CheckpointHeader, turn_position: int, calls: list[ToolCall]
) -> InTurn:
    """The turn's gated calls the approval policy approves, decided in the model activity that
    stores the turn, before any call runs: their decisions are recorded with the turn (one
    write: :func:`settle_in_turn` then takes their grants' uses), and they run as ungated calls
    do, with no activity of their own for the decision (issue 42: a rule- or grant-approved
    step costs what an ungated one does). A call the policy denies or leaves to the evaluator
    or a person is left to the workflow (``decide_by_policy`` decides it again, as it decides
    a call of an older history); so are calls gated by an approval rule function (the workflow
    asks the rule first). ``header``: the session's, with the turn. A retried or resumed turn
    finds its decisions recorded: those approvals stand, nothing is decided again. In the store
    call of the activity."""
    specs = {spec.name: spec for spec in config.tools}
    gated = [
        i
        for i, call in enumerate(calls)
        if (spec := specs.get(call.name)) is not None and spec.needs_approval and not spec.approval_conditional
    ]
    plan = InTurn()
    if not gated:
        return plan
    book = policy_book(deps)
    if book is None:
        return plan
    batch_start, now = turn_position + 1, policy_now()
    for index in gated:
        call, position = calls[index], batch_start + index
        kept = next(
            (d for d in reversed(header.decisions or []) if d.position == position and d.tool_call_id == call.id),
            None,
        )
        if kept is not None:  # decided before (a retried or resumed turn): approved by policy, it runs
            if kept.approved and kept.source in _SOURCES:
                plan.approved[index] = _kept_verdict(kept)
            continue  # anything else (a person's decision, a denial) the workflow carries out
        policy_call = PolicyCall(
            agent=config.agent, session_id=header.session_id, tool=call.name, arguments=call.arguments
        )
        found = book.decision_inputs(config.agent, header.session_id, now, tool=call.name)
        decision = decide(found.policy, found.grants, policy_call, now)  # (a grant's use: settle_in_turn)
        if decision.outcome != "approve":
            continue
        verdict = _verdict(decision, found.agent_policy_version, found.session_policy_version)
        plan.approved[index] = verdict
        plan.records[index] = policy_record(in_turn_approval_id(header, position), call, position, verdict)
    return plan


def with_in_turn(header: CheckpointHeader, plan: InTurn) -> CheckpointHeader:
    """``header`` with the plan's decisions recorded (to store with the turn)."""
    if not plan.records:
        return header
    return header.model_copy(update={"decisions": [*(header.decisions or []), *plan.records.values()]})


def settle_in_turn(
    deps: ActivityDeps, header: CheckpointHeader, turn_position: int, calls: list[ToolCall], plan: InTurn
) -> dict[int, PolicyVerdict]:
    """Once the plan's decisions are recorded (with the turn, or after it for a turn stored
    before): each grant approving a call gives up one use (``use_grant``, keyed by the call's
    idempotency key: a retry or a resume takes nothing more). A grant revoked, expired or used
    up since the plan read it takes its decision back (the call has not run: nothing runs
    before this) and leaves the call to the workflow: ``maxUses`` is never exceeded. Writes
    the decisions' events when the run streams. The approvals that stand. In the store call of
    the activity."""
    approved = dict(plan.approved)
    if not approved:
        return approved
    book = policy_book(deps) if any(v.source == "grant" for v in approved.values()) else None
    taken_back: set[int] = set()
    if book is not None:
        now = policy_now()
        for index, verdict in plan.approved.items():
            if verdict.source != "grant" or verdict.grant_id is None:
                continue
            if book.take_use(verdict.grant_id, idempotency_key(header, turn_position + 1 + index), now) is None:
                taken_back.add(index)
                del approved[index]
    if taken_back:  # (rare: a grant changed between the read and the use) the decisions are taken back
        live = deps.live_header(header.session_id)
        dropped = {(turn_position + 1 + i, calls[i].id) for i in taken_back}
        kept = [d for d in live.decisions or [] if (d.position, d.tool_call_id) not in dropped]
        deps.store.append(live.model_copy(update={"decisions": kept, "updated_at": None}), live.message_count, [])
    if plan.records and streams(header):
        ids = [call.id for call in calls]
        write_events_now(
            deps,
            header.session_id,
            [
                approval_decided(
                    RecordDecisionInput(
                        session_id=header.session_id,
                        decision=ApprovalDecision(approval_id=record.approval_id, approved=True),
                        call=calls[index],
                        batch_start=turn_position + 1,
                        batch=ids,
                        index=index,
                    ),
                    record,
                )
                for index, record in plan.records.items()
                if index in approved
            ],
        )
    return approved


@tracing.store_operation("append_new")  # the turn's append, its span as ever (the decisions go with it)
def store_turn(
    deps: ActivityDeps, header: CheckpointHeader, position: int, turn: Message, decide: bool
) -> dict[int, PolicyVerdict] | None:
    """Store a new model turn at ``position`` (``append_new``) and, when ``decide``, the approval
    policy's approvals of its gated calls with it (:func:`plan_in_turn`, :func:`settle_in_turn`),
    in one store call. The approvals that stand; None when another attempt stored its turn first
    (nothing is written then)."""
    calls = turn.tool_calls or []
    plan = None
    if decide and calls:
        assert header.run_config is not None
        plan = plan_in_turn(deps, header.run_config, header, position, calls)
        header = with_in_turn(header, plan)
    if not deps.store.append_new(header, position, [turn]):
        return None
    return {} if plan is None else settle_in_turn(deps, header, position, calls, plan)


def decide_in_turn(
    deps: ActivityDeps, config: RunConfig, session_id: str, turn_position: int, calls: list[ToolCall]
) -> dict[int, PolicyVerdict]:
    """:func:`plan_in_turn` and :func:`settle_in_turn` for a turn stored before (a retried or
    resumed model turn): decisions not recorded yet are recorded first, in one write."""
    header = deps.live_header(session_id)
    plan = plan_in_turn(deps, config, header, turn_position, calls)
    if plan.records:
        written = with_in_turn(header, plan).model_copy(update={"updated_at": None})
        deps.store.append(written, header.message_count, [])
    return settle_in_turn(deps, header, turn_position, calls, plan)


def _kept_verdict(kept: Decision) -> PolicyVerdict:
    return PolicyVerdict(
        outcome="approve" if kept.approved else "deny",
        source=kept.source if kept.source in _SOURCES else None,
        reason=kept.reason or "",
        rule=kept.rule,
        grant_id=kept.grant_id,
        criteria=kept.criteria,
        policy_version=kept.policy_version,
        agent_policy_version=kept.agent_policy_version,
        session_policy_version=kept.session_policy_version,
        arguments_digest=kept.arguments_digest,
    )


def _verdict(decision: PolicyDecision, agent_version: int, session_version: int) -> PolicyVerdict:
    return PolicyVerdict(
        outcome=decision.outcome,
        source=_SOURCES.get(decision.layer) if decision.decided else None,
        reason=decision.reason,
        rule=decision.rule,
        grant_id=decision.grant_id,
        criteria=decision.criteria,
        policy_version=decision.policy_version,
        agent_policy_version=agent_version or None,
        session_policy_version=session_version or None,
        arguments_digest=decision.arguments_digest,
    )


async def _heartbeat(every: float = 2.0) -> None:
    """Heartbeat while the evaluator works, so a cancellation (a person decided first) and a
    lost worker are noticed."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)


async def _python_verdict(spec: str, call: PolicyCall, criteria: CriteriaSet) -> Verdict:
    module_name, _, attr = spec.partition(":")
    function = getattr(importlib.import_module(module_name), attr)
    if inspect.iscoroutinefunction(function):
        answer = await function(call, criteria)
    else:  # off the event loop: the heartbeats go on
        answer = await asyncio.to_thread(function, call, criteria)
    if isinstance(answer, Verdict):
        return answer
    if isinstance(answer, Mapping):
        return Verdict.model_validate(answer)
    raise TypeError(f"{spec} returned {type(answer).__name__}, not a verdict ({{verdict, confidence, reasoning}})")


EVALUATOR_INSTRUCTIONS = """You review one tool call an AI agent wants to make, before it runs, \
against the criteria below. Answer with ONE JSON object and nothing else:
{"verdict": "approve" | "deny" | "escalate", "confidence": <0 to 1>, "reasoning": "<one or two sentences>"}
Approve only when an approve-when criterion clearly holds and no deny-when or escalate-when one does; \
deny when a deny-when criterion holds; escalate (a person decides) when an escalate-when criterion holds \
or you are unsure."""


def evaluator_prompt(call: PolicyCall, criteria: CriteriaSet) -> list[Message]:
    """The messages a model evaluator gets: the instructions, then the criteria and the call as JSON."""
    body = {
        "criteria": criteria.model_dump(mode="json", by_alias=True, exclude_none=True),
        "call": {"agent": call.agent, "sessionId": call.session_id, "tool": call.tool, "arguments": call.arguments},
    }
    return [
        Message(role=Role.SYSTEM, content=EVALUATOR_INSTRUCTIONS),
        Message(role=Role.USER, content=json.dumps(body, ensure_ascii=False, sort_keys=True)),
    ]


def parse_verdict(text: str) -> Verdict:
    """A model's answer as a verdict: one JSON object with exactly ``verdict``, ``confidence``
    and ``reasoning`` (no prose around it, no other keys); anything else is an error."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"the evaluator's answer is not one JSON object: {text[:200]!r}") from e
    if not isinstance(data, dict) or set(data) != {"verdict", "confidence", "reasoning"}:
        raise ValueError(f"the evaluator's answer is not {{verdict, confidence, reasoning}}: {text[:200]!r}")
    try:
        return Verdict.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"the evaluator's answer is not a verdict: {e.errors(include_url=False)[0]['msg']}") from e
