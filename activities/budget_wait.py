"""A model call's wait for its provider budget, inside the model activity.

The call waits in its activity (:class:`durable_agents.providers.budgets.RateLimiter`),
heartbeating (the activity's own heartbeats go on), for at most the slack its attempt has
over the call's own timeout (the workflow gives :data:`BUDGET_WAIT_SLACK_SECONDS` once its
run has handed a wait back; see ``durable_agents.workflows.budget_waits``): so the wait never
eats the call's ``model_timeout_seconds``. A longer wait ends the attempt with a
non-retryable ``ApplicationError`` of type :data:`BUDGET_WAIT_ERROR` (details: a
:class:`BudgetWaitNotice`; category ``BENIGN``, so the worker logs the hand-off as one INFO
line, not as a failed activity with its traceback); the workflow then waits on a durable timer, holding no slot at all,
and schedules the turn again. A wait holds no workflow task slot in either place.

When it has waited :data:`NOTICE_AFTER_SECONDS` in its activity, the call signals its run once
(:data:`BUDGET_WAIT_SIGNAL`), which shows what it waits for, and about how long, in its
Current Details until the run's next step replaces them. The wait is recorded in the metric
``durable_agents_budget_wait_seconds`` and the model turn's span (``durable_agents.budget.wait_ms``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from durable_agents.activities import metrics, tracing
from durable_agents.activities.deps import attempt_time_left
from durable_agents.checkpoint.errors import FailureType
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.budgets import BudgetCall, BudgetExceeded, RateLimiter
from durable_agents.providers.registry import split_model_string

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from durable_agents.checkpoint.format import RunConfig

BUDGET_WAIT_SIGNAL = "budget_wait"
BUDGET_WAIT_ERROR = "BudgetWait"
"""The type of the failure that hands a long wait to the workflow (never seen by a client)."""
BUDGET_WAIT_SLACK_SECONDS = 30.0
"""What the workflow adds to a model turn's start-to-close timeout: the longest a call waits
for its budget inside its activity."""
HANDOFF_MIN_SECONDS = 1.0
"""The shortest timer a handed-off wait sets (a call waiting its turn behind others knows no time)."""
NOTICE_AFTER_SECONDS = 2.0
"""A wait shorter than this is not shown in the run's Current Details (no signal)."""
MAX_WORKFLOW_WAITS = 120
"""The most times one model turn waits on the workflow's timer before the run fails (each
wait is at least the activity's slack: an hour and more of waiting)."""


class BudgetWaitNotice(BaseModel):
    """What a waiting model call tells its run (signal :data:`BUDGET_WAIT_SIGNAL`)."""

    model: str
    waiting: bool
    """True: it waits; False: its wait is over."""
    reason: str = ""
    expected_seconds: float = 0.0
    waited_seconds: float = 0.0

    def line(self) -> str:
        """The Current Details line (empty when the wait is over)."""
        if not self.waiting:
            return ""
        expected = f", about {self.expected_seconds:.0f}s more" if self.expected_seconds >= 1 else ""
        return f"waiting for the {self.model} rate-limit budget ({self.reason}{expected})"


def handed_off(error: BaseException) -> BudgetWaitNotice | None:
    """What a model turn's failure asks its workflow to wait for (None: not a budget wait).
    ``error`` is what the workflow caught (an ``ActivityError`` whose cause is ours)."""
    cause = getattr(error, "cause", None)
    if not isinstance(cause, ApplicationError) or cause.type != BUDGET_WAIT_ERROR:
        return None
    details: list[Any] = list(cause.details or [])
    try:
        return BudgetWaitNotice.model_validate(details[0])
    except (IndexError, ValueError):
        return BudgetWaitNotice(model="the model", waiting=True, expected_seconds=HANDOFF_MIN_SECONDS)


class _ActivityObserver:
    def __init__(self, model: str, agent: str) -> None:
        self.model, self.agent = model, agent
        self.shown = False

    async def waiting(self, waited: float, expected: float, reason: str) -> None:
        if waited >= NOTICE_AFTER_SECONDS and not self.shown:
            self.shown = True
            await _tell_run(BudgetWaitNotice(model=self.model, waiting=True, reason=reason, expected_seconds=expected))

    async def waited(self, seconds: float) -> None:
        # no second signal: the run's next step (its tools, its end) says what it does next
        metrics.budget_wait(self.agent, self.model, seconds)
        tracing.budget_waited(seconds)

    async def refused(self, status: int) -> None:
        metrics.budget_refusal(self.agent, self.model, status)


async def _tell_run(notice: BudgetWaitNotice) -> None:
    """Signal the activity's run; a run that is gone (or a client we cannot reach) is no failure."""
    try:
        info = activity.info()
        if info.workflow_id is None:  # (a standalone activity: no run to tell)
            return
        handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        await handle.signal(BUDGET_WAIT_SIGNAL, notice)
    except Exception as e:  # noqa: BLE001 - showing the wait never fails the call
        activity.logger.debug("could not show the budget wait in the run: %s", e)


async def within_budget(
    limiter: RateLimiter | None,
    config: RunConfig,
    request: ModelRequest,
    send: Callable[[], Awaitable[ModelResponse]],
) -> ModelResponse:
    """``send()`` once the call's budget has room (at once without one)."""
    provider = split_model_string(config.model)[0]
    if limiter is None or limiter.budget_for(provider, request.model) is None:
        return await send()
    info = activity.info() if activity.in_activity() else None
    holder = f"{info.workflow_id}/{info.activity_id}" if info is not None else ""
    call = BudgetCall(provider, request.model, config.agent, request.session_id, request.step, holder)
    # the attempt's time over the call's own timeout (the workflow's slack): the most it may wait here
    bound = max(attempt_time_left() - config.model_timeout_seconds - 1.0, 0.0)
    observer = _ActivityObserver(f"{provider}:{request.model}", config.agent)
    began = time.monotonic()
    try:
        return await limiter.call(call, request, send, observer, max_wait=min(bound, 1e9))
    except BudgetExceeded as e:
        if e.never:
            raise ApplicationError(
                f"{e}: the call can never fit its budget; raise the Budget's limit or lower the agent's max_tokens",
                type=FailureType.CONFIGURATION,
                non_retryable=True,
            ) from e
        waited = time.monotonic() - began
        metrics.budget_wait(config.agent, f"{provider}:{request.model}", waited)
        notice = BudgetWaitNotice(
            model=f"{provider}:{request.model}",
            waiting=True,
            reason=e.reason,
            expected_seconds=max(e.expected, HANDOFF_MIN_SECONDS),
            waited_seconds=waited,
        )
        # a normal wait, not a crash: one INFO line here; BENIGN keeps the SDK's "Completing activity
        # as failed" (and its traceback) at DEBUG, out of the failure metrics and the span's ERROR status
        activity.logger.info(
            "model call for %s waits for its rate-limit budget (%s, about %.0fs more): the run waits on a timer "
            "and asks again",
            notice.model,
            notice.reason,
            notice.expected_seconds,
        )
        raise ApplicationError(
            f"{e}; the run waits on a timer and asks again",
            notice,
            type=BUDGET_WAIT_ERROR,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        ) from None
