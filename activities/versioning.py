"""Worker Versioning on the worker's side: which build this worker is, what a run records
of it, an auto-upgrade agent's runs, and the ``migrate`` activity (the drift check of a
session against this build's agent, docs/design.md §6, then the move).

A versioned worker (``build_worker(deployment=…)``) runs each workflow pinned by default;
``Agent(versioning="auto-upgrade")`` runs are switched to auto-upgrade when they begin.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import VersioningBehavior as ProtoBehavior
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import UpdateWorkflowExecutionOptionsRequest
from temporalio.common import WorkerDeploymentVersion
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from durable_agents.activities.definitions import Agent
from durable_agents.activities.transcript import pending_tool_calls
from durable_agents.checkpoint.errors import CheckpointNotFoundError, FailureType
from durable_agents.checkpoint.fingerprint import AgentDrift, compare_fingerprints
from durable_agents.checkpoint.format import BuildRecord, CheckpointStatus, FormatModel, Migration

if TYPE_CHECKING:
    from durable_agents.activities.deps import ActivityDeps

MIGRATE_SESSION = "migrate_session"


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


class MigrateSessionInput(FormatModel):
    session_id: str
    to_build: str
    """``<deployment>.<build id>`` the client asked for; this worker must be it."""


class MigrateSessionOutput(FormatModel):
    agent: str
    from_build: str | None = None
    to_build: str
    drift: AgentDrift | None = None
    status: CheckpointStatus


class VersioningActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @property
    def build(self) -> WorkerBuild:
        return self.deps.build

    @activity.defn(name=MIGRATE_SESSION)
    async def migrate_session(self, inp: MigrateSessionInput) -> MigrateSessionOutput:
        """Check the session against this build's agent as a resume would (a pending call's
        tool must exist; drift is refused when the agent says ``on_agent_drift="error"``),
        then record the move: ``build`` (its next run starts here), the agent's fingerprint
        and a ``migrations`` entry with the drift. Nothing is written when it is refused."""
        here = self.build.version.to_canonical_string() if self.build.version else None
        if here != inp.to_build:
            raise _fail(f"this worker is build {here}, not {inp.to_build}", FailureType.CONFIGURATION)
        header = await self.deps.in_store(self.deps.store.load_header, inp.session_id)
        if header is None or not header.agent:
            raise CheckpointNotFoundError(
                f"no session {inp.session_id!r} in {self.deps.store!r}", session_id=inp.session_id
            )
        agent = self.deps.agent(header.agent)
        if agent.mcp_servers:  # as begin_run lists them, so the fingerprints compare alike
            from durable_agents.activities.mcp import with_listed_mcp_tools

            agent = await with_listed_mcp_tools(self.deps.mcp, agent)
        return await self.deps.in_store(self._migrate, inp, agent)

    def _migrate(self, inp: MigrateSessionInput, agent: Agent) -> MigrateSessionOutput:
        header, messages = self.deps.transcript(inp.session_id)
        assert header is not None
        pending, _ = pending_tool_calls(messages)
        missing = [c for c in pending if not agent.has_tool(c.name)]
        if missing:
            names = ", ".join(f"{c.name} ({c.id})" for c in missing)
            raise _fail(
                f"session {inp.session_id!r} has pending calls to tools that agent {agent.name!r} of build "
                f"{inp.to_build} does not have: {names}; not migrated",
                FailureType.RESUME_TOOL_MISSING,
            )
        saved_model = header.run_config.model_override if header.run_config else None
        fingerprint = agent.fingerprint(saved_model)
        drift = compare_fingerprints(header.fingerprint, fingerprint)
        from_build = header.build.canonical if header.build else None
        if drift is not None and agent.on_agent_drift == "error":
            raise _fail(
                f"agent {agent.name!r} of build {inp.to_build} differs from the one session {inp.session_id!r} "
                f"was saved with ({drift.describe()}) and says on_agent_drift='error': not migrated, the "
                f"session stays on build {from_build or '(none recorded)'} and its checkpoint is untouched",
                FailureType.AGENT_DRIFT,
                drift.to_dict(),
            )
        record = self.build.record(agent)
        migration = Migration(
            at=datetime.now(UTC),
            from_build=from_build,
            to_build=inp.to_build,
            drift=drift.to_dict() if drift else None,
        )
        updated = header.model_copy(
            update={
                "build": record,
                "fingerprint": fingerprint,
                "migrations": [*(header.migrations or []), migration],
                "updated_at": None,
            }
        )
        self.deps.store.append(updated, header.message_count, [])
        return MigrateSessionOutput(
            agent=agent.name, from_build=from_build, to_build=inp.to_build, drift=drift, status=header.status
        )


def _fail(message: str, kind: FailureType, *details: object) -> ApplicationError:
    return ApplicationError(message, *details, type=kind, non_retryable=True)
