"""Worker Versioning on the worker's side: which build this worker is, what a run records
of it, and an auto-upgrade agent's runs (the ``migrate`` activity is in ``migrate``).

A versioned worker (``build_worker(deployment=…)``) runs each workflow pinned by default;
``Agent(versioning="auto-upgrade")`` runs are switched to auto-upgrade when they begin.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import VersioningBehavior as ProtoBehavior
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import UpdateWorkflowExecutionOptionsRequest
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError

from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.format import BuildRecord


@dataclass
class WorkerBuild:
    """The Worker Deployment Version of the worker these activities run on (None:
    unversioned). Set by ``DurableAgentsPlugin`` from the worker's ``deployment_config``."""

    version: WorkerDeploymentVersion | None = None

    def record(self, agent: Agent) -> BuildRecord | None:
        """What a run of ``agent`` that begins here records as the session's ``build``."""
        if self.version is None:
            return None
        return BuildRecord(
            deployment_name=self.version.deployment_name,
            build_id=self.version.build_id,
            versioning=agent.versioning,
        )


async def apply_agent_versioning(build: WorkerBuild, agent: Agent) -> None:
    """A run of an auto-upgrade agent on a versioned worker: its workflow moves to the
    deployment's current build at its next task (the worker's default pins it)."""
    info = activity.info()
    if build.version is None or agent.versioning != "auto-upgrade" or not info.workflow_id:
        return
    client = activity.client()
    request = UpdateWorkflowExecutionOptionsRequest(
        namespace=info.workflow_namespace or client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=info.workflow_id, run_id=info.workflow_run_id or ""),
        workflow_execution_options=WorkflowExecutionOptions(
            versioning_override=VersioningOverride(
                auto_upgrade=True, behavior=ProtoBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
            )
        ),
        update_mask=FieldMask(paths=["versioning_override"]),
        identity=f"durable-agents worker {build.version.to_canonical_string()}",
    )
    try:
        await client.workflow_service.update_workflow_execution_options(request)
    except (RPCError, RuntimeError) as e:  # the run goes on, pinned to this build
        activity.logger.warning("could not make the run of %s auto-upgrade (it stays pinned): %s", agent.name, e)
