"""The HTTP API's approval policies and grants (``/api/policies/…``, ``/api/grants``).

Reading needs a viewer; changing a policy an operator (it goes through the
``ApprovalPolicies`` workflow, so a worker serving the agent checks it against the agent's
tools, as from every other entry point); making and revoking grants an approver, and only
within what the approver may decide: an approver scoped to some agents or tools cannot grant
for others, nor grant tool-wide across agents (a ``tool`` grant needs an approver of every
agent's calls of that tool).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.service import RPCError

from durable_agents.agent.agent import is_agent_name
from durable_agents.checkpoint.approval_grants import Grant, GrantKind
from durable_agents.checkpoint.approval_policy import ApprovalPolicy, ArgumentCondition
from durable_agents.checkpoint.errors import PolicyVersionConflictError
from durable_agents.checkpoint.format import FormatModel
from durable_agents.checkpoint.policy_book import PolicyChange, StoredPolicy
from durable_agents.client import AgentClient
from durable_agents.client.policies import PolicyAdmin
from durable_agents.web.api import HttpError, _body, _query_number, model_response
from durable_agents.web.auth import Identity, Role, grant_refusal
from durable_agents.web.views import Body

__all__ = [
    "GrantBody",
    "GrantPage",
    "PolicyBody",
    "PolicyChangePage",
    "PolicyEndpoints",
    "policy_routes",
]

CHANGE_WAIT_SECONDS = 20.0
"""How long a policy change waits for a worker's answer before a 504."""


class PolicyBody(Body):
    """``PUT /api/policies/…``: the policy document, and the version it was written against."""

    policy: ApprovalPolicy
    expected_version: int | None = Field(default=None, ge=0)
    """The version read (0: none ever set); another one is a 409 and nothing changes."""


class GrantBody(Body):
    """``POST /api/grants``: "approve and stop asking" for one tool's calls."""

    scope: GrantKind
    """``session`` (``sessionId``; its agent is the session's), ``agent`` (``agent``) or ``tool`` (every agent)."""
    tool: str = Field(min_length=1, max_length=200)
    agent: str | None = Field(default=None, min_length=1, max_length=200)
    session_id: str | None = Field(default=None, min_length=1, max_length=900)
    when: list[ArgumentCondition] = Field(default_factory=list, max_length=50)
    expires_in_seconds: float | None = Field(default=None, gt=0, le=366 * 86400)
    max_uses: int | None = Field(default=None, ge=1, le=1_000_000)
    note: str | None = Field(default=None, max_length=2000)


class PolicyChangePage(FormatModel):
    changes: list[PolicyChange]


class GrantPage(FormatModel):
    grants: list[Grant]


class RevokedGrant(FormatModel):
    grant: Grant
    revoked: bool
    """False: it was revoked already (its first revocation is kept)."""


Handler = Callable[[Request, Identity], Any]


def _stored(stored: StoredPolicy) -> JSONResponse:
    return JSONResponse(stored.model_dump(mode="json", by_alias=True))


class PolicyEndpoints:
    """The endpoints, over one ``AgentClient`` (and its store's policy book)."""

    def __init__(self, client: AgentClient, *, change_wait: float = CHANGE_WAIT_SECONDS) -> None:
        self.client = client
        self.admin = PolicyAdmin(client.store)
        self.change_wait = change_wait

    async def _read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    @staticmethod
    def _target(request: Request) -> dict[str, str]:
        params = request.path_params
        return {"agent": params["agent"]} if "agent" in params else {"session_id": params["session_id"]}

    # -- policies ---------------------------------------------------------------------------
    async def show(self, request: Request, identity: Identity) -> Response:
        return _stored(await self._read(self.admin.policy, **self._target(request)))

    async def put(self, request: Request, identity: Identity) -> Response:
        body: PolicyBody = await _body(request, PolicyBody)
        await self._known(request)
        return await self._change(
            self.client.set_policy(
                body.policy, by=identity.name, expected_version=body.expected_version,
                timeout=self.change_wait, **self._target(request),
            )
        )  # fmt: skip

    async def delete(self, request: Request, identity: Identity) -> Response:
        expected = _query_number(request, "expectedVersion", int, 0, 2**62, "a whole number >= 0")
        await self._known(request)
        return await self._change(
            self.client.clear_policy(
                by=identity.name, expected_version=int(expected) if expected is not None else None,
                timeout=self.change_wait, **self._target(request),
            )
        )  # fmt: skip

    async def _known(self, request: Request) -> None:
        """A policy is changed for an agent name, or for a session the store holds (a
        session's tools are the ones its runs recorded)."""
        target = self._target(request)
        if "agent" in target:
            if not is_agent_name(target["agent"]):
                raise HttpError(400, "BAD_REQUEST", f"{target['agent']!r} is not an agent name")
        elif await self._read(self.client.store.load_header, target["session_id"]) is None:
            raise HttpError(404, "CHECKPOINT_NOT_FOUND", f"no session {target['session_id']!r}")

    async def _change(self, change: Any) -> Response:
        try:
            return _stored(await change)
        except PolicyVersionConflictError as e:
            raise HttpError(409, e.code, str(e), decided_by=e.changed_by) from None
        except TimeoutError as e:
            raise HttpError(504, "NO_WORKER", str(e)) from None
        except RPCError as e:
            raise HttpError(502, "TEMPORAL_REFUSED", f"Temporal refused the change: {e.message}") from None

    async def changes(self, request: Request, identity: Identity) -> Response:
        agent, session_id = request.query_params.get("agent"), request.query_params.get("session")
        if agent is not None and session_id is not None:
            raise HttpError(400, "BAD_REQUEST", "name the agent or the session, not both")
        limit = _query_number(request, "limit", int, 1, 10_000, "a whole number from 1 to 10,000")
        found = await self._read(self.admin.policy_changes, agent=agent, session_id=session_id, limit=int(limit or 100))
        return model_response(PolicyChangePage(changes=found))

    # -- grants -----------------------------------------------------------------------------
    async def grants(self, request: Request, identity: Identity) -> Response:
        q = request.query_params
        live = q.get("live", "false").lower()
        if live not in ("true", "false"):
            raise HttpError(400, "BAD_REQUEST", f"live={live!r}: true or false")
        found = await self._read(
            self.admin.grants, agent=q.get("agent"), session_id=q.get("session"), tool=q.get("tool"),
            live=live == "true",
        )  # fmt: skip
        return model_response(GrantPage(grants=found))

    async def grant(self, request: Request, identity: Identity) -> Response:
        body: GrantBody = await _body(request, GrantBody)
        agent = body.agent
        if body.scope == "session":
            if body.session_id is None:
                raise HttpError(422, "INVALID_BODY", "a session grant names its sessionId")
            header = await self._read(self.client.store.load_header, body.session_id)
            if header is None:
                raise HttpError(404, "CHECKPOINT_NOT_FOUND", f"no session {body.session_id!r}")
            if agent is not None and agent != header.agent:
                raise HttpError(
                    422, "INVALID_BODY", f"session {body.session_id!r} is {header.agent!r}'s, not {agent!r}'s"
                )
            agent = header.agent
        elif body.session_id is not None:
            raise HttpError(422, "INVALID_BODY", "only a session grant names a sessionId")
        if body.scope == "agent" and agent is None:
            raise HttpError(422, "INVALID_BODY", "an agent grant names its agent")
        if body.scope == "tool" and agent is not None:
            raise HttpError(422, "INVALID_BODY", "a tool grant holds for every agent: leave agent out")
        refused = grant_refusal(identity, body.scope, agent, body.tool)
        if refused:
            raise HttpError(403, "FORBIDDEN", refused)
        made = await self._read(
            self.admin.grant, body.scope, body.tool, agent=agent, session_id=body.session_id, when=body.when,
            expires_in=body.expires_in_seconds, max_uses=body.max_uses, by=identity.name, note=body.note,
        )  # fmt: skip
        return JSONResponse(made.to_dict(), status_code=201)

    async def revoke(self, request: Request, identity: Identity) -> Response:
        grant_id = request.path_params["grant_id"]
        found = await self._read(self.admin.book.get_grant, grant_id)
        if found is None:
            raise HttpError(404, "NOT_FOUND", f"no grant {grant_id!r}")
        refused = grant_refusal(identity, found.scope.kind, found.scope.agent, found.scope.tool, verb="revoke")
        if refused:
            raise HttpError(403, "FORBIDDEN", refused)
        revocation = await self._read(self.admin.revoke_grant, grant_id, by=identity.name)
        return model_response(RevokedGrant(grant=revocation.grant, revoked=revocation.revoked))


def policy_routes(client: AgentClient, endpoint: Callable[..., Any]) -> list[Route]:
    """The routes, each wrapped by ``endpoint(handler, role)`` (the app's authentication)."""
    api = PolicyEndpoints(client)
    e = endpoint
    return [
        Route("/api/policies/changes", e(api.changes)),
        Route("/api/policies/agents/{agent}", e(api.show), methods=["GET"]),
        Route("/api/policies/agents/{agent}", e(api.put, Role.OPERATOR), methods=["PUT"]),
        Route("/api/policies/agents/{agent}", e(api.delete, Role.OPERATOR), methods=["DELETE"]),
        Route("/api/policies/sessions/{session_id:path}", e(api.show), methods=["GET"]),
        Route("/api/policies/sessions/{session_id:path}", e(api.put, Role.OPERATOR), methods=["PUT"]),
        Route("/api/policies/sessions/{session_id:path}", e(api.delete, Role.OPERATOR), methods=["DELETE"]),
        Route("/api/grants", e(api.grants), methods=["GET"]),
        Route("/api/grants", e(api.grant, Role.APPROVER), methods=["POST"]),
        Route("/api/grants/{grant_id}", e(api.revoke, Role.APPROVER), methods=["DELETE"]),
    ]
