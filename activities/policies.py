"""Approval policies changed on a worker: where the agent's tools are known.

A policy is checked against the tools of the agent it governs before it is kept
(``check_policy_against_tools``: a rule naming a tool the agent lacks, or an argument its
schema does not declare, is refused). The agent definition lives in the worker, so the
``ApprovalPolicies`` workflow (``workflows/policies.py``) runs this activity there, and any
Temporal client can change a policy with one update. The tools of a session's agent are
the ones its checkpoint's ``runConfig`` recorded (what its runs were given); of a session
not run yet, those of the agent the worker serves, with its MCP servers' tools listed as a
run lists them when the policy names one its definition lacks.

The request models are the wire contract of the workflow's updates (JSON Schemas in
``durable_agents/contract/schemas``): camelCase, unknown fields refused.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.mcp import with_listed_mcp_tools
from durable_agents.agent.agent import Agent, is_agent_name
from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.approval_policy import ApprovalPolicy, check_policy_against_tools
from durable_agents.checkpoint.errors import ConfigurationError, FailureType
from durable_agents.checkpoint.format import RunConfig
from durable_agents.checkpoint.policy_book import PolicyBook, PolicyScope, StoredPolicy, policy_book_for
from durable_agents.checkpoint.stores.base import CheckpointStore

__all__ = [
    "CHANGE_APPROVAL_POLICY",
    "ClearPolicyRequest",
    "PolicyActivities",
    "PolicyChangeInput",
    "PolicyTarget",
    "SetPolicyRequest",
    "StoredPolicy",
    "agent_tool_schemas",
    "checked_policy",
    "policies_workflow_id",
    "target_tools",
]

CHANGE_APPROVAL_POLICY = "change_approval_policy"
"""The activity's name (stable: recorded in workflow histories)."""

_ID_PREFIX = "durable-agents.policies"
_ID_LIMIT = 1000


def policies_workflow_id(target: PolicyTarget, task_queue: str) -> str:
    """``durable-agents.policies.agent.<agent>@<task queue>``,
    ``durable-agents.policies.session.<session id>@<task queue>`` or, for a session named with
    its agent (one that has not run yet), ``durable-agents.policies.agent-session.<agent>/<session
    id>@<task queue>`` (too long for Temporal's 1,000 bytes: its prefix and a hash of it). One
    id per target: an open workflow keeps the target it was started with, so a session named
    without its agent and then with it are two targets. The task queue is in it because the
    change is checked and written by a worker of that queue: a workflow left open on another
    queue (its workers stopped before it ended) never holds up this one's changes."""
    if target.session_id is not None and target.agent is not None:  # (an agent name has no "/")
        kind, name = "agent-session", f"{target.agent}/{target.session_id}"
    elif target.session_id is not None:
        kind, name = "session", target.session_id
    else:
        kind, name = "agent", str(target.agent)
    name = f"{name}@{task_queue}"
    found = f"{_ID_PREFIX}.{kind}.{name}"
    if len(found.encode()) <= _ID_LIMIT:
        return found
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    room = _ID_LIMIT - len(f"{_ID_PREFIX}.{kind}..{digest}")
    prefix = name.encode()[:room].decode("utf-8", errors="ignore")
    return f"{_ID_PREFIX}.{kind}.{prefix}.{digest}"


class _Strict(FormatModel):
    """camelCase like every contract, but a field it does not know is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")


class PolicyTarget(_Strict):
    """Whose policy: an agent's (``agent``) or one session's (``sessionId``; ``agent`` then
    names its agent when the session has not run yet). The ``ApprovalPolicies`` workflow's input."""

    agent: str | None = Field(default=None, min_length=1, max_length=200)
    session_id: str | None = Field(default=None, min_length=1, max_length=900)

    @field_validator("agent")
    @classmethod
    def _an_agent_name(cls, agent: str | None) -> str | None:
        if agent is not None and not is_agent_name(agent):
            raise ValueError(f"{agent!r} is not an agent name (letters, digits, '_', '.', '-'; at most 64)")
        return agent

    @model_validator(mode="after")
    def _names_one(self) -> PolicyTarget:
        if self.agent is None and self.session_id is None:
            raise ValueError('name the agent ({"agent": "support"}) or the session ({"sessionId": "chat-42"})')
        return self

    @property
    def scope(self) -> PolicyScope:
        if self.session_id is not None:
            return PolicyScope.of_session(self.session_id)
        assert self.agent is not None
        return PolicyScope.of_agent(self.agent)


class SetPolicyRequest(_Strict):
    """The ``set_policy`` update: make ``policy`` the target's next version."""

    policy: ApprovalPolicy
    """The policy document (docs/reference/approval-policy.md); its ``version`` is replaced by the book's."""
    changed_by: str = Field(min_length=1, max_length=200)
    """Who makes the change (the audit's ``changedBy``)."""
    expected_version: int | None = Field(default=None, ge=0)
    """The version the writer read (0: none was ever set): refused with
    ``PolicyVersionConflictError`` when the target holds another. Absent: whatever it holds."""


class ClearPolicyRequest(_Strict):
    """The ``clear_policy`` update: remove the target's policy (a change like any other)."""

    changed_by: str = Field(min_length=1, max_length=200)
    expected_version: int | None = Field(default=None, ge=0)


class PolicyChangeInput(FormatModel):
    """The activity's input: a set (``policy``) or a clear (``policy`` None) of ``target``."""

    target: PolicyTarget
    policy: ApprovalPolicy | None = None
    changed_by: str
    expected_version: int | None = None


def agent_tool_schemas(agent: Agent | RunConfig) -> dict[str, dict[str, Any]]:
    """An agent's tools as the model is given them: name → input JSON schema (its own tools
    and sub-agents; an MCP server's tools only as a run's ``runConfig`` recorded them)."""
    config = agent if isinstance(agent, RunConfig) else agent.run_config()
    return {spec.name: dict(spec.input_schema) for spec in config.tools}


def _ran(store: CheckpointStore, target: PolicyTarget) -> bool:
    """Whether the target's session recorded its tools (a run began)."""
    header = store.load_header(target.session_id) if target.session_id is not None else None
    return header is not None and header.run_config is not None


def checked_policy(
    policy: ApprovalPolicy | str | bytes | Mapping[str, Any],
    tool_schemas: Mapping[str, Mapping[str, Any]],
    agent: str | None,
) -> ApprovalPolicy:
    """``policy`` parsed (unknown fields refused) and checked against the agent's tools:
    :class:`ConfigurationError` naming every problem."""
    from durable_agents.checkpoint.approval_policy import parse_policy

    parsed = policy if isinstance(policy, ApprovalPolicy) else parse_policy(policy)
    check_policy_against_tools(parsed, tool_schemas, agent=agent)
    return parsed


def target_tools(
    store: CheckpointStore, target: PolicyTarget, agents: Mapping[str, Agent]
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The agent a target's policy governs and its tools' schemas: a session's as its
    checkpoint recorded them, else the agent's in ``agents`` (the worker's).
    :class:`ConfigurationError` when neither is known here."""
    if target.session_id is not None:
        header = store.load_header(target.session_id)
        if header is not None:
            if target.agent is not None and header.agent and header.agent != target.agent:
                raise ConfigurationError(
                    f"session {target.session_id!r} is a session of agent {header.agent!r}, not {target.agent!r}"
                )
            if header.run_config is not None:
                return header.run_config.agent, agent_tool_schemas(header.run_config)
            if header.agent:
                target = PolicyTarget(agent=header.agent, session_id=target.session_id)
        if target.agent is None:
            raise ConfigurationError(
                f"no session {target.session_id!r} in {store!r}: name its agent too "
                '({"sessionId": …, "agent": …}) so its tools can be checked'
            )
    assert target.agent is not None
    agent = agents.get(target.agent)
    if agent is None:
        known = ", ".join(sorted(agents)) or "none"
        raise ConfigurationError(
            f"this worker has no agent named {target.agent!r} (it has: {known}): a policy is checked against "
            "its agent's tools on a worker that serves the agent"
        )
    return agent.name, agent_tool_schemas(agent)


class PolicyActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps
        self._book: PolicyBook | None = None
        self._lock = threading.Lock()

    def book(self) -> PolicyBook:
        with self._lock:
            if self._book is None:
                self._book = policy_book_for(self.deps.store)
            return self._book

    @activity.defn(name=CHANGE_APPROVAL_POLICY)
    async def change_approval_policy(self, inp: PolicyChangeInput) -> StoredPolicy:
        policy = None if inp.policy is None else await self._checked(inp.target, inp.policy)

        def run() -> StoredPolicy:
            book, scope, now = self.book(), inp.target.scope, datetime.now(UTC)
            if policy is None:
                return book.clear_policy(scope, by=inp.changed_by, now=now, expected_version=inp.expected_version)
            return book.set_policy(scope, policy, by=inp.changed_by, now=now, expected_version=inp.expected_version)

        return await self.deps.in_store(run)

    async def _checked(self, target: PolicyTarget, document: ApprovalPolicy) -> ApprovalPolicy:
        """The policy checked against the target's tools. An agent's MCP servers' tools are
        listed when a run starts, so they are not in its definition: when the policy does not
        fit the agent's own tools and the agent has MCP servers (and no run recorded the
        session's tools), they are listed here, as a run would list them, and the policy is
        checked against all of them."""
        agent, schemas = await self.deps.in_store(target_tools, self.deps.store, target, self.deps.agents)
        try:
            return await self.deps.in_store(checked_policy, document, schemas, agent)
        except ApplicationError as refused:
            served = self.deps.agents.get(agent)
            recorded = target.session_id is not None and await self.deps.in_store(_ran, self.deps.store, target)
            if served is None or not served.mcp_servers or recorded:
                raise
            try:
                listed = await with_listed_mcp_tools(self.deps.mcp, served)
            except ApplicationError as e:
                raise ApplicationError(
                    f"{refused.message} (a policy may name agent {agent!r}'s MCP tools, but its MCP servers' tools "
                    f"could not be listed to check it: {e.message})",
                    type=FailureType.CONFIGURATION,
                    non_retryable=True,
                ) from e
            return await self.deps.in_store(checked_policy, document, agent_tool_schemas(listed), agent)
