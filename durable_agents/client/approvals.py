"""Which approvals wait for a decision: the store's sessions joined with Temporal's
visibility (``AgentClient.pending_approvals`` / ``waiting_approvals``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence

from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError

from durable_agents.activities.contracts import PendingApproval
from durable_agents.agent.agent import is_agent_name
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.stores._common import gc_paused
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.client.outcomes import pending_in
from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW
from durable_agents.workflows.search import AGENT_NAME, AGENT_STORE, PENDING_APPROVAL_ID

ASK_RUN_SECONDS = 5.0
"""How long listing waits, in all, for the runs the store does not know to answer."""
ASK_AT_ONCE = 16

AskRun = Callable[[str], Awaitable[PendingApproval | None]]
"""Asks one run (by session id) for its pending approval: ``AgentClient.pending_approval``."""


def store_approvals(store: CheckpointStore, agent: str | None = None) -> list[PendingApproval]:
    """Every session the store records as waiting for a decision."""
    with gc_paused():  # ten thousand sessions' objects, kept: see gc_paused
        found = (pending_in(w.header, w.last_turn) for w in store.waiting_sessions(agent))
        return once_each(p for p in found if p is not None)


async def waiting_approvals(
    temporal: Client,
    store: CheckpointStore,
    task_queue: str,
    ask: AskRun,
    agent: str | None = None,
    *,
    visibility: bool = True,
    store_attribute: bool = False,
    ask_seconds: float = ASK_RUN_SECONDS,
) -> list[PendingApproval]:
    """The store's waiting sessions plus the live runs on ``task_queue`` that visibility
    finds waiting and the store does not know (``visibility``: our search attributes are
    registered), each asked with ``ask`` (see :func:`_ask_runs`), oldest first. With
    ``store_attribute`` (``AgentStore`` is registered), visibility is asked only for runs
    started on other stores (or before the attribute existed): the store's own are not
    paged through again."""
    if agent is not None and not is_agent_name(agent):  # never part of the query's text
        raise ConfigurationError(f"no agent can be named {agent!r}: agent names are letters, digits, _ . -")
    found = {p.session_id: p for p in await asyncio.to_thread(store_approvals, store, agent)}
    if visibility:
        query = (
            f'WorkflowType = "{AGENT_RUN_WORKFLOW}" AND ExecutionStatus = "Running" '
            f'AND PendingApprovalId IS NOT NULL AND TaskQueue = "{task_queue}"'
        )
        if agent is not None:
            query += f' AND AgentName = "{agent}"'
        if store_attribute:
            query += f' AND ({AGENT_STORE.name} IS NULL OR {AGENT_STORE.name} != "{store.store_id}")'
        unknown = [e async for e in temporal.list_workflows(query) if e.id not in found]
        for execution, pending in zip(unknown, await _ask_runs(ask, unknown, ask_seconds), strict=True):
            if pending is not None:
                found[execution.id] = pending
    return sorted(once_each(found.values()), key=lambda p: p.requested_at)


async def _ask_runs(
    ask: AskRun, executions: Sequence[WorkflowExecution], seconds: float
) -> list[PendingApproval | None]:
    """Each run's pending approval, asked concurrently (``ASK_AT_ONCE`` at a time) within one
    deadline (``seconds``: ``AgentClient.ASK_RUN_SECONDS``); a run no worker answers for is
    described from its search attributes."""
    gate = asyncio.Semaphore(ASK_AT_ONCE)

    async def gated(execution: WorkflowExecution) -> PendingApproval | None:
        async with gate:
            return await ask(execution.id)

    tasks = [asyncio.ensure_future(gated(e)) for e in executions]
    if not tasks:
        return []
    _, late = await asyncio.wait(tasks, timeout=seconds)
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    answers = []
    for execution, task in zip(executions, tasks, strict=True):
        if task in late or isinstance(task.exception(), RPCError):
            answers.append(pending_from_visibility(execution))  # no worker answers
        elif (error := task.exception()) is not None:
            raise error  # not "no answer": a bug to see
        else:
            answers.append(task.result())
    return answers


def pending_from_visibility(execution: WorkflowExecution) -> PendingApproval | None:
    """A waiting run nobody can be asked about (no worker polls): its search attributes."""
    approval_id = execution.typed_search_attributes.get(PENDING_APPROVAL_ID)
    if not approval_id:
        return None
    return PendingApproval(
        approval_id=approval_id,
        session_id=execution.id,
        agent=execution.typed_search_attributes.get(AGENT_NAME) or "",
        tool_name="(unknown: no worker answered; start one to see the call)",
        tool_call_id="",
        arguments={},
        requested_at=execution.start_time,
    )


def once_each(found: Iterable[PendingApproval]) -> list[PendingApproval]:
    """One entry per approval: a sub-agent's approval is listed under the top-most session
    waiting on it (with ``subagent_session_id`` naming where the call is), not again under
    its own session or the ones between."""
    by_id: dict[str, PendingApproval] = {}
    for pending in found:
        kept = by_id.get(pending.approval_id)
        higher = (
            kept is not None
            and kept.parent_session_id is not None
            and (pending.parent_session_id is None or len(pending.session_id) < len(kept.session_id))
        )
        if kept is None or higher:
            by_id[pending.approval_id] = pending
    return list(by_id.values())
