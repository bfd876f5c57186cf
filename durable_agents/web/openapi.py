"""The OpenAPI 3.1 spec the app serves at ``/openapi.json``: paths written here, schemas
generated from the models in ``views.py`` (so the spec and the answers cannot drift apart)."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from durable_agents.activities.contracts import MAX_DECISION_BYTES
from durable_agents.checkpoint.compare import TrajectoryComparison
from durable_agents.web.api import MAX_BODY_DEPTH
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
RESPONSES += [TrajectoryComparison, Problem]
BODIES: list[type[BaseModel]] = [DecisionBody, ForkBody, LoginBody]


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
