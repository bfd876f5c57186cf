"""A retried attempt frees its run from a dead worker's sticky queue.

Temporal sends a run's workflow tasks to the queue of the worker that holds it in its
cache (its sticky queue). When that worker dies mid-activity, the activity is retried on
another worker, but the workflow task that follows its result still goes to the dead
worker's queue and waits there for the sticky schedule-to-start timeout (5 s by default)
before any worker gets it. A retried attempt of one of our activities is the sign that
its worker may be gone: it asks the server to reset the run's stickiness first
(``ResetStickyTaskQueue``), so the next workflow task goes to the normal queue at once.
If the old worker is alive after all, that costs one replay of the run's history on
whichever worker takes the task; nothing else changes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

OUR_ACTIVITIES = "durable_agents."
RESET_TIMEOUT = timedelta(seconds=2)


class UnstickRetries(Interceptor):
    """A worker interceptor (the plugin adds it): see the module docstring."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _UnstickInbound(next)


class _UnstickInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.attempt > 1 and not info.is_local and info.activity_type.startswith(OUR_ACTIVITIES):
            await _reset_sticky(info)
        return await self.next.execute_activity(input)


async def _reset_sticky(info: activity.Info) -> None:
    """Best effort: a refusal or a timeout leaves the run as it was (sticky until Temporal's timeout)."""
    namespace, workflow_id, run_id = info.workflow_namespace, info.workflow_id, info.workflow_run_id
    if namespace is None or workflow_id is None or run_id is None:  # not started by a workflow
        return
    try:
        client = activity.client()
        await client.workflow_service.reset_sticky_task_queue(
            ResetStickyTaskQueueRequest(
                namespace=namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
            ),
            timeout=RESET_TIMEOUT,
        )
    except Exception as e:  # noqa: BLE001 - an optimisation: never fail the attempt for it
        activity.logger.debug("could not reset the sticky queue of %s: %s", info.workflow_id, e)
