"""A model turn that waits for its provider's rate-limit budget, on the workflow's side.

A call waits for its budget inside its model activity for at most the slack this adds to
the turn's start-to-close timeout (:data:`BUDGET_WAIT_SLACK_SECONDS`), so the wait never
eats the call's own ``model_timeout_seconds``. A longer wait comes back as a failure of type
``BudgetWait`` saying how long: the run then waits on a durable timer (holding no worker
slot), says so in its Current Details, and schedules the turn again, a new activity whose
attempts and timeout start afresh: a wait for budget is never counted as a failed attempt.
At most :data:`MAX_WORKFLOW_WAITS` such waits per turn, then the run fails (never forever).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.budget_wait import (
        BUDGET_WAIT_SIGNAL,
        BUDGET_WAIT_SLACK_SECONDS,
        MAX_WORKFLOW_WAITS,
        BudgetWaitNotice,
        handed_off_seconds,
    )

__all__ = [
    "BUDGET_WAIT_PATCH",
    "BUDGET_WAIT_SIGNAL",
    "BUDGET_WAIT_SLACK_SECONDS",
    "BudgetWaitNotice",
    "show_wait",
    "waiting_for_budget",
]

BUDGET_WAIT_PATCH = "model-turn-waits-for-budget"
"""Marks a run that waited on a timer for a model's budget (older histories never did)."""

T = TypeVar("T")


async def waiting_for_budget(schedule: Callable[[], Awaitable[T]], show: Callable[[str], None]) -> T:
    """``schedule()`` (a model turn's activity), again after each wait its activity hands back."""
    waits = 0
    while True:
        try:
            return await schedule()
        except ActivityError as e:
            seconds = handed_off_seconds(e)
            if seconds is None or waits >= MAX_WORKFLOW_WAITS or not workflow.patched(BUDGET_WAIT_PATCH):
                raise
            waits += 1
            show(f"waiting for the model's rate-limit budget: about {seconds:.0f}s on a timer")
            await workflow.sleep(timedelta(seconds=seconds))


def show_wait(details: str, notice: BudgetWaitNotice) -> str:
    """The run's Current Details with what a waiting call says (its wait over: as they were)."""
    line = notice.line()
    return f"{details}\n{line}" if line else details
