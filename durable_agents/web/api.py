"""The HTTP API's endpoints (``/api/…``): approvals, decisions, sessions, diff, fork, events.

Reads come from the checkpoint store (and, for waiting approvals, Temporal's visibility
through ``AgentClient.waiting_approvals``); decisions and forks go through the
``AgentClient``, so the run's own ``decide`` update checks them as it checks every decision.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from durable_agents.activities.contracts import check_decision_size
from durable_agents.checkpoint.compare import compare_trajectories
from durable_agents.checkpoint.fork import Patch
from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    Decision,
    FormatModel,
    Message,
    Role,
)
from durable_agents.client import AgentClient
from durable_agents.client.outcomes import pending_from_store
from durable_agents.errors import (
    ApprovalNotPendingError,
    CheckpointNotFoundError,
    ConfigurationError,
    DecisionTooLargeError,
    DurableAgentsError,
    InvalidDecisionError,
    SessionAwaitingApprovalError,
    SessionBusyError,
)
from durable_agents.web.auth import Identity, grant_refusal
from durable_agents.web.views import (
    ApprovalDetail,
    ApprovalItem,
    ApprovalPage,
    AuditEntry,
    AuditPage,
    DecisionBody,
    DecisionResult,
    DecisionView,
    ForkBody,
    ForkView,
    HistoryItem,
    Pending,
    Problem,
    SessionPage,
    SessionView,
    Transcript,
    TranscriptMessage,
    arguments_digest,
)

log = logging.getLogger("durable_agents.web")

MAX_PAGE = 500
DEFAULT_PAGE = 50
CONVERSATION_MESSAGES = 40
"""How much of the transcript before a waiting call its detail carries (at most)."""
SUBAGENT_DEPTH = 4
"""How deep a transcript nests sub-agents' transcripts."""
DECIDE_WAIT_SECONDS = 20.0
"""How long a decision's request waits for the run's next outcome before answering without it."""
MAX_BODY_DEPTH = 100
"""How deeply a request's JSON body may nest (objects and arrays): far more than any decision,
fork or sign-in needs, and well inside what the stack and Temporal's JSON converter (about 200
levels) take. Deeper is a malformed body (400), never a crash."""
SSE_POLL_SECONDS = 0.1
SSE_IDLE_POLL_SECONDS = 0.5
SSE_KEEPALIVE_SECONDS = 15.0
SSE_BATCH = 200


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, *, decided_by: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.decided_by = status, code, message, decided_by

    def response(self) -> JSONResponse:
        body = Problem(code=self.code, message=self.message, decided_by=self.decided_by)
        return JSONResponse(body.to_dict(), status_code=self.status)


def model_response(model: FormatModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.to_dict(), status_code=status)


def error_of(e: DurableAgentsError) -> HttpError:
    """Our typed errors as HTTP answers."""
    code = getattr(e, "code", "ERROR")
    if isinstance(e, CheckpointNotFoundError):
        return HttpError(404, code, str(e))
    if isinstance(e, (ApprovalNotPendingError, SessionBusyError, SessionAwaitingApprovalError)):
        return HttpError(409, code, str(e))
    if isinstance(e, DecisionTooLargeError):
        return HttpError(413, code, str(e))
    if isinstance(e, InvalidDecisionError):
        return HttpError(422, code, str(e))
    if isinstance(e, ConfigurationError):
        return HttpError(400, code, str(e))
    return HttpError(502, code, str(e))


def _query_number(
    request: Request, name: str, parse: Callable[[str], float], low: float, high: float, what: str
) -> float | None:
    """Query parameter ``name`` parsed and within ``[low, high]`` (None when absent), else a 400 saying ``what``."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = parse(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:  # NaN is in no range
        raise HttpError(400, "BAD_REQUEST", f"{name}={raw!r}: {what}")
    return value


def _limit(request: Request) -> int:
    value = _query_number(request, "limit", int, 1, MAX_PAGE, f"a whole number from 1 to {MAX_PAGE}")
    return DEFAULT_PAGE if value is None else int(value)


def _cursor(request: Request) -> int:
    """Where a page starts: an opaque cursor (the previous page's ``nextCursor``)."""
    raw = request.query_params.get("cursor")
    if not raw:
        return 0
    try:
        value = int(base64.urlsafe_b64decode(raw.encode() + b"==").decode())
    except (ValueError, UnicodeDecodeError):
        raise HttpError(400, "BAD_REQUEST", "cursor: pass a nextCursor this API returned") from None
    if value < 0:
        raise HttpError(400, "BAD_REQUEST", "cursor: pass a nextCursor this API returned")
    return value


def _next_cursor(start: int, limit: int, total: int) -> str | None:
    end = start + limit
    return base64.urlsafe_b64encode(str(end).encode()).decode().rstrip("=") if end < total else None


def _seconds(request: Request, name: str) -> float | None:
    return _query_number(request, name, float, 0, 1e9, "seconds, a number >= 0")


async def _body(request: Request, model: type[BaseModel]) -> Any:
    """The request's JSON body as ``model`` (every body the API reads comes through here):
    400 for one that is not JSON or nests deeper than ``MAX_BODY_DEPTH``, 422 for one that
    does not fit ``model``."""
    too_deep = HttpError(400, "BAD_REQUEST", f"the body is nested more than {MAX_BODY_DEPTH} levels deep")
    try:
        raw = await request.json()
    except RecursionError:  # the parser's own limit, about 1,000 levels
        raise too_deep from None
    except (ValueError, UnicodeDecodeError):
        raise HttpError(400, "BAD_REQUEST", "the body is not JSON") from None
    if _deeper_than(raw, MAX_BODY_DEPTH):
        raise too_deep
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in e.errors())
        raise HttpError(422, "INVALID_BODY", problems) from None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether JSON ``value`` nests objects or arrays more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


class Api:
    """The endpoints, over one ``AgentClient``."""

    def __init__(self, client: AgentClient, *, temporal_ui_url: str | None, decide_wait: float) -> None:
        self.client = client
        self.store = client.store
        self.temporal_ui_url = temporal_ui_url.rstrip("/") if temporal_ui_url else None
        self.decide_wait = decide_wait
        self._deciding: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per session: the lock decisions take in this process, and how many hold or wait for it."""

    async def _read(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    def temporal_url(self, session_id: str) -> str | None:
        if not self.temporal_ui_url:
            return None
        namespace = self.client.temporal.namespace
        return f"{self.temporal_ui_url}/namespaces/{quote(namespace, safe='')}/workflows/{quote(session_id, safe='')}"

    async def _header(self, session_id: str) -> CheckpointHeader:
        header = await self._read(self.store.load_header, session_id)
        if header is None:
            raise HttpError(404, "CHECKPOINT_NOT_FOUND", f"no session {session_id!r}")
        return header

    def _item(self, pending: Pending, identity: Identity) -> ApprovalItem:
        return ApprovalItem.of(
            pending,
            temporal_url=self.temporal_url(pending.session_id),
            may_decide=identity.may_decide(pending.subagent_agent or pending.agent, pending.tool_name),
        )

    # -- approvals ----------------------------------------------------------------------------
    async def approvals(self, request: Request, identity: Identity) -> Response:
        """Waiting approvals across sessions, oldest first; filters ``agent``, ``tool``,
        ``minAge`` / ``maxAge`` (seconds waited); ``limit`` and ``cursor`` page them."""
        limit, start = _limit(request), _cursor(request)
        agent, tool = request.query_params.get("agent"), request.query_params.get("tool")
        min_age, max_age = _seconds(request, "minAge"), _seconds(request, "maxAge")
        # filtered here, not in the visibility query: a filter value is never query text
        found = await self.client.waiting_approvals()
        now = datetime.now(UTC)

        def keep(p: Pending) -> bool:
            age = (now - p.requested_at).total_seconds()
            return (
                (agent is None or agent in (p.agent, p.subagent_agent))
                and (tool is None or p.tool_name == tool)
                and (min_age is None or age >= min_age)
                and (max_age is None or age <= max_age)
            )

        matching = [p for p in found if keep(p)]
        page = [self._item(p, identity) for p in matching[start : start + limit]]
        return model_response(
            ApprovalPage(items=page, total=len(matching), next_cursor=_next_cursor(start, limit, len(matching)))
        )

    async def approval(self, request: Request, identity: Identity) -> Response:
        """The waiting call of one session, with the tool's schema and the conversation before it."""
        session_id = request.path_params["session_id"]
        pending = await self._pending(session_id)
        where = pending.subagent_session_id or session_id
        header = await self._read(self.store.load_header, where)
        spec = None
        if header is not None and header.run_config is not None:
            spec = next((t for t in header.run_config.tools if t.name == pending.tool_name), None)
        conversation: list[Message] = []
        if header is not None:
            start = max(0, header.message_count - CONVERSATION_MESSAGES)
            conversation = await self._read(self.store.load_messages, where, start, header.message_count)
            last_user = max((i for i, m in enumerate(conversation) if m.role == Role.USER), default=0)
            conversation = conversation[last_user:]
        item = self._item(pending, identity)
        detail = ApprovalDetail(
            **item.model_dump(),
            tool_description=spec.description if spec is not None else None,
            input_schema=spec.input_schema if spec is not None and spec.input_schema else None,
            conversation=conversation,
        )
        return model_response(detail)

    async def _pending(self, session_id: str) -> Pending:
        pending = await self._shown_pending(session_id)
        if pending is None:
            header = await self._read(self.store.load_header, session_id)
            if header is None:
                raise HttpError(404, "CHECKPOINT_NOT_FOUND", f"no session {session_id!r}")
            raise HttpError(404, "APPROVAL_NOT_PENDING", f"session {session_id!r} has no call waiting for approval")
        return pending

    async def decide(self, request: Request, identity: Identity) -> Response:
        """Approve or reject the session's waiting call, as ``identity``. Refused (409) when the
        approval is no longer the one pending, when its arguments are not the ones the
        approver saw (``argumentsDigest``), or when another approver decided it first."""
        session_id = request.path_params["session_id"]
        body: DecisionBody = await _body(request, DecisionBody)
        if body.arguments is not None and not body.approved:
            raise HttpError(422, "INVALID_BODY", "arguments edit an approved call: they cannot go with a rejection")
        # a decision crosses Temporal inline: one too large is refused before anything is sent (413)
        check_decision_size(session_id, body.approval_id, body.arguments, body.note, identity.name)
        lock, users = self._deciding.get(session_id) or (asyncio.Lock(), 0)
        self._deciding[session_id] = (lock, users + 1)
        try:
            async with lock:  # one decision at a time per session in this process
                return await self._decide(session_id, body, identity)
        finally:
            lock, users = self._deciding[session_id]
            if users == 1:
                del self._deciding[session_id]
            else:
                self._deciding[session_id] = (lock, users - 1)

    async def _decide(self, session_id: str, body: DecisionBody, identity: Identity) -> Response:
        try:
            pending = await self.client.pending_approval(session_id)
        except (RPCError, WorkflowQueryFailedError) as e:  # e.g. its workflow task failing, being retried
            raise HttpError(
                502, "RUN_NOT_ANSWERING", f"the run did not answer ({e}): nothing was decided; try again shortly"
            ) from None
        if pending is None or pending.approval_id != body.approval_id:
            raise await self._not_pending(session_id, body.approval_id, pending)
        if not identity.may_decide(pending.subagent_agent or pending.agent, pending.tool_name):
            raise HttpError(
                403,
                "FORBIDDEN",
                f"{identity.name} may not decide calls of {pending.tool_name} ({pending.subagent_agent or pending.agent})",
            )
        if arguments_digest(pending.arguments) != body.arguments_digest:
            raise HttpError(
                409,
                "ARGUMENTS_CHANGED",
                "the call's arguments are not the ones you saw: reload it and decide again",
            )
        if body.grant is not None:
            if not body.approved or body.arguments is not None:
                raise HttpError(
                    422,
                    "INVALID_BODY",
                    "a grant comes with an approval of the arguments shown, never a rejection or edits",
                )
            agent = pending.subagent_agent or pending.agent
            refused = grant_refusal(identity, body.grant.scope, agent, pending.tool_name)
            if refused:
                raise HttpError(403, "FORBIDDEN", refused)
        decided = asyncio.ensure_future(
            self.client.approve(
                session_id,
                body.approval_id,
                approved=body.approved,
                note=body.note,
                arguments=body.arguments,
                decided_by=identity.name,
                grant=body.grant,
            )
        )
        outcome = None
        try:
            result = await asyncio.wait_for(asyncio.shield(decided), self.decide_wait)
            outcome = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"messages"})
        except TimeoutError:
            decided.add_done_callback(_log_late)
        except ApprovalNotPendingError:
            raise await self._not_pending(session_id, body.approval_id, None) from None
        except DurableAgentsError as e:
            raise error_of(e) from None
        recorded = await self._recorded(session_id, pending)
        if outcome is None and recorded is None:
            # no outcome in time and nothing recorded: never answered as decided (a worker may be
            # down or slow, the run may not have taken it); the run may still take it later
            raise HttpError(
                504,
                "DECISION_NOT_RECORDED",
                f"the decision is not recorded: the run did not take it within {self.decide_wait:g} s "
                "(is a worker running for it?). It may still take it: reload the call to see whether it still "
                "waits before you decide again",
            )
        if recorded is not None and recorded.decided_by != identity.name:
            # the run took another approver's decision first (theirs arrived in the same instant)
            raise HttpError(
                409,
                "ALREADY_DECIDED",
                f"{recorded.decided_by or 'someone'} decided this call first",
                decided_by=recorded.decided_by,
            )
        view = DecisionView(
            approval_id=body.approval_id,
            approved=body.approved,
            decided_by=identity.name,
            decided_at=recorded.decided_at if recorded is not None else None,
            note=body.note,
            arguments=body.arguments,
        )
        return model_response(DecisionResult(decision=view, finished_waiting=outcome is not None, outcome=outcome))

    async def _recorded(self, session_id: str, pending: Pending) -> Decision | None:
        """The decision the checkpoints record for the approval (the sub-agent's session, then the
        session's), or None when none is recorded yet."""
        for where in (pending.subagent_session_id, session_id):
            if where is None:
                continue
            header = await self._read(self.store.load_header, where)
            for decision in reversed((header.decisions or []) if header is not None else []):
                if decision.approval_id == pending.approval_id:
                    return decision
        return None

    async def _not_pending(self, session_id: str, approval_id: str, pending: Pending | None) -> HttpError:
        header = await self._read(self.store.load_header, session_id)
        if header is None and pending is None and not await self._live(session_id):
            return HttpError(404, "CHECKPOINT_NOT_FOUND", f"no session {session_id!r}")
        headers = [header] if header is not None else []
        if header is not None and header.subagent_approval is not None:
            child = await self._read(self.store.load_header, header.subagent_approval.innermost().session_id)
            headers += [child] if child is not None else []
        for h in headers:
            for decision in h.decisions or []:
                if decision.approval_id == approval_id:
                    verb = "approved" if decision.approved else "rejected"
                    return HttpError(
                        409,
                        "ALREADY_DECIDED",
                        f"{decision.decided_by or 'someone'} {verb} this call first",
                        decided_by=decision.decided_by,
                    )
        now = f"; the call waiting now is {pending.approval_id}" if pending is not None else ""
        return HttpError(409, "APPROVAL_NOT_PENDING", f"approval {approval_id} is not waiting for a decision{now}")

    async def _live(self, session_id: str) -> bool:
        """Whether Temporal has a running run of the session (False when it cannot say)."""
        with contextlib.suppress(Exception):
            described = await self.client.temporal.get_workflow_handle(session_id).describe()
            return described.status == WorkflowExecutionStatus.RUNNING
        return False

    async def audit(self, request: Request, identity: Identity) -> Response:
        """Past decisions, newest first: from the sessions saved most recently (``limit`` decisions)."""
        limit = _limit(request)
        agent = request.query_params.get("agent")
        sessions = await self._read(lambda: self.store.list_sessions(agent=agent))
        sessions.sort(key=lambda s: s.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)
        entries: list[AuditEntry] = []
        for summary in sessions:
            header = await self._read(self.store.load_header, summary.session_id)
            for decision in (header.decisions or []) if header is not None else []:
                entries.append(AuditEntry(session_id=summary.session_id, agent=header.agent, decision=decision))
            if len(entries) >= limit * 4:
                break
        entries.sort(key=lambda e: e.decision.decided_at, reverse=True)
        return model_response(AuditPage(items=entries[:limit]))

    # -- sessions ---------------------------------------------------------------------------
    async def sessions(self, request: Request, identity: Identity) -> Response:
        """Sessions, last saved first; ``q`` (in the session id or agent), ``status``, ``agent``."""
        limit, start = _limit(request), _cursor(request)
        raw_status, agent = request.query_params.get("status"), request.query_params.get("agent")
        q = (request.query_params.get("q") or "").lower()
        try:
            status = CheckpointStatus(raw_status) if raw_status else None
        except ValueError:
            choices = ", ".join(s.value for s in CheckpointStatus)
            raise HttpError(400, "BAD_REQUEST", f"status={raw_status!r}: one of {choices}") from None
        found = await self._read(lambda: self.store.list_sessions(status=status, agent=agent))
        if q:
            found = [s for s in found if q in s.session_id.lower() or q in (s.agent or "").lower()]
        found.sort(key=lambda s: s.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)
        return model_response(
            SessionPage(
                items=found[start : start + limit], total=len(found), next_cursor=_next_cursor(start, limit, len(found))
            )
        )

    async def session(self, request: Request, identity: Identity) -> Response:
        session_id = request.path_params["session_id"]
        header = await self._header(session_id)
        pending = None
        if header.status == CheckpointStatus.AWAITING_APPROVAL:
            with contextlib.suppress(DurableAgentsError):
                found = await self._shown_pending(session_id)
                pending = self._item(found, identity) if found is not None else None
        entries = await self._read(self._history, session_id)
        return model_response(
            SessionView(header=header, pending=pending, temporal_url=self.temporal_url(session_id), history=entries)
        )

    async def _shown_pending(self, session_id: str) -> Pending | None:
        """The session's waiting call for a read: the run's answer, or what the store records
        while the run cannot answer (its workflow task failing and retried, say), never a 500."""
        try:
            return await self.client.pending_approval(session_id)
        except (RPCError, WorkflowQueryFailedError) as e:
            log.warning("session %r: its run did not answer (%s): showing what the store records", session_id, e)
            return await self._read(pending_from_store, self.store, session_id)

    def _history(self, session_id: str) -> list[HistoryItem]:
        try:
            kept = self.store.history(session_id)
        except NotImplementedError:
            return []
        return [HistoryItem(entry=i, step=e.step, saved_at=e.saved_at, status=e.status) for i, e in enumerate(kept, 1)]

    async def transcript(self, request: Request, identity: Identity) -> Response:
        """The session's messages, a sub-agent call's result carrying the sub-agent's transcript."""
        session_id = request.path_params["session_id"]
        await self._header(session_id)
        return model_response(await self._read(self._transcript, session_id, 0, set()))

    def _transcript(self, session_id: str, depth: int, seen: set[str]) -> Transcript:
        seen.add(session_id)
        checkpoint = self.store.load(session_id)
        if checkpoint is None:
            return Transcript(session_id=session_id)
        nested: dict[str, str] = {}
        """tool call id → the sub-agent session its result (or its wait) names"""
        for message in checkpoint.messages:
            child = _subagent_of(message)
            if child is not None and message.tool_call_id:
                nested[message.tool_call_id] = child
        waiting = checkpoint.subagent_approval
        if waiting is not None:
            calls = [c for m in checkpoint.messages if m.role == Role.ASSISTANT for c in m.tool_calls or []]
            parent_call = next((c.id for c in reversed(calls) if c.id not in nested), None)
            if parent_call is not None:
                nested[parent_call] = waiting.session_id
        messages = []
        for position, message in enumerate(checkpoint.messages):
            subagent = None
            key = message.tool_call_id if message.role == Role.TOOL else None
            if key is None and message.role == Role.ASSISTANT and waiting is not None:
                key = next((c.id for c in message.tool_calls or [] if nested.get(c.id) == waiting.session_id), None)
            if key in nested and depth < SUBAGENT_DEPTH and nested[key] not in seen:
                subagent = self._transcript(nested.pop(key), depth + 1, seen)
            messages.append(TranscriptMessage(position=position, message=message, subagent=subagent))
        return Transcript(session_id=session_id, agent=checkpoint.agent, status=checkpoint.status, messages=messages)

    async def diff(self, request: Request, identity: Identity) -> Response:
        """``compare_trajectories`` of sessions ``a`` and ``b``."""
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not a or not b:
            raise HttpError(400, "BAD_REQUEST", "name the two sessions: ?a=SESSION&b=SESSION")
        first: Checkpoint | None = await self._read(self.store.load, a)
        second: Checkpoint | None = await self._read(self.store.load, b)
        for sid, checkpoint in ((a, first), (b, second)):
            if checkpoint is None:
                raise HttpError(404, "CHECKPOINT_NOT_FOUND", f"no session {sid!r}")
        assert first is not None and second is not None
        return model_response(compare_trajectories(first, second))

    async def fork(self, request: Request, identity: Identity) -> Response:
        """Fork the session from a kept step with a patch (the ``ForkSession`` workflow)."""
        session_id = request.path_params["session_id"]
        body: ForkBody = await _body(request, ForkBody)
        await self._header(session_id)
        try:
            patch = Patch.model_validate(body.patch or {})
        except ValidationError as e:
            raise HttpError(422, "INVALID_BODY", f"patch: {e.errors()[0]['msg']}") from None
        try:
            forked = await self.client.fork(
                session_id, body.from_step, patch, new_session_id=body.new_session_id, entry=body.entry
            )
        except DurableAgentsError as e:
            raise error_of(e) from None
        return model_response(ForkView(session_id=forked.session_id, step=forked.step), 201)

    # -- events -----------------------------------------------------------------------------
    async def events(self, request: Request, identity: Identity) -> Response:
        """The session's event log as Server-Sent Events: ``id`` is the event's offset in the log,
        so a client that reconnects with ``Last-Event-ID`` (or ``?after=``) gets every event after
        the last it saw, none twice. ``follow=false``: what is there now, then the stream ends."""
        session_id = request.path_params["session_id"]
        await self._header(session_id)
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            after = int(raw)
        except ValueError:
            raise HttpError(
                400, "BAD_REQUEST", f"Last-Event-ID / after={raw!r}: an event id (a whole number)"
            ) from None
        if after < 0:
            raise HttpError(400, "BAD_REQUEST", "Last-Event-ID / after: an event id (a whole number >= 0)")
        follow = request.query_params.get("follow", "true").lower() not in ("false", "0", "no")
        try:
            await self._read(self.store.last_event_offset, session_id)
        except NotImplementedError:
            raise HttpError(400, "NO_EVENT_LOG", f"{type(self.store).__name__} keeps no event log") from None
        return StreamingResponse(
            self._sse(request, session_id, after, follow),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _sse(self, request: Request, session_id: str, after: int, follow: bool) -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        quiet_since = asyncio.get_running_loop().time()
        keepalive_at = quiet_since + SSE_KEEPALIVE_SECONDS
        while True:
            rows = await self._read(self.store.read_events, session_id, after, SSE_BATCH)
            for row in rows:
                after = row.offset
                kind = _event_type(row.body)
                yield f"id: {row.offset}\nevent: {kind}\ndata: {_one_line(row.body)}\n\n"
            if len(rows) == SSE_BATCH:
                continue
            if not follow:
                return
            now = asyncio.get_running_loop().time()
            if rows:
                quiet_since, keepalive_at = now, now + SSE_KEEPALIVE_SECONDS
            elif now >= keepalive_at:
                keepalive_at = now + SSE_KEEPALIVE_SECONDS
                yield ": keep-alive\n\n"
            if await request.is_disconnected():
                return
            await asyncio.sleep(SSE_POLL_SECONDS if now - quiet_since < 2.0 else SSE_IDLE_POLL_SECONDS)


def _event_type(body: str) -> str:
    try:
        kind = json.loads(body).get("type")
    except (ValueError, AttributeError):
        return "message"
    return kind if isinstance(kind, str) and kind.replace("-", "").isalnum() else "message"


def _one_line(body: str) -> str:
    """An event's JSON as one ``data:`` line (JSON text holds no raw newline but may hold U+2028 etc.)."""
    return json.dumps(json.loads(body), separators=(",", ":")) if "\n" in body or "\r" in body else body


def _subagent_of(message: Message) -> str | None:
    if message.role != Role.TOOL or not message.content or "subagentSessionId" not in message.content:
        return None
    try:
        value = json.loads(message.content)
    except ValueError:
        return None
    child = value.get("subagentSessionId") if isinstance(value, dict) else None
    return child if isinstance(child, str) else None


def _log_late(task: asyncio.Future[Any]) -> None:
    """A decision whose outcome came after its request was answered: its error is not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("a decision failed after it was answered: %s", task.exception())


__all__ = ["Api", "HttpError"]
