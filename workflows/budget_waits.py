"""A model turn that waits for its provider's rate-limit budget, on the workflow's side.

A model turn's activity never waits for budget at the expense of the call's own timeout
(``model_timeout_seconds``): a call that must wait and has no slack in its attempt hands the
wait back, a failure of type ``BudgetWait`` saying how long. The run then waits on a durable
timer (holding no worker slot), says so in its Current Details, and schedules the turn again,
a new activity whose attempts and timeout start afresh: a wait for budget is never counted as
a failed attempt. From then on (this run's worker has budgets) its model turns get
:data:`BUDGET_WAIT_SLACK_SECONDS` more start-to-close time, and a call waits that long in its
activity (heartbeating, in its fair turn) before it hands a longer wait back. A run whose
worker has no budgets never sees a hand-off: its turns keep their timeout exactly.
At most :data:`MAX_WORKFLOW_WAITS` hand-offs per turn, then the run fails (never forever).
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
        handed_off,
    )

__all__ = [
    "BUDGET_WAIT_PATCH",
    "BUDGET_WAIT_SIGNAL",
    "BUDGET_WAIT_SLACK_SECONDS",
    "BudgetWaitNotice",
    "BudgetWaits",
    "show_wait",
]

BUDGET_WAIT_PATCH = "model-turn-waits-for-budget"
"""Marks a run that waited on a timer for a model's budget (older histories never did)."""

T = TypeVar("T")


class BudgetWaits:
    """One run's model turns and the waits for budget they hand back."""

    def __init__(self) -> None:
        self.slack = 0.0
        """Seconds added to a model turn's start-to-close timeout: 0 until the run's first hand-off."""

    async def turn(self, schedule: Callable[[float], Awaitable[T]], show: Callable[[str], None]) -> T:
        """``schedule(slack)`` (a model turn's activity), again after each wait it hands back."""
        waits = 0
        while True:
            try:
                return await schedule(self.slack)
            except ActivityError as e:
                notice = handed_off(e)
                if notice is None or waits >= MAX_WORKFLOW_WAITS or not workflow.patched(BUDGET_WAIT_PATCH):
                    raise
                waits += 1
                self.slack = BUDGET_WAIT_SLACK_SECONDS  # this run's worker has budgets: its calls may wait there
                show(f"{notice.line()} on a timer")
                await workflow.sleep(timedelta(seconds=notice.expected_seconds))


def show_wait(details: str, notice: BudgetWaitNotice) -> str:
    """The run's Current Details with what a waiting call says (its wait over: as they were)."""
    line = notice.line()
    return f"{details}\n{line}" if line else details
