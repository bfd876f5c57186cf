"""Search attributes a run sets so it can be found in the Temporal UI."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributeKey

AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
AGENT_STATUS = SearchAttributeKey.for_keyword("AgentStatus")
AGENT_STEP = SearchAttributeKey.for_int("AgentStep")
PENDING_APPROVAL_ID = SearchAttributeKey.for_keyword("PendingApprovalId")
AGENT_FINISH_REASON = SearchAttributeKey.for_keyword("AgentFinishReason")

AGENT_STORE = SearchAttributeKey.for_keyword("AgentStore")

RUN_ATTRIBUTES: dict[str, str] = {
    AGENT_NAME.name: "Keyword",
    AGENT_STATUS.name: "Keyword",
    AGENT_STEP.name: "Int",
    PENDING_APPROVAL_ID.name: "Keyword",
    AGENT_FINISH_REASON.name: "Keyword",
}
"""What a run upserts as it goes: set only when all five are registered."""
SEARCH_ATTRIBUTES: dict[str, str] = {**RUN_ATTRIBUTES, AGENT_STORE.name: "Keyword"}
"""Name → type, as `temporal operator search-attribute create` takes them. ``AgentStore``
(the id of the checkpoint store a run keeps its session in, set by the client that starts
it) is optional: with it, ``approvals`` asks Temporal only for waiting runs of other
stores, instead of paging through every waiting run."""


def publish(
    enabled: bool,
    *,
    agent: str,
    status: str,
    step: int,
    approval_id: str | None,
    finish_reason: str | None = None,
) -> None:
    """Upsert the run's search attributes (only when the namespace has them registered).

    ``status`` is the checkpoint status (``in-progress``, ``awaiting-approval``,
    ``finished``) and nothing else; how a run ended is ``finish_reason``. A
    closed execution keeps its last values: search for waiting runs with
    ``AgentStatus = "awaiting-approval" AND ExecutionStatus = "Running"``.
    """
    if not enabled:
        return
    workflow.upsert_search_attributes(
        [
            AGENT_NAME.value_set(agent),
            AGENT_STATUS.value_set(status),
            AGENT_STEP.value_set(step),
            PENDING_APPROVAL_ID.value_set(approval_id) if approval_id else PENDING_APPROVAL_ID.value_unset(),
            AGENT_FINISH_REASON.value_set(finish_reason) if finish_reason else AGENT_FINISH_REASON.value_unset(),
        ]
    )
