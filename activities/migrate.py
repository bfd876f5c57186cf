"""The ``migrate`` activity: a session moved to another worker build, after the drift
check a resume would make against that build's agent (docs/design.md §6)."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.contracts import MIGRATE_SESSION, MigrateSessionInput, MigrateSessionOutput
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.mcp import with_listed_mcp_tools
from durable_agents.activities.transcript import pending_tool_calls
from durable_agents.activities.versioning import WorkerBuild
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import CheckpointNotFoundError, FailureType
from durable_agents.checkpoint.fingerprint import compare_fingerprints
from durable_agents.checkpoint.format import Migration


class MigrateActivities:
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
