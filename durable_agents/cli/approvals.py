"""Approvals: ``approve``, ``reject``, ``approvals``."""

from __future__ import annotations

import argparse
import getpass
import json
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from durable_agents.activities.contracts import DecisionGrant, PendingApproval, check_decision_size
from durable_agents.checkpoint.format import Decision, FormatModel, Message, Role, ToolCall
from durable_agents.cli._common import (
    UsageError,
    add_wait_flags,
    client_of,
    live_run,
    parse_json_object,
    print_models,
    store_of,
    unknown_session,
)
from durable_agents.cli._render import approvals_table, decision_text
from durable_agents.cli.runs import print_outcome, wait_for
from durable_agents.errors import ApprovalNotPendingError


class ApprovalView(FormatModel):
    """A pending approval in the documented (camelCase) format, as ``approvals --json`` prints it."""

    session_id: str
    agent: str
    approval_id: str
    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requested_at: datetime
    remaining_tool_calls: list[ToolCall] = Field(default_factory=list)
    timeout_at: datetime | None = None
    subagent_session_id: str | None = None
    """Set when the call waits in a sub-agent's session (approve ``sessionId`` all the same)."""
    subagent_agent: str | None = None
    parent_session_id: str | None = None

    @classmethod
    def of(cls, pending: PendingApproval) -> ApprovalView:
        return cls(**pending.model_dump())


def register(sub: argparse._SubParsersAction) -> None:
    approve = sub.add_parser(
        "approve", help="approve (or --reject) a session's pending tool call; prints what the run did next"
    )
    _decision_args(approve)
    approve.add_argument("--reject", action="store_true", help="reject instead of approving")
    approve.add_argument(
        "--arguments", metavar="JSON", help="run the approved call with these arguments instead (a JSON object)"
    )
    approve.add_argument(
        "--grant",
        choices=["session", "agent", "tool"],
        help="approve and stop asking: also approve the calls of this tool to come, in this session, for this "
        "agent in any session, or for any agent (a grant in the policy book; not with --arguments)",
    )
    approve.add_argument(
        "--grant-for", type=float, metavar="SECONDS", help="with --grant: it expires SECONDS after the decision"
    )
    approve.add_argument("--grant-uses", type=int, metavar="N", help="with --grant: it approves N calls at most")
    approve.add_argument(
        "--grant-when",
        metavar="JSON",
        help='with --grant: argument conditions, e.g. \'[{"arg": "amount_cents", "op": "<=", "value": 5000}]\'',
    )
    approve.set_defaults(func=cmd_decide)

    reject = sub.add_parser("reject", help="reject a session's pending tool call")
    _decision_args(reject)
    reject.set_defaults(func=cmd_decide, reject=True, arguments=None, grant=None)

    approvals = sub.add_parser("approvals", help="list the tool calls waiting for a decision, across sessions")
    approvals.add_argument("--agent", help="only this agent's sessions")
    approvals.add_argument("--json", action="store_true", help="print them as a JSON list")
    approvals.add_argument(
        "--decided",
        action="store_true",
        help="the audit instead: the decisions made, newest first, each saying who or what decided (a person, "
        "a deny or allow rule, a grant, the auto mode's evaluator, a timeout), under which policy version, and why",
    )
    approvals.add_argument("--limit", type=int, default=50, metavar="N", help="with --decided: the newest N (50)")
    approvals.set_defaults(func=cmd_approvals)


def _decision_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session")
    parser.add_argument(
        "--approval-id",
        metavar="ID",
        help="the approval to decide (default: the one pending); a different one is refused",
    )
    parser.add_argument("--note", metavar="TEXT", help="a note recorded with the decision (the model sees it)")
    parser.add_argument(
        "--by",
        metavar="NAME",
        default=None,
        help="who decided, recorded with the decision (default: your OS user name)",
    )
    parser.add_argument("--json", action="store_true", help="print the run's next outcome as JSON")
    add_wait_flags(parser)


def decider(given: str | None) -> str | None:
    """``--by``, else the OS user name (None when the system cannot say)."""
    if given is not None:
        return given
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in the environment nor in the password database
        return None


def _turn_start(messages: list[Message], tool_call_id: str) -> int:
    """Position of the assistant turn that made the call (where the transcript tail starts)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == Role.ASSISTANT and any(c.id == tool_call_id for c in m.tool_calls or []):
            return i
    return 0


def _last_turn(store: Any, session_id: str) -> int | None:
    header = store.load_header(session_id)
    messages = store.load_messages(session_id, 0, header.message_count) if header is not None else []
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == Role.ASSISTANT), None)


async def cmd_decide(args: argparse.Namespace) -> int:
    if args.reject and args.arguments is not None:
        raise UsageError("--arguments overrides an approved call's arguments; it cannot go with --reject")
    arguments = parse_json_object(args.arguments, "--arguments") if args.arguments is not None else None
    grant = _grant(args)
    # a decision crosses Temporal inline: one too large is refused here, before anything is sent
    check_decision_size(args.session, args.approval_id, arguments, args.note, args.by)
    client = await client_of(args)
    pending = await client.pending_approval(args.session)
    if pending is None:
        header = store_of(args).load_header(args.session)
        if header is None and not await live_run(client, args.session):
            raise unknown_session(args, args.session)
        status = header.status.value if header is not None else "running"
        raise ApprovalNotPendingError(
            args.session, args.approval_id, None, detail=f"no tool call is waiting for approval (status {status})"
        )
    approval_id = args.approval_id or pending.approval_id
    verb = "rejected" if args.reject else "approved"
    inside = (
        f" in sub-agent {pending.subagent_agent} ({pending.subagent_session_id})" if pending.subagent_session_id else ""
    )
    # a sub-agent's call id is not in this session's transcript: show from the turn that called it
    turn = _last_turn(store_of(args), args.session) if inside else None
    by = decider(args.by)
    started = time.perf_counter()
    decided = client.approve(
        args.session,
        approval_id,
        approved=not args.reject,
        note=args.note,
        arguments=arguments,
        decided_by=by,
        grant=grant,
    )
    result = await wait_for(args, args.session, decided)
    if not args.json:
        who = f" by {by}" if by else ""
        note = f" with note {args.note!r}" if args.note else ""
        changed = f" and arguments {args.arguments}" if arguments is not None else ""
        granted = f", granting {grant.scope}-wide (grant grant-{approval_id})" if grant is not None else ""
        print(
            f"{verb} {pending.tool_name} [{pending.tool_call_id}]{inside} (approval {approval_id})"
            f"{who}{note}{changed}{granted}\n"
        )
    start = turn if turn is not None else _turn_start(result.messages, pending.tool_call_id)
    await print_outcome(args, result, start=start, started=started)
    return 0


def _grant(args: argparse.Namespace) -> DecisionGrant | None:
    """The grant ``approve --grant …`` asks for (None without ``--grant``)."""
    scope = getattr(args, "grant", None)
    if scope is None:
        if any(getattr(args, flag, None) is not None for flag in ("grant_for", "grant_uses", "grant_when")):
            raise UsageError("--grant-for, --grant-uses and --grant-when go with --grant session|agent|tool")
        return None
    if args.arguments is not None:
        raise UsageError("--grant approves calls as the model makes them: it cannot go with --arguments")
    when = json.loads(args.grant_when) if args.grant_when else []
    try:
        return DecisionGrant(scope=scope, expires_in_seconds=args.grant_for, max_uses=args.grant_uses, when=when)
    except ValueError as e:
        raise UsageError(f"--grant: {e}") from None


class DecidedCall(FormatModel):
    """One entry of the audit (``approvals --decided --json``): a decision and its session."""

    session_id: str
    agent: str | None = None
    decision: Decision


def decided_calls(store: Any, agent: str | None, limit: int) -> list[DecidedCall]:
    """The newest ``limit`` decisions of the store's sessions (``agent``'s only, when named)."""
    sessions = sorted(
        store.list_sessions(agent=agent), key=lambda s: s.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True
    )
    found: list[DecidedCall] = []
    for summary in sessions:
        header = store.load_header(summary.session_id)
        for decision in (header.decisions or []) if header is not None else []:
            found.append(DecidedCall(session_id=summary.session_id, agent=header.agent, decision=decision))
        if len(found) >= limit * 4:
            break
    found.sort(key=lambda d: d.decision.decided_at, reverse=True)
    return found[:limit]


async def cmd_approvals(args: argparse.Namespace) -> int:
    if args.decided:  # the audit: from the store alone
        decided = decided_calls(store_of(args), args.agent, max(args.limit, 1))
        if args.json:
            print_models(decided)
        elif not decided:
            print("no decisions recorded")
        for entry in [] if args.json else decided:
            d = entry.decision
            print(f"{entry.session_id} {d.tool_name} [{d.tool_call_id}] {decision_text(d)}")
        return 0
    # from Temporal's visibility joined with the store: a waiting run is never missed
    found = await (await client_of(args)).waiting_approvals(args.agent)
    if args.json:
        print_models([ApprovalView.of(p) for p in found])
    elif not found:
        print("no approvals waiting")
    else:
        print(approvals_table(found))
    return 0
