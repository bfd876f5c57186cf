"""One error taxonomy: every error class has a stable ``code``, a ``retryable``
flag and a ``FailureType``; every FailureType maps back to a typed error on the
client; activities honour ``retryable``; approvals are refused by type."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

import durable_agents.checkpoint.errors as checkpoint_errors
import durable_agents.errors as errors
from durable_agents.activities.contracts import ApprovalDecision, PendingApproval
from durable_agents.activities.deps import ActivityDeps, application_error
from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.errors import RETRYABLE_FAILURES, FailureType
from durable_agents.client.outcomes import FAILURE_ERRORS, failure_error, outcome_error
from durable_agents.workflows.approvals import ApprovalGate
from tests import agents
from tests.conftest import session_id

# Wire format: recorded histories and running workflows' retry policies hold these.
WIRE = {
    "DURABLE_AGENTS": "DurableAgentsError",
    "CONFIGURATION": "ConfigurationError",
    "CHECKPOINT_NOT_FOUND": "CheckpointNotFoundError",
    "STORE_CORRUPT": "StoreCorruptError",
    "STORE_UNAVAILABLE": "StoreUnavailableError",
    "SESSION_AWAITING_APPROVAL": "SessionAwaitingApprovalError",
    "SESSION_BUSY": "SessionBusyError",
    "SESSION_FINISHED": "SessionFinishedError",
    "APPROVAL_NOT_PENDING": "ApprovalNotPendingError",
    "AGENT_DRIFT": "AgentDriftError",
    "RESUME_TOOL_MISSING": "ResumeToolMissingError",
    "TOOL_DURABILITY": "ToolDurabilityError",
    "RUN_FAILED": "RunFailedError",
    "MODEL_PROVIDER_REQUEST": "ModelProviderRequestError",
    "MODEL_PROVIDER_RETRYABLE": "ModelProviderRetryableError",
    "MODEL_PROVIDER_MALFORMED_REPLY": "ModelProviderMalformedReply",
    "OUTPUT_INVALID": "OutputValidationError",
    "PROPAGATING_TOOL": "PropagatingToolError",
    "HOOK_FAILED": "HookError",
    "INVALID_RUN_INPUT": "InvalidRunInputError",
    "INVALID_DECISION": "InvalidDecisionError",
    "POLICY_VERSION_CONFLICT": "PolicyVersionConflictError",
}
CODES = {
    "DurableAgentsError": "DURABLE_AGENTS_ERROR",
    "ConfigurationError": "CONFIGURATION_ERROR",
    "CheckpointNotFoundError": "CHECKPOINT_NOT_FOUND",
    "StoreCorruptError": "STORE_CORRUPT",
    "StoreUnavailableError": "STORE_UNAVAILABLE",
    "SessionAwaitingApprovalError": "SESSION_AWAITING_APPROVAL",
    "SessionBusyError": "SESSION_BUSY",
    "SessionFinishedError": "SESSION_FINISHED",
    "ApprovalNotPendingError": "APPROVAL_NOT_PENDING",
    "AgentDriftError": "AGENT_DRIFT",
    "ResumeToolMissingError": "RESUME_TOOL_MISSING",
    "ToolDurabilityError": "TOOL_DURABILITY_ERROR",
    "RunFailedError": "RUN_FAILED",
    "ModelProviderError": "MODEL_PROVIDER_ERROR",
    "OutputValidationError": "OUTPUT_INVALID",
    "PropagatingToolError": "PROPAGATING_TOOL_ERROR",
    "HookFailedError": "HOOK_FAILED",
    "InvalidRunInputError": "INVALID_RUN_INPUT",
    "InvalidDecisionError": "INVALID_DECISION",
    "DecisionTooLargeError": "DECISION_TOO_LARGE",
    "PolicyVersionConflictError": "POLICY_VERSION_CONFLICT",
}
RETRYABLE_CLASSES = {"StoreUnavailableError"}


def _error_classes() -> list[type[errors.DurableAgentsError]]:
    found = {
        cls
        for module in (checkpoint_errors, errors)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, errors.DurableAgentsError)
    }
    return sorted(found, key=lambda c: c.__name__)


ERROR_CLASSES = _error_classes()

SAMPLES: dict[str, errors.DurableAgentsError] = {
    "DurableAgentsError": errors.DurableAgentsError("boom"),
    "ConfigurationError": errors.ConfigurationError("set it up"),
    "CheckpointNotFoundError": errors.CheckpointNotFoundError("no step 9", session_id="s1", kept_steps=[1, 2]),
    "StoreCorruptError": errors.StoreCorruptError("bad row"),
    "StoreUnavailableError": errors.StoreUnavailableError("db down"),
    "SessionAwaitingApprovalError": errors.SessionAwaitingApprovalError("s1", "ap-1"),
    "SessionBusyError": errors.SessionBusyError("s1"),
    "SessionFinishedError": errors.SessionFinishedError("s1", "booker", "stop"),
    "ApprovalNotPendingError": errors.ApprovalNotPendingError("s1", "ap-2", "ap-1"),
    "AgentDriftError": errors.AgentDriftError("drifted"),
    "ResumeToolMissingError": errors.ResumeToolMissingError("tool gone"),
    "ToolDurabilityError": errors.ToolDurabilityError("lost"),
    "RunFailedError": errors.RunFailedError("failed", session_id="s1"),
    "ModelProviderError": errors.ModelProviderError("400", session_id="s1"),
    "OutputValidationError": errors.OutputValidationError("bad answer", session_id="s1"),
    "PropagatingToolError": errors.PropagatingToolError("provider down", session_id="s1"),
    "HookFailedError": errors.HookFailedError("hook raised", session_id="s1"),
    "InvalidRunInputError": errors.InvalidRunInputError("sessionId: Field required"),
    "InvalidDecisionError": errors.InvalidDecisionError("s1", "ap-1", "amount_cents: 'lots' is not of type 'integer'"),
    "DecisionTooLargeError": errors.DecisionTooLargeError("s1", "ap-1", "edited arguments", 300_000, 262_144),
    "PolicyVersionConflictError": errors.PolicyVersionConflictError(
        "agent 'support'", 3, 4, changed_by="alice", changed_at=datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    ),
}


def test_every_failure_type_keeps_its_wire_value():
    assert {m.name: m.value for m in FailureType} == WIRE


def test_every_error_class_has_a_stable_code_a_retryable_flag_and_a_failure_type():
    assert {c.__name__ for c in ERROR_CLASSES} == set(CODES), "a new error class needs a pinned code here"
    for cls in ERROR_CLASSES:
        assert cls.code == CODES[cls.__name__], cls
        assert isinstance(cls.retryable, bool), cls
        assert cls.retryable == (cls.__name__ in RETRYABLE_CLASSES), cls
        assert isinstance(cls.failure_type, FailureType), cls
        assert cls.failure_type.retryable == cls.retryable, cls
    assert len({c.code for c in ERROR_CLASSES}) == len(ERROR_CLASSES)
    # every failure type but the provider's transport ones is some class's own
    owned = {c.failure_type for c in ERROR_CLASSES}
    assert set(FailureType) - owned == {
        FailureType.MODEL_PROVIDER_RETRYABLE,
        FailureType.MODEL_PROVIDER_MALFORMED_REPLY,
    }
    assert {FailureType.STORE_UNAVAILABLE, FailureType.MODEL_PROVIDER_RETRYABLE} == RETRYABLE_FAILURES


def test_the_client_mapping_covers_every_failure_type():
    assert set(FAILURE_ERRORS) == set(FailureType), "map every FailureType to a typed error in _outcomes.py"
    for kind in FailureType:
        mapped = failure_error("s1", ApplicationError("why", type=kind))
        assert isinstance(mapped, errors.DurableAgentsError), kind
        assert mapped.failure_type == kind or isinstance(mapped, errors.ModelProviderError), kind


@pytest.mark.parametrize("name", sorted(CODES))
def test_an_error_raised_in_an_activity_comes_back_as_itself(name):
    error = SAMPLES[name]
    failure = application_error(error)
    assert failure.type == error.failure_type and failure.non_retryable is (not error.retryable)
    assert failure.message == error.message
    back = failure_error("s1", failure)
    assert type(back) is type(error)
    if isinstance(error, errors.CheckpointNotFoundError):
        assert (back.session_id, back.kept_steps) == ("s1", [1, 2])
    if isinstance(error, errors.SessionAwaitingApprovalError):
        assert back.approval_id == "ap-1"
    if isinstance(error, errors.ApprovalNotPendingError):
        assert (back.approval_id, back.pending_approval_id) == ("ap-2", "ap-1")
    if isinstance(error, errors.InvalidDecisionError):
        assert (back.approval_id, back.problem, str(back)) == ("ap-1", error.problem, str(error))
    if isinstance(error, errors.DecisionTooLargeError):
        assert (back.part, back.size, back.limit) == ("edited arguments", 300_000, 262_144)
    if isinstance(error, errors.PolicyVersionConflictError):
        assert (back.scope, back.expected_version, back.actual_version, back.changed_by, back.changed_at, str(back)) == (
            error.scope, 3, 4, "alice", error.changed_at, str(error)
        )  # fmt: skip


def test_an_unknown_failure_type_is_a_run_failure_naming_it():
    mapped = failure_error("s1", ApplicationError("kaput", type="ValueError"))
    assert type(mapped) is errors.RunFailedError and mapped.cause_type == "ValueError"
    assert type(failure_error("s1", ApplicationError("kaput"))) is errors.RunFailedError


# -- activities honour ``retryable`` ----------------------------------------------


def _deps(tmp_path) -> ActivityDeps:
    return ActivityDeps(store=SqliteStore(tmp_path / "s.db"), agents={})


def _failing(*raised: Exception):
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= len(raised):
            raise raised[len(calls) - 1]
        return "stored"

    return fn, calls


async def test_in_store_fails_retryably_only_for_a_retryable_error(tmp_path):
    deps = _deps(tmp_path)
    for error in (errors.StoreUnavailableError("down"), errors.StoreCorruptError("bad")):
        fn, _ = _failing(error)
        with pytest.raises(ApplicationError) as raised:
            await deps.in_store(fn)
        assert raised.value.type == error.failure_type and raised.value.non_retryable is (not error.retryable)
    fn, _ = _failing(OSError("disk"))
    with pytest.raises(OSError):  # untyped: Temporal retries it as it is
        await deps.in_store(fn)


async def test_record_until_stored_rides_out_a_retryable_error(tmp_path):
    fn, calls = _failing(errors.StoreUnavailableError("down"), errors.StoreUnavailableError("down"), OSError("io"))
    assert await _deps(tmp_path).record_until_stored(fn) == "stored"
    assert len(calls) == 4


async def test_record_until_stored_fails_a_non_retryable_error_at_once(tmp_path):
    fn, calls = _failing(errors.StoreCorruptError("bad row"))
    with pytest.raises(ApplicationError) as raised:
        await _deps(tmp_path).record_until_stored(fn)
    assert raised.value.type == FailureType.STORE_CORRUPT and raised.value.non_retryable and len(calls) == 1


async def test_record_until_stored_is_bounded(tmp_path):
    fn, calls = _failing(*[errors.StoreUnavailableError("down")] * 100)
    with pytest.raises(ApplicationError) as raised:
        await _deps(tmp_path).record_until_stored(fn, max_seconds=0.5)
    # gave up within the bound, leaving the retry to Temporal
    assert raised.value.type == FailureType.STORE_UNAVAILABLE and not raised.value.non_retryable
    assert 2 <= len(calls) < 10


# -- approvals are refused by type, not by message -----------------------------------


def _gate(approval_id: str) -> ApprovalGate:
    gate = ApprovalGate()
    gate.pending = PendingApproval(
        approval_id=approval_id,
        session_id="s1",
        agent="a",
        tool_name="t",
        tool_call_id="c1",
        arguments={},
        requested_at="2026-01-01T00:00:00Z",
    )
    return gate


def test_the_approval_validator_raises_a_typed_failure():
    gate = _gate("ap-1")
    gate.validate(ApprovalDecision(approval_id="ap-1", approved=True))  # the pending one: accepted
    with pytest.raises(ApplicationError) as raised:
        gate.validate(ApprovalDecision(approval_id="ap-2", approved=True))
    assert raised.value.type == FailureType.APPROVAL_NOT_PENDING and raised.value.details == ("ap-2", "ap-1")
    mapped = outcome_error("s1", WorkflowUpdateFailedError(raised.value))
    assert isinstance(mapped, errors.ApprovalNotPendingError) and mapped.pending_approval_id == "ap-1"
    gate._decisions["ap-1"] = ApprovalDecision(approval_id="ap-1", approved=True)
    with pytest.raises(ApplicationError, match="already decided") as again:
        gate.validate(ApprovalDecision(approval_id="ap-1", approved=True))
    assert again.value.type == FailureType.APPROVAL_NOT_PENDING


async def test_a_refused_update_crosses_temporal_by_type(run_worker):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)
        handle = client.temporal.get_workflow_handle(sid)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("decide", ApprovalDecision(approval_id="bogus", approved=True))
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == FailureType.APPROVAL_NOT_PENDING
        assert list(cause.details) == ["bogus", paused.approval_id]
        mapped = outcome_error(sid, refused.value)
        assert isinstance(mapped, errors.ApprovalNotPendingError)
        assert (mapped.approval_id, mapped.pending_approval_id) == ("bogus", paused.approval_id)
