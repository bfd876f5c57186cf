"""Versioned deploys (Temporal Worker Deployments) that respect drift (docs/design.md §6).

- A worker declares its deployment and build: ``build_worker(deployment="agents",
  build_id=None)``; without a build id, :func:`derive_build_id` makes one from the
  agents' fingerprints (and this package's version), so a changed agent is a new build.
  Versioned workers pin every run to their build; a run records the build in the
  checkpoint (``build``).
- ``Agent(versioning="pinned")`` (default): an unfinished session (paused for approval,
  crashed, aborted, failed) resumes on the build it is on, also when its run's workflow
  has closed: the client starts the next run pinned to the recorded build
  (:func:`pinned_override`). A finished session's next run starts on the deployment's
  current build, and its agent there is the session's from then on.
  ``Agent(versioning="auto-upgrade")``: the runs move to the current build at their next
  workflow task.
- ``AgentClient.migrate`` (``durable-agents migrate``) moves a session to another build
  deliberately (:func:`migrate` here is its deprecated former spelling): the target build's
  worker checks the session against its agent (a pending call's tool must exist; drift
  with ``on_agent_drift="error"`` is refused, nothing changed), then records the move
  (``build``, the agent's ``fingerprint``, a ``migrations`` entry with the drift). A
  paused run is closed so that its approval resumes it on the target build.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections.abc import Sequence
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Protocol

from temporalio.api.deployment.v1 import WorkerDeploymentVersion as ProtoVersion
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentVersionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.contracts import MigrateSessionOutput
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import CheckpointHeader, CheckpointStatus

if TYPE_CHECKING:
    from temporalio.worker import WorkerDeploymentConfig

__all__ = [
    "MigrateSessionOutput",
    "deployment_config",
    "derive_build_id",
    "list_builds",
    "migrate",
    "pinned_override",
    "set_current_build",
]

log = logging.getLogger(__name__)

MIGRATE_TIMEOUT = timedelta(seconds=30)
"""How long ``AgentClient.migrate`` waits for a worker of the target build to answer."""


def derive_build_id(agents: Sequence[Agent]) -> str:
    """A build id from what the worker runs: each agent's name, fingerprint (model,
    instructions, tool schemas; docs/design.md §6), drift and versioning policies, its sub-agents',
    and this package's version. Equal agents give equal ids, in any order; a changed
    agent gives another id, so deploying it makes a new build."""
    from durable_agents.agent.agent import with_subagents

    described = sorted(
        (a.name, a.fingerprint().digest, a.on_agent_drift, a.versioning) for a in with_subagents(list(agents))
    )
    whole = json.dumps([_package_version(), described], separators=(",", ":"))
    return hashlib.sha256(whole.encode()).hexdigest()[:12]


def _package_version() -> str:
    try:
        return version("durable-agents")
    except PackageNotFoundError:
        return "unknown"


def deployment_config(deployment: str, build_id: str | None, agents: Sequence[Agent]) -> WorkerDeploymentConfig:
    """A versioned worker's configuration: runs are pinned to its build by default."""
    from temporalio.worker import WorkerDeploymentConfig  # a worker's: not imported by clients

    if not deployment or "." in deployment:
        raise ConfigurationError(
            f"deployment name {deployment!r}: give a non-empty name without '.' (Temporal writes a version "
            "as <deployment>.<build id>)"
        )
    if build_id is not None and not build_id.strip():
        raise ConfigurationError("build_id is empty: give one, or leave it out to derive it from the agents")
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment, build_id or derive_build_id(agents)),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def set_current_build(client: Client, deployment: str, build_id: str) -> None:
    """Make ``build_id`` the deployment's current build (what new sessions, finished sessions'
    next runs and auto-upgrade runs go to); as ``temporal worker deployment
    set-current-version``. Its workers must have polled once."""
    await client.workflow_service.set_worker_deployment_current_version(
        SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace, deployment_name=deployment, build_id=build_id, identity="durable-agents"
        )
    )


async def list_builds(client: Client, deployment: str) -> list[str]:
    """The build ids Temporal knows for ``deployment`` (empty: no such deployment)."""
    try:
        described = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment)
        )
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return []
        raise
    return [v.deployment_version.build_id for v in described.worker_deployment_info.version_summaries]


async def build_exists(client: Client, target: WorkerDeploymentVersion) -> bool:
    """Whether Temporal knows the build (a worker of it has polled, and it was not deleted)."""
    try:
        await client.workflow_service.describe_worker_deployment_version(
            DescribeWorkerDeploymentVersionRequest(
                namespace=client.namespace,
                deployment_version=ProtoVersion(deployment_name=target.deployment_name, build_id=target.build_id),
            )
        )
    except RPCError as e:
        if e.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            return False
        raise
    return True


async def pinned_override(client: Client, header: CheckpointHeader | None) -> PinnedVersioningOverride | None:
    """How the next run of a session starts: pinned to the build its checkpoint records
    while the session is unfinished and its agent is pinned; else None (the deployment's
    current build, or unversioned workers). A recorded build Temporal no longer knows
    (deleted) is not pinned to: the run starts on the current build, and the drift check
    at its start decides (docs/design.md §6)."""
    if header is None or header.build is None or header.build.versioning != "pinned":
        return None
    if header.status == CheckpointStatus.FINISHED:
        return None
    target = WorkerDeploymentVersion(header.build.deployment_name, header.build.build_id)
    if not await build_exists(client, target):
        log.warning(
            "session %s is on build %s, which Temporal no longer has", header.session_id, header.build.canonical
        )
        return None
    return PinnedVersioningOverride(target)


class Migrates(Protocol):
    """What the deprecated :func:`migrate` calls: an ``AgentClient``."""

    async def migrate(
        self, session_id: str, to_build: str, *, deployment: str | None = ..., timeout: timedelta = ...
    ) -> MigrateSessionOutput: ...


async def migrate(
    agents: Migrates,
    session_id: str,
    to_build: str,
    *,
    deployment: str | None = None,
    timeout: timedelta = MIGRATE_TIMEOUT,
) -> MigrateSessionOutput:
    """Deprecated: ``await agents.migrate(session_id, to_build, deployment=…)``
    (``AgentClient.migrate``), which this calls."""
    warnings.warn(
        "durable_agents.versioning.migrate(agents, ...) is deprecated: use await agents.migrate(...)",
        DeprecationWarning,
        stacklevel=2,
    )
    return await agents.migrate(session_id, to_build, deployment=deployment, timeout=timeout)
