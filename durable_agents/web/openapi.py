"""The OpenAPI 3.1 spec the app serves at ``/openapi.json``: paths written here, schemas
generated from the models in ``views.py`` (so the spec and the answers cannot drift apart)."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from durable_agents.activities.contracts import MAX_DECISION_BYTES
from durable_agents.checkpoint.approval_grants import Grant
from durable_agents.checkpoint.compare import TrajectoryComparison
from durable_agents.checkpoint.policy_book import StoredPolicy
from durable_agents.web.api import MAX_BODY_DEPTH
from durable_agents.web.policies import GrantBody, GrantPage, PolicyBody, PolicyChangePage, RevokedGrant
from durable_agents.web.views import (
    ApprovalDetail,
    ApprovalPage,
    AuditPage,
    DecisionBody,
    DecisionResult,
    ForkBody,
    ForkView,
    LoginBody,
    Problem,
    SessionPage,
    SessionView,
    Transcript,
)

REF = "#/components/schemas/{model}"
RESPONSES: list[type[BaseModel]] = [
    ApprovalPage,
    ApprovalDetail,
    DecisionResult,
    AuditPage,
    SessionPage,
    SessionView,
    Transcript,
    ForkView,
]
RESPONSES += [TrajectoryComparison, Problem, StoredPolicy, PolicyChangePage, GrantPage, Grant, RevokedGrant]
BODIES: list[type[BaseModel]] = [DecisionBody, ForkBody, LoginBody, PolicyBody, GrantBody]


def _ref(model: type) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def _json(model: type, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _problems(*codes: int) -> dict[str, Any]:
    meaning = {
        400: f"a malformed parameter or body (not JSON, or nested more than {MAX_BODY_DEPTH} levels deep)",
        401: "not authenticated (no credentials, or a token that is not valid)",
        403: "authenticated, but not allowed (role, scope), or a cross-site request",
        404: "no such session (or nothing waits in it)",
        409: "the approval is no longer the one waiting, its arguments changed, or someone decided it first",
        413: f"edited arguments too large to send through Temporal: over {MAX_DECISION_BYTES:,} bytes of JSON "
        "(code DECISION_TOO_LARGE); nothing was sent, the call still waits",
        422: "the body does not fit (edited arguments that fail the tool's schema included)",
        429: "too many failed sign-ins from this address",
        502: "Temporal or the run refused the request",
        504: "the run did not record the decision in time (code DECISION_NOT_RECORDED: is a worker running?); "
        "it is not decided yet and may still be: reload the call before deciding again",
    }
    return {str(c): _json(Problem, meaning[c]) for c in codes}


READ = (400, 401, 403, 404, 429)


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


SESSION = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "the session id, its slashes encoded as %2F (an id may end in /approval, say)",
    "schema": {"type": "string", "minLength": 1},
}
PAGING = [
    _query("limit", "page size", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}),
    _query("cursor", "the previous page's nextCursor", {"type": "string"}),
]


def _get(summary: str, model: type, parameters: list[dict[str, Any]], *codes: int) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "parameters": parameters,
            "responses": {"200": _json(model, summary), **_problems(*codes)},
        }
    }


def _post(summary: str, body: type, model: type, ok: int, parameters: list[dict[str, Any]], *codes: int) -> dict:
    return {
        "post": {
            "summary": summary,
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(body)}}},
            "responses": {str(ok): _json(model, summary), **_problems(*codes)},
        }
    }


def _problem(code: int, description: str) -> dict[str, Any]:
    return {str(code): _json(Problem, description)}


def _policy_paths() -> dict[str, Any]:
    """``/api/policies/…`` and ``/api/grants`` (durable_agents/web/policies.py)."""
    conflict = _problem(409, "another change came first: the policy is not at expectedVersion (nothing changed)")
    no_worker = _problem(504, "no worker serving the agent answered in time (code NO_WORKER): nothing changed")
    refused = _problem(400, "malformed, or the policy does not fit the agent's tools (code CONFIGURATION_ERROR)")
    invalid = _problem(422, "the body does not fit (a policy with a field the format does not know included)")
    expected = _query("expectedVersion", "the version read (0: none set)", {"type": "integer", "minimum": 0})

    def scoped(kind: str, parameter: dict[str, Any]) -> dict[str, Any]:
        read = _get(f"The {kind}'s approval policy now (version 0: never set)", StoredPolicy, [parameter], *READ)
        body = {"required": True, "content": {"application/json": {"schema": _ref(PolicyBody)}}}
        changed = _json(StoredPolicy, "the stored policy")
        return {
            **read,
            "put": {
                "summary": f"Set the {kind}'s approval policy, checked against the agent's tools (role operator)",
                "parameters": [parameter],
                "requestBody": body,
                "responses": {"200": changed, **_problems(*READ), **refused, **conflict, **invalid, **no_worker},
            },
            "delete": {
                "summary": f"Remove the {kind}'s approval policy (audited, the next version; role operator)",
                "parameters": [parameter, expected],
                "responses": {"200": changed, **_problems(*READ), **refused, **conflict, **no_worker},
            },
        }

    agent = {"name": "agent", "in": "path", "required": True, "description": "the agent's name",
             "schema": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"}}  # fmt: skip
    grant = {"name": "grant_id", "in": "path", "required": True, "description": "the grant's id",
             "schema": {"type": "string", "minLength": 1}}  # fmt: skip
    forbidden = _problem(403, "not an approver, or the grant is wider than the calls the approver may decide")
    return {
        "/api/policies/agents/{agent}": scoped("agent", agent),
        "/api/policies/sessions/{session_id}": scoped("session", SESSION),
        "/api/policies/changes": _get(
            "The audit of policy changes (who, when, old -> new version), newest first",
            PolicyChangePage,
            [
                _query("agent", "only this agent's policy", {"type": "string"}),
                _query("session", "only this session's policy", {"type": "string"}),
                _query("limit", "at most this many (100)", {"type": "integer", "minimum": 1, "maximum": 10000}),
            ],
            *READ,
        ),
        "/api/grants": {
            **_get(
                "Grants that apply to an agent's / a session's / a tool's calls, newest first",
                GrantPage,
                [
                    _query("agent", "this agent's grants and every agent's", {"type": "string"}),
                    _query("session", "this session's grants and those of no one session", {"type": "string"}),
                    _query("tool", "only this tool's", {"type": "string"}),
                    _query("live", "only those live now", {"type": "boolean"}),
                ],
                *READ,
            ),
            **_post(
                "Approve a tool's calls without asking, in a session, an agent or every agent (role approver, "
                "within what the approver may decide)",
                GrantBody,
                Grant,
                201,
                [],
                400,
                401,
                403,
                404,
                422,
                429,
            ),
        },
        "/api/grants/{grant_id}": {
            "delete": {
                "summary": "Revoke a grant: it approves no call from now on (role approver, within its scope)",
                "parameters": [grant],
                "responses": {"200": _json(RevokedGrant, "the grant, revoked"), **_problems(*READ), **forbidden},
            }
        },
    }


@cache
def openapi_spec() -> dict[str, Any]:
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "serialization") for m in RESPONSES]
    wanted += [(m, "validation") for m in BODIES]
    _, schemas = models_json_schema(
        wanted,
        by_alias=True,
        ref_template=REF,
    )
    events = {
        "get": {
            "summary": "The session's events as Server-Sent Events (id = the event's offset in its log)",
            "parameters": [
                SESSION,
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": False,
                    "description": "resume after this event id",
                    "schema": {"type": "string", "pattern": "^[0-9]{1,15}$"},
                },
                _query("after", "start after this event id (Last-Event-ID wins)", {"type": "integer", "minimum": 0}),
                _query("follow", "keep the stream open for new events (default true)", {"type": "boolean"}),
            ],
            "responses": {
                "200": {
                    "description": "text/event-stream: `id: <offset>`, `event: <type>`, `data: <the event's JSON>`",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_problems(*READ),
            },
        }
    }
    paths: dict[str, Any] = {
        "/api/approvals": _get(
            "Waiting approvals across sessions, oldest first",
            ApprovalPage,
            [
                _query("agent", "only this agent's (or sub-agent's) calls", {"type": "string"}),
                _query("tool", "only this tool's calls", {"type": "string"}),
                _query("minAge", "waited at least this many seconds", {"type": "number", "minimum": 0}),
                _query("maxAge", "waited at most this many seconds", {"type": "number", "minimum": 0}),
                *PAGING,
            ],
            *READ,
        ),
        "/api/decisions": _get(
            "Past decisions (the audit), newest first",
            AuditPage,
            [_query("agent", "only this agent's sessions", {"type": "string"}), PAGING[0]],
            *READ,
        ),
        "/api/sessions": _get(
            "Sessions, last saved first",
            SessionPage,
            [
                _query("q", "text in the session id or the agent's name", {"type": "string"}),
                _query(
                    "status",
                    "only sessions in this status",
                    {"type": "string", "enum": ["in-progress", "awaiting-approval", "finished"]},
                ),
                _query("agent", "only this agent's sessions", {"type": "string"}),
                *PAGING,
            ],
            *READ,
        ),
        "/api/sessions/{session_id}": _get(
            "A session: its checkpoint header, waiting call, kept history and Temporal UI link",
            SessionView,
            [SESSION],
            *READ,
        ),
        "/api/sessions/{session_id}/transcript": _get(
            "The session's transcript, each sub-agent call's result with the sub-agent's transcript",
            Transcript,
            [SESSION],
            *READ,
        ),
        "/api/sessions/{session_id}/approval": _get(
            "The session's waiting call with the tool's schema and the conversation before it",
            ApprovalDetail,
            [SESSION],
            *READ,
        ),
        "/api/sessions/{session_id}/decision": _post(
            "Approve or reject the waiting call (as the authenticated caller), maybe with edited arguments",
            DecisionBody,
            DecisionResult,
            200,
            [SESSION],
            *READ,
            409,
            413,
            422,
            502,
            504,
        ),
        "/api/sessions/{session_id}/fork": _post(
            "Fork the session from a kept step, with a patch (role operator)",
            ForkBody,
            ForkView,
            201,
            [SESSION],
            *READ,
            409,
            422,
            502,
        ),
        "/api/sessions/{session_id}/events": events,
        "/api/diff": _get(
            "Compare two sessions step by step",
            TrajectoryComparison,
            [
                {"name": "a", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}},
                {"name": "b", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}},
            ],
            *READ,
        ),
    }
    paths.update(_policy_paths())
    for path in paths.values():
        for operation in path.values():
            operation["security"] = [{"token": []}, {"cookie": []}]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "durable-agents",
            "version": "1",
            "description": "Approvals, sessions, diffs, forks and live events of durable-agents runs. "
            "Authenticate with `Authorization: Bearer <token>`; from a browser, state-changing "
            "requests also need `X-CSRF-Token` (the `da_csrf` cookie's value).",
        },
        "paths": paths,
        "components": {
            "schemas": schemas["$defs"],
            "securitySchemes": {
                "token": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "da_token"},
            },
        },
    }
