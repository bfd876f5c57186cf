"""A short workflow that forks a session on a worker holding the store."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import durable_agents.activities.contracts as c
    from durable_agents.activities.fork import ForkActivities
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.workflows import options
    from durable_agents.workflows.contracts import FORK_WORKFLOW


@workflow.defn(name=FORK_WORKFLOW, sandboxed=options.SANDBOXED)
class ForkSessionWorkflow:
    @workflow.run
    async def run(self, inp: c.ForkSessionInput) -> c.ForkSessionOutput:
        return await workflow.execute_activity_method(
            ForkActivities.fork_session,
            inp,
            start_to_close_timeout=timedelta(seconds=60),
            # a refused fork (unknown step, taken id) is final; store hiccups are retried
            retry_policy=RetryPolicy(
                maximum_attempts=5,
                non_retryable_error_types=[
                    FailureType.CHECKPOINT_NOT_FOUND,
                    FailureType.CONFIGURATION,
                    FailureType.STORE_CORRUPT,
                ],
            ),
            summary=f"fork {inp.session_id} at step {inp.from_step}",
        )
