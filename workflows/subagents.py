"""Sub-agent calls: a tool call that runs another agent as a child workflow.

Plain helpers of :class:`~durable_agents.workflows.agent_run.AgentRunWorkflow`, whose
sub-agent section does the steps (deterministic code only). For a call to a sub-agent
tool the run:

1. starts it (``start_subagent``: the task goes to the store, keyed by the
   child's session ``<session>/<position>``; a call needing no child run gets
   its result there);
2. runs the child, the same ``AgentRun`` workflow type, under that session id
   as workflow id (Temporal's record of the start makes a replayed or retried
   parent re-attach to it: it is never started twice);
3. follows the child's approvals: the child signals this run when it pauses
   (and when it goes on); this run saves its own checkpoint as
   ``awaiting-approval`` with the child's approval id and a snapshot, answers
   ``pending_approval`` and ``decide`` for it, and passes the decision to the
   child (a signal), up through every level of nesting;
4. records the child's answer as the call's result (``record_subagent_result``).

Cancelling the run cancels the child (its calls get ``cancelled`` results,
then this call); closing the run otherwise (terminate, failure) terminates it
(parent close policy), and the session's next run resumes the child's session.
Only runs with a sub-agent call take these paths (``workflow.patched``).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowHandle

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.subagent_contracts import SubagentApprovalEvent
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.checkpoint.format import ToolCall
    from durable_agents.workflows.contracts import RunSummary
    from durable_agents.workflows.search import AGENT_STORE

SUBAGENTS_PATCH = "subagents-as-child-workflows"
CHILD_STORE_PATCH = "subagent-store-attribute"
LIVE_CHILD_RETRIES = 30
"""Seconds a start waits for the child's previous run (its parent's closed run's) to be terminated."""

Child = ChildWorkflowHandle[Any, RunSummary]


class SubagentRelays:
    """Deterministic state: what each child last said, and whose approval is shown here."""

    def __init__(self) -> None:
        self.events: dict[str, SubagentApprovalEvent] = {}
        """The latest word of each child (by session): the approval it waits on, or that it went on."""
        self.showing: str | None = None
        """The child whose approval this run shows (one at a time)."""


def child_failure(call: ToolCall, child_id: str, error: ChildWorkflowError) -> ApplicationError:
    """The child's failure as this run's: its cause's type (so the client raises the same typed
    error) and message, naming the sub-agent. Both sessions stay resumable: resuming this one
    resumes the child's session in a new run of it."""
    cause: BaseException | None = error.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = getattr(cause, "cause", None)
    why = cause.message if cause is not None else f"its run ended: {error.cause or error}"
    return ApplicationError(
        f"sub-agent {call.name} (session {child_id}) failed: {why}",
        *(cause.details if cause is not None else ()),
        type=(cause.type if cause is not None else None) or FailureType.RUN_FAILED,
        non_retryable=True,
    )


def store_attribute() -> TypedSearchAttributes | None:
    """The parent's ``AgentStore`` for its child (a child inherits none of its parent's
    attributes): so that listing approvals need not ask visibility for waiting sub-agents
    of this store either. Set only where the parent carries it (the attribute is registered)."""
    store = workflow.info().typed_search_attributes.get(AGENT_STORE)
    if store is None or not workflow.patched(CHILD_STORE_PATCH):
        return None
    return TypedSearchAttributes([SearchAttributePair(AGENT_STORE, store)])
