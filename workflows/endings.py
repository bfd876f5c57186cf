"""How a run ends, as pure functions of the workflow: the outcome event a streamed run
writes, the one concise failure a failed run raises, and the checkpoint status a run
leaves behind. Deterministic (``workflow.now()``, ``workflow.info()`` only)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.checkpoint.events import RunFinished, RunOutcome, RunPaused
    from durable_agents.checkpoint.format import CheckpointStatus, FinishReason
    from durable_agents.workflows.contracts import RunSummary


def outcome_event(summary: RunSummary) -> dict[str, Any]:
    """``RunFinished`` or ``RunPaused`` for ``summary``, as JSON."""
    outcome = RunOutcome.model_validate(summary.model_dump(exclude={"session_id"}))
    kind = RunPaused if summary.finish_reason == FinishReason.AWAITING_APPROVAL else RunFinished
    event = kind(session_id=summary.session_id, outcome=outcome, at=workflow.now())
    if isinstance(event, RunFinished):
        event.run_id = workflow.info().run_id
    return event.to_dict()


MAX_FAILURE_MESSAGE = 4000


def concise_failure(error: BaseException) -> ApplicationError:
    """The failure a run ends with: the first application error's message, type and details.

    Temporal would otherwise nest the activity's failure (with its stack trace and
    its own causes) inside the workflow's; a provider's long reply can then push the
    failure past Temporal's size limit, and the UI shows only that."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__ or getattr(cause, "cause", None)
    if cause is None:
        return ApplicationError(str(error)[:MAX_FAILURE_MESSAGE], type=FailureType.RUN_FAILED, non_retryable=True)
    message = cause.message
    if len(message) > MAX_FAILURE_MESSAGE:
        message = message[:MAX_FAILURE_MESSAGE] + f"… ({len(cause.message)} characters)"
    return ApplicationError(message, *cause.details, type=cause.type or FailureType.RUN_FAILED, non_retryable=True)


def status_after(reason: FinishReason) -> CheckpointStatus:
    """The checkpoint status a run leaves behind: aborted runs stay resumable."""
    if reason in (FinishReason.STOP, FinishReason.MAX_STEPS):
        return CheckpointStatus.FINISHED
    if reason == FinishReason.AWAITING_APPROVAL:
        return CheckpointStatus.AWAITING_APPROVAL
    return CheckpointStatus.IN_PROGRESS
