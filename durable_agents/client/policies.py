"""Managing approval policies and grants: what the client, the CLI and the web API share.

Reads (a scope's policy, the audit of changes, grants) and grant changes go to the policy
book beside the store (``checkpoint/policy_book.py``). Setting a policy checks it against
the tools of the agent it governs; where those are known decides the path:

- :meth:`AgentClient.set_policy` (and so the CLI's ``policy set`` and the web API's PUT)
  sends it through the ``ApprovalPolicies`` workflow (:func:`change_through_temporal`), whose
  activity checks it on a worker that serves the agent (a session's: against the tools
  its checkpoint recorded), as any Temporal client can;
- :meth:`PolicyAdmin.set_policy` writes it directly, without Temporal, checked against an
  agent object (or its tools' schemas) the caller gives.

A grant's argument conditions are checked against the tool's input schema as the store
recorded it last (the newest run config of the agent, or of any agent for a tool grant,
that has the tool): a condition on an argument the tool lacks is refused, and so is a
condition on a tool no recorded run has (nothing to check it against).
"""

from __future__ import annotations

import contextlib
import getpass
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from durable_agents.activities.policies import (
    ClearPolicyRequest,
    PolicyTarget,
    SetPolicyRequest,
    agent_tool_schemas,
    checked_policy,
)
from durable_agents.agent.agent import Agent, is_agent_name
from durable_agents.checkpoint.approval_grants import Grant, GrantKind, GrantScope
from durable_agents.checkpoint.approval_policy import ApprovalPolicy, ArgumentCondition, check_conditions
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.policy_book import (
    GrantRevocation,
    PolicyBook,
    PolicyChange,
    PolicyScope,
    StoredPolicy,
    policy_book_for,
)
from durable_agents.checkpoint.stores.base import CheckpointStore

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = [
    "CHANGE_TIMEOUT_SECONDS",
    "GRANT_SCAN_SESSIONS",
    "PolicyAdmin",
    "change_through_temporal",
    "default_actor",
    "load_policy",
    "scope_of",
    "set_policy_request",
]

CHANGE_TIMEOUT_SECONDS = 30.0
"""How long a policy change waits for a worker's answer by default."""
GRANT_SCAN_SESSIONS = 50
"""How many of the newest sessions are read for a tool's recorded schema (a grant's check)."""


def default_actor() -> str:
    """Who makes a change when nobody is named: the OS user."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def scope_of(agent: str | None, session_id: str | None) -> PolicyScope:
    """The scope named by exactly one of ``agent`` and ``session_id``."""
    if (agent is None) == (session_id is None):
        raise ConfigurationError("name the policy's agent (agent=...) or its session (session_id=...), one of them")
    if session_id is not None and not session_id:
        raise ConfigurationError("a session id is not empty")
    if agent is not None and not is_agent_name(agent):
        raise ConfigurationError(f"{agent!r} is not an agent name (letters, digits, '_', '.', '-'; at most 64)")
    return PolicyScope.of_agent(agent) if agent is not None else PolicyScope.of_session(str(session_id))


def load_policy(policy: ApprovalPolicy | Mapping[str, Any] | str | bytes) -> ApprovalPolicy | Mapping[str, Any] | str:
    """A policy as given: an ``ApprovalPolicy``, a dict, JSON text, or a path to a JSON file
    (a string that is not JSON and names a file)."""
    if isinstance(policy, bytes):
        return policy.decode()
    if isinstance(policy, str) and not policy.lstrip().startswith("{"):
        from pathlib import Path

        path = Path(policy).expanduser()
        if not path.is_file():
            raise ConfigurationError(f"policy {policy!r} is neither JSON nor a file")
        return path.read_text()
    return policy


def set_policy_request(
    policy: ApprovalPolicy | Mapping[str, Any] | str | bytes, *, by: str | None, expected_version: int | None
) -> SetPolicyRequest:
    """The ``set_policy`` update's request for ``policy`` (as :func:`load_policy` takes it),
    validated: :class:`ConfigurationError` naming what is wrong."""
    document = _as_document(load_policy(policy))
    return SetPolicyRequest(policy=document, changed_by=by or default_actor(), expected_version=expected_version)


def _as_document(policy: ApprovalPolicy | Mapping[str, Any] | str) -> ApprovalPolicy:
    from durable_agents.checkpoint.approval_policy import parse_policy

    return policy if isinstance(policy, ApprovalPolicy) else parse_policy(policy)


class PolicyAdmin:
    """Policies and grants of ``store``'s policy book, without Temporal."""

    def __init__(self, store: CheckpointStore, book: PolicyBook | None = None) -> None:
        self.store = store
        self._book = book

    @property
    def book(self) -> PolicyBook:
        if self._book is None:
            self._book = policy_book_for(self.store)
        return self._book

    # -- policies -----------------------------------------------------------------------------
    def policy(self, *, agent: str | None = None, session_id: str | None = None) -> StoredPolicy:
        return self.book.policy(scope_of(agent, session_id))

    def set_policy(
        self,
        policy: ApprovalPolicy | Mapping[str, Any] | str | bytes,
        *,
        against: Agent | Mapping[str, Mapping[str, Any]],
        agent: str | None = None,
        session_id: str | None = None,
        by: str | None = None,
        expected_version: int | None = None,
    ) -> StoredPolicy:
        """Set the policy directly in the book, checked against ``against``: the agent (an
        ``Agent``) or its tools' input schemas (name → JSON schema)."""
        scope = scope_of(agent, session_id)
        schemas = agent_tool_schemas(against) if isinstance(against, Agent) else dict(against)
        name = against.name if isinstance(against, Agent) else agent
        parsed = checked_policy(_as_document(load_policy(policy)), schemas, agent=name)
        return self.book.set_policy(
            scope, parsed, by=by or default_actor(), now=datetime.now(UTC), expected_version=expected_version
        )

    def clear_policy(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        by: str | None = None,
        expected_version: int | None = None,
    ) -> StoredPolicy:
        return self.book.clear_policy(
            scope_of(agent, session_id), by=by or default_actor(), now=datetime.now(UTC),
            expected_version=expected_version,
        )  # fmt: skip

    def policy_changes(
        self, *, agent: str | None = None, session_id: str | None = None, limit: int | None = None
    ) -> list[PolicyChange]:
        """The audit, newest first: of the scope named, or of every scope (neither named)."""
        scope = None if agent is None and session_id is None else scope_of(agent, session_id)
        return self.book.policy_changes(scope, limit=limit)

    # -- grants -------------------------------------------------------------------------------
    def grants(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        tool: str | None = None,
        live: bool = False,
    ) -> list[Grant]:
        """The grants that apply to such calls, newest first (``live``: only those live now)."""
        return self.book.list_grants(
            agent=agent, session_id=session_id, tool=tool, live_at=datetime.now(UTC) if live else None
        )

    def grant(
        self,
        kind: GrantKind,
        tool: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        when: Sequence[ArgumentCondition | Mapping[str, Any]] = (),
        expires_in: timedelta | float | None = None,
        max_uses: int | None = None,
        by: str | None = None,
        note: str | None = None,
        grant_id: str | None = None,
    ) -> Grant:
        """Make a grant directly: ``kind`` ``session`` (``agent`` and ``session_id``), ``agent``
        (``agent``) or ``tool`` (every agent), for ``tool``'s calls, narrowed by ``when``,
        for ``expires_in`` (a timedelta or seconds; None: until revoked or used up) and at
        most ``max_uses`` calls. A session grant's agent may be left out: the session's."""
        if kind == "session" and agent is None and session_id is not None:
            header = self.store.load_header(session_id)
            agent = header.agent if header is not None else None
            if agent is None:
                raise ConfigurationError(f"no session {session_id!r} in {self.store!r}: name its agent too")
        now = datetime.now(UTC)
        seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
        if seconds is not None and seconds <= 0:
            raise ConfigurationError(f"a grant lasts a positive time, not {seconds:g} s")
        try:
            conditions = [c if isinstance(c, ArgumentCondition) else ArgumentCondition.model_validate(c) for c in when]
            scope = GrantScope(kind=kind, tool=tool, agent=agent, session_id=session_id, when=conditions)
            grant = Grant(
                id=grant_id or f"g-{uuid.uuid4().hex[:12]}",
                scope=scope,
                created_by=by or default_actor(),
                created_at=now,
                expires_at=now + timedelta(seconds=seconds) if seconds is not None else None,
                max_uses=max_uses,
                note=note,
            )
        except ValueError as e:
            raise ConfigurationError(f"invalid grant: {e}") from None
        self._check_conditions(grant)
        return self.book.add_grant(grant)

    def revoke_grant(self, grant_id: str, *, by: str | None = None) -> GrantRevocation:
        return self.book.revoke_grant(grant_id, by=by or default_actor(), now=datetime.now(UTC))

    def _check_conditions(self, grant: Grant) -> None:
        scope = grant.scope
        if not scope.when:
            return
        schema = self.recorded_tool_schema(scope.tool, agent=scope.agent, session_id=scope.session_id)
        if schema is None:
            raise ConfigurationError(
                f"no recorded run of {scope.agent or 'any agent'} has a tool {scope.tool!r}: a grant's conditions "
                "are checked against the tool's input schema; run the agent once first, or grant without conditions"
            )
        problems = check_conditions(scope.tool, scope.when, schema)
        if problems:
            raise ConfigurationError(f"the grant's conditions do not fit {scope.tool}: " + "; ".join(problems))

    def recorded_tool_schema(
        self, tool: str, *, agent: str | None = None, session_id: str | None = None
    ) -> dict[str, Any] | None:
        """``tool``'s input schema as the store last recorded it: in ``session_id``'s run
        config, else in the newest of ``agent``'s (any agent's) sessions that has it."""
        candidates = [session_id] if session_id is not None else []
        summaries = sorted(
            self.store.list_sessions(agent=agent),
            key=lambda s: s.updated_at or datetime.min.replace(tzinfo=UTC),
            reverse=True,
        )
        candidates += [s.session_id for s in summaries[:GRANT_SCAN_SESSIONS]]
        for sid in candidates:
            header = self.store.load_header(sid)
            if header is None or header.run_config is None:
                continue
            spec = next((t for t in header.run_config.tools if t.name == tool), None)
            if spec is not None:
                return dict(spec.input_schema)
        return None


async def change_through_temporal(
    client: Client,
    task_queue: str,
    target: PolicyTarget,
    request: SetPolicyRequest | ClearPolicyRequest,
    *,
    timeout: float = CHANGE_TIMEOUT_SECONDS,
) -> StoredPolicy:
    """Send a policy change to the target's ``ApprovalPolicies`` workflow (update-with-start:
    started when none runs), where a worker that knows the agent checks and writes it. A
    refusal raises the typed error (``ConfigurationError``, ``PolicyVersionConflictError``).
    No answer within ``timeout`` seconds (no worker polls ``task_queue``): the workflow is
    terminated, so the change is not made later, and :class:`TimeoutError` is raised."""
    import asyncio

    from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
    from temporalio.common import WorkflowIDConflictPolicy
    from temporalio.service import RPCError

    from durable_agents.activities.policies import policies_workflow_id
    from durable_agents.client.outcomes import outcome_error
    from durable_agents.workflows.policies import CLEAR_POLICY_UPDATE, POLICIES_WORKFLOW, SET_POLICY_UPDATE

    name = SET_POLICY_UPDATE if isinstance(request, SetPolicyRequest) else CLEAR_POLICY_UPDATE
    scope = str(target.scope)
    workflow_id = policies_workflow_id(target, task_queue)
    for attempt in range(3):
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            POLICIES_WORKFLOW,
            target.to_dict(),
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"{name} of {scope}",
        )
        update = asyncio.ensure_future(
            client.execute_update_with_start_workflow(
                name, request.to_dict(), start_workflow_operation=start, result_type=StoredPolicy
            )
        )
        done, _ = await asyncio.wait({update}, timeout=timeout)
        if not done:
            update.cancel()
            with contextlib.suppress(BaseException):
                await update
            # not to be made later by a worker that starts after we said it was not (a worker that
            # picked it up in this very moment may still make it: `policy show` says)
            with contextlib.suppress(Exception):
                await client.get_workflow_handle(workflow_id).terminate(reason="no worker answered the policy change")
            raise TimeoutError(
                f"no worker on task queue {task_queue!r} answered the policy change of {scope} within {timeout:g} s: "
                "nothing was changed; start a worker that serves the agent (durable-agents worker --agent …)"
            )
        try:
            return update.result()
        except WorkflowUpdateFailedError as e:
            raise outcome_error(scope, e) from e
        except RPCError as e:
            # the target's workflow was ending as this update reached it: a new one takes it
            if attempt < 2 and "completed" in str(e).lower():
                continue
            raise
    raise AssertionError("unreachable")
