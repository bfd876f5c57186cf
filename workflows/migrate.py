"""A short workflow that moves a session to another build, run on that build's worker
(the client starts it pinned there), so the drift check uses that build's agent."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from durable_agents.activities.contracts import MigrateSessionInput, MigrateSessionOutput
    from durable_agents.activities.migrate import MigrateActivities
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.workflows import options

MIGRATE_WORKFLOW = "MigrateSession"


@workflow.defn(name=MIGRATE_WORKFLOW, sandboxed=options.SANDBOXED)
class MigrateSessionWorkflow:
    @workflow.run
    async def run(self, inp: MigrateSessionInput) -> MigrateSessionOutput:
        return await workflow.execute_activity_method(
            MigrateActivities.migrate_session,
            inp,
            start_to_close_timeout=timedelta(seconds=60),
            # a refusal (drift with on_agent_drift="error", a missing tool, no such agent) is final
            retry_policy=RetryPolicy(
                maximum_attempts=5,
                non_retryable_error_types=[
                    FailureType.AGENT_DRIFT,
                    FailureType.RESUME_TOOL_MISSING,
                    FailureType.CHECKPOINT_NOT_FOUND,
                    FailureType.CONFIGURATION,
                    FailureType.STORE_CORRUPT,
                ],
            ),
            summary=f"migrate {inp.session_id} to {inp.to_build}",
        )
