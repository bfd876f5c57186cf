"""Approval policies and grants: ``policy set|show|history|clear|test`` and ``grants list|add|revoke``.

``policy set`` and ``policy clear`` go through the ``ApprovalPolicies`` workflow (a worker that
serves the agent checks the policy against its tools); the others read and write the policy
book beside the store. ``policy test`` backtests a candidate policy over the decisions people
recorded (no tool runs; the auto mode's evaluator by its recorded verdicts, or run with
``--evaluate``) and exits 1 when it would approve more of what they rejected than
``--max-would-approve-rejected`` allows: a check for CI.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durable_agents.checkpoint.approval_grants import Grant
from durable_agents.checkpoint.approval_policy import AutoMode, CriteriaSet, PolicyCall, parse_policy
from durable_agents.checkpoint.format import Evaluation
from durable_agents.checkpoint.policy_backtest import BacktestReport, Evaluate, backtest, recorded_decisions
from durable_agents.checkpoint.policy_book import PolicyChange, StoredPolicy
from durable_agents.cli._common import (
    UsageError,
    client_of,
    duration,
    parse_json,
    positive_int,
    print_json,
    print_models,
    store_of,
)


def register(sub: argparse._SubParsersAction) -> None:
    policy = sub.add_parser(
        "policy", help="approval policies: set, show, history, clear, and test one against past decisions"
    )
    commands = policy.add_subparsers(dest="policy_command", required=True, metavar="SUBCOMMAND")

    set_ = commands.add_parser(
        "set",
        help="make a policy file the agent's or the session's policy (checked against the agent's tools by a "
        "worker that serves it)",
    )
    set_.add_argument(
        "--agent",
        help="the agent's policy (all its sessions); with --session: the session's agent, for a session that "
        "has not run yet (its tools are the agent's)",
    )
    set_.add_argument("--session", help="one session's policy (the agent's deny rules still apply)")
    set_.add_argument("--file", required=True, metavar="FILE", help="the policy, JSON ('-': read it from stdin)")
    set_.add_argument(
        "--check-against",
        metavar="MODULE:ATTR",
        help="check the policy against this Agent's tools here and write it to the store's policy book directly, "
        "without Temporal or a worker (e.g. myapp.agents:booker)",
    )
    _change_flags(set_)
    set_.set_defaults(func=cmd_set)

    show = commands.add_parser("show", help="the agent's or the session's policy now, with its version")
    _scope_flags(show)
    show.add_argument(
        "--effective",
        action="store_true",
        help="with --session: the policy its gated calls are decided under (the session's, plus its agent's deny "
        "rules; the agent's when the session has none)",
    )
    show.add_argument("--json", action="store_true", help="print it as JSON")
    show.set_defaults(func=cmd_show)

    history = commands.add_parser("history", help="the audit of policy changes (who, when, old -> new version)")
    _scope_flags(history, required=False)
    history.add_argument("--limit", type=positive_int, metavar="N", help="the newest N changes only")
    history.add_argument("--json", action="store_true", help="print them as a JSON list")
    history.set_defaults(func=cmd_history)

    clear = commands.add_parser("clear", help="remove the agent's or the session's policy (audited, a new version)")
    _scope_flags(clear)
    _change_flags(clear)
    clear.set_defaults(func=cmd_clear)

    test = commands.add_parser(
        "test",
        help="backtest a policy over the decisions people recorded: what it would approve that they rejected",
        description="Run a candidate policy over the gated calls people decided (the store's sessions' "
        "decisions; no tool runs) and count where it agrees, would approve what they rejected (the count "
        "that matters), approve what they only approved edited, deny what they approved, or still ask. "
        "A call the policy leaves to its auto mode is judged by the evaluator's verdict recorded on it at "
        "run time (same evaluator, same criteria set), or by the evaluator run now with --evaluate. "
        "Exit 1 when --max-would-approve-rejected is given and exceeded.",
    )
    test.add_argument("--policy", required=True, metavar="FILE", help="the candidate policy, JSON ('-': stdin)")
    test.add_argument("--agent", help="only this agent's sessions")
    test.add_argument(
        "--since",
        type=_since,
        metavar="WHEN",
        help="only decisions made since WHEN: an ISO date or time (2026-12-01, 2026-12-01T09:30) or an age (24h, 7d)",
    )
    test.add_argument("--json", metavar="PATH", help="write the report as JSON to PATH ('-': stdout, no table)")
    test.add_argument(
        "--max-would-approve-rejected",
        type=int,
        metavar="N",
        help="exit 1 when the policy would approve more than N calls people rejected (for CI)",
    )
    test.add_argument("--examples", type=int, default=5, metavar="N", help="examples of each disagreement (5)")
    test.add_argument(
        "--evaluate",
        choices=("recorded", "missing", "all"),
        default="recorded",
        help="the auto mode's evaluator: its verdicts recorded at run time only (recorded, the default: "
        "nothing runs); also run it on the calls with none (missing); run it on every call, recorded "
        "verdicts ignored, after changing the criteria (all). A model evaluator costs what its calls cost",
    )
    test.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (repeatable; the current directory importable): what registers your "
        "model providers or scripted models for a model evaluator",
    )
    test.set_defaults(func=cmd_test)

    grants = sub.add_parser("grants", help='"approve and stop asking" grants: list, add, revoke')
    gcommands = grants.add_subparsers(dest="grants_command", required=True, metavar="SUBCOMMAND")
    listing = gcommands.add_parser("list", help="the grants that apply to an agent's / a session's / a tool's calls")
    listing.add_argument("--agent", help="this agent's grants and every agent's")
    listing.add_argument("--session", help="this session's grants and those of no one session")
    listing.add_argument("--tool", help="grants for this tool only")
    listing.add_argument("--live", action="store_true", help="only those live now (not expired, used up, revoked)")
    listing.add_argument("--json", action="store_true", help="print them as a JSON list")
    listing.set_defaults(func=cmd_grants_list)

    add = gcommands.add_parser("add", help="approve a tool's calls without asking, in a session, an agent or all")
    add.add_argument("--tool", required=True, help="the tool whose calls it approves")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument("--session", help="this session's calls (a session grant)")
    where.add_argument("--agent", help="this agent's calls in any session (an agent grant)")
    where.add_argument("--all-agents", action="store_true", help="every agent's calls of the tool (a tool grant)")
    add.add_argument(
        "--when",
        action="append",
        default=[],
        metavar="JSON",
        help='an argument condition, e.g. \'{"arg": "amount_cents", "op": "<=", "value": 5000}\' (repeatable)',
    )
    add.add_argument("--for", dest="expires_in", type=duration, metavar="DURATION", help="expires after 10m, 2h …")
    add.add_argument("--uses", type=positive_int, metavar="N", help="approves at most N calls")
    add.add_argument("--note", metavar="TEXT", help="why (kept with the grant)")
    add.add_argument("--by", metavar="NAME", help="who makes it (default: your OS user name)")
    add.add_argument("--json", action="store_true", help="print the grant as JSON")
    add.set_defaults(func=cmd_grants_add)

    revoke = gcommands.add_parser("revoke", help="revoke a grant: it approves no call from now on")
    revoke.add_argument("grant_id", metavar="GRANT")
    revoke.add_argument("--by", metavar="NAME", help="who revokes it (default: your OS user name)")
    revoke.set_defaults(func=cmd_grants_revoke)


def _scope_flags(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    scope = parser.add_mutually_exclusive_group(required=required)
    scope.add_argument("--agent", help="the agent's policy (all its sessions)")
    scope.add_argument("--session", help="one session's policy (the agent's deny rules still apply)")


def _change_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expected-version",
        type=int,
        metavar="N",
        help="the version you read (0: none set); refused if another change came first",
    )
    parser.add_argument("--by", metavar="NAME", help="who makes the change (default: your OS user name)")
    parser.add_argument("--json", action="store_true", help="print the stored policy as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for a worker serving the agent to answer (30); none did: nothing changed, exit 1",
    )


def _since(text: str) -> datetime:
    try:
        return datetime.now(UTC) - duration(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid time {text!r}: an ISO date or time (2026-12-01, 2026-12-01T09:30) or an age (24h, 7d)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _read_policy_file(path: str, flag: str) -> Any:
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(path).expanduser().read_text()
        except OSError as e:
            raise UsageError(f"{flag} {path}: cannot be read ({e.strerror or e})") from None
    return parse_json(text, f"{flag} {path}")


def _write(path: str, text: str) -> None:
    try:
        Path(path).expanduser().write_text(text)
    except OSError as e:
        raise UsageError(f"--json {path}: cannot be written ({e.strerror or e})") from None


# -- policy ---------------------------------------------------------------------------------
async def cmd_set(args: argparse.Namespace) -> int:
    document = _read_policy_file(args.file, "--file")
    if not isinstance(document, dict):
        raise UsageError(f"--file {args.file}: a policy is a JSON object")
    if args.agent is None and args.session is None:
        raise UsageError("name the policy's --agent or its --session (with --agent: a session that has not run yet)")
    if args.check_against is not None:
        stored = _set_here(args, document)
        _print_stored(args, stored, "set")
        return 0
    client = await client_of(args)
    try:
        stored = await client.set_policy(
            document, agent=args.agent, session_id=args.session, by=args.by,
            expected_version=args.expected_version, timeout=args.timeout,
        )  # fmt: skip
    except TimeoutError as e:
        return _no_worker(e)
    _print_stored(args, stored, "set")
    return 0


async def cmd_clear(args: argparse.Namespace) -> int:
    client = await client_of(args)
    try:
        stored = await client.clear_policy(
            agent=args.agent, session_id=args.session, by=args.by, expected_version=args.expected_version,
            timeout=args.timeout,
        )  # fmt: skip
    except TimeoutError as e:
        return _no_worker(e)
    _print_stored(args, stored, "cleared")
    return 0


def _set_here(args: argparse.Namespace, document: dict[str, Any]) -> StoredPolicy:
    """``policy set --check-against``: checked against an agent loaded here, written directly."""
    from durable_agents._loading import load_object
    from durable_agents.agent.agent import Agent

    agent = load_object("--check-against", args.check_against, "myapp.agents:booker")
    if not isinstance(agent, Agent):
        raise UsageError(f"--check-against {args.check_against!r}: {type(agent).__name__} is not an Agent")
    if args.agent is not None and agent.name != args.agent:
        raise UsageError(f"--check-against {args.check_against!r} is agent {agent.name!r}, not --agent {args.agent!r}")
    return _admin(args).set_policy(
        document, against=agent, agent=None if args.session is not None else args.agent, session_id=args.session,
        by=args.by, expected_version=args.expected_version,
    )  # fmt: skip


def _no_worker(error: TimeoutError) -> int:
    print(f"durable-agents: error: {error}", file=sys.stderr)
    return 1


def _admin(args: argparse.Namespace) -> Any:
    from durable_agents.client.policies import PolicyAdmin

    return PolicyAdmin(store_of(args))


async def cmd_show(args: argparse.Namespace) -> int:
    if args.effective:
        return _show_effective(args)
    stored = _admin(args).policy(agent=args.agent, session_id=args.session)
    if args.json:
        print(stored.model_dump_json(by_alias=True, indent=2))
        return 0
    if stored.version == 0:
        print(f"{stored.scope}: no policy (never set): every gated call asks a person")
        return 0
    print(_stored_line(stored))
    if stored.policy is not None:
        print(json.dumps(stored.policy.to_dict(), indent=2, ensure_ascii=False))
    return 0


def _show_effective(args: argparse.Namespace) -> int:
    from durable_agents.checkpoint.policy_book import effective_policy

    if args.session is None:
        raise UsageError("--effective is for a session (--session S): an agent's policy is its own")
    header = store_of(args).load_header(args.session)
    if header is None or not header.agent:
        raise UsageError(f"no session {args.session!r} in the store: its agent (whose deny rules hold) is unknown")
    admin = _admin(args)
    agent, session = admin.policy(agent=header.agent), admin.policy(session_id=args.session)
    policy = effective_policy(agent.policy, session.policy)
    if args.json:
        print_json(policy.to_dict() if policy is not None else None)
        return 0
    print(
        f"session {args.session!r} of agent {header.agent!r}: agent policy v{agent.version}, session policy v{session.version}"
    )
    if policy is None:
        print("no policy: every gated call asks a person")
    else:
        print(json.dumps(policy.to_dict(), indent=2, ensure_ascii=False))
    return 0


def _stored_line(stored: StoredPolicy) -> str:
    what = "no policy (cleared)" if stored.policy is None else f"policy {stored.digest}"
    when = stored.changed_at.isoformat(timespec="seconds") if stored.changed_at else "?"
    return f"{stored.scope}: version {stored.version}, {what}, changed by {stored.changed_by} at {when}"


def _print_stored(args: argparse.Namespace, stored: StoredPolicy, verb: str) -> None:
    if args.json:
        print(stored.model_dump_json(by_alias=True, indent=2))
    else:
        print(f"{verb}: {_stored_line(stored)}")


async def cmd_history(args: argparse.Namespace) -> int:
    changes: list[PolicyChange] = _admin(args).policy_changes(
        agent=args.agent, session_id=args.session, limit=args.limit
    )
    if args.json:
        print_models(changes)
    elif not changes:
        print("no policy changes")
    else:
        for change in changes:
            when = change.changed_at.isoformat(timespec="seconds")
            what = "cleared" if change.cleared else f"set {change.new_digest}"
            print(
                f"{when}  {change.scope}  v{change.from_version} -> v{change.to_version}  {change.changed_by}  {what}"
            )
    return 0


async def cmd_test(args: argparse.Namespace) -> int:
    document = _read_policy_file(args.policy, "--policy")
    if not isinstance(document, dict):
        raise UsageError(f"--policy {args.policy}: a policy is a JSON object")
    policy = parse_policy(document)
    evaluate = _evaluator(args.imports) if args.evaluate != "recorded" and policy.auto is not None else None
    recorded = recorded_decisions(store_of(args), agent=args.agent, since=args.since)
    # (in a thread: the evaluator's calls run on this event loop, one at a time)
    report = await asyncio.to_thread(
        backtest, policy, recorded, examples=args.examples, evaluate=evaluate, rerun=args.evaluate == "all"
    )
    if args.json is not None:
        text = report.model_dump_json(by_alias=True, indent=2)
        if args.json == "-":
            print(text)
        else:
            _write(args.json, text + "\n")
    if args.json != "-":
        print(backtest_table(report, agent=args.agent, since=args.since))
    limit = args.max_would_approve_rejected
    if limit is not None and report.would_approve_rejected > limit:
        print(
            f"durable-agents: policy test: the policy would approve {report.would_approve_rejected} call(s) people "
            f"rejected, over --max-would-approve-rejected {limit}",
            file=sys.stderr,
        )
        return 1
    return 0


def _evaluator(imports: list[str]) -> Evaluate:
    """The auto mode's evaluator, run from the backtest's thread on this event loop (its
    ``timeoutSeconds`` applies; an error or a timeout is an escalation, as at run time)."""
    from durable_agents.activities.approval_policy import run_evaluator  # (only here: what it loads)
    from durable_agents.providers.registry import ProviderRegistry

    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    for module in imports:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise UsageError(f"--import {module}: cannot import it ({e})") from e
    loop, providers = asyncio.get_running_loop(), ProviderRegistry()

    def evaluate(call: PolicyCall, auto: AutoMode, criteria: CriteriaSet) -> Evaluation:
        minimum = criteria.min_confidence if criteria.min_confidence is not None else auto.min_confidence
        judging = run_evaluator(
            providers, auto.evaluator, criteria, minimum, call, timeout_seconds=auto.timeout_seconds
        )
        return asyncio.run_coroutine_threadsafe(judging, loop).result()

    return evaluate


def backtest_table(report: BacktestReport, *, agent: str | None = None, since: datetime | None = None) -> str:
    """The report as people read it: the counts, the count that matters first, then by rule."""
    where = f" of {agent}" if agent else ""
    after = f" since {since.isoformat(timespec='seconds')}" if since else ""
    lines = [f"policy version {report.policy_version}: {report.total} recorded decisions{where}{after}"]
    rows = [
        ("would approve what people rejected", report.would_approve_rejected, "  <- the count that matters"),
        ("would approve what people edited first", report.would_approve_edited, ""),
        ("would deny what people approved", report.would_deny_approved, ""),
        ("agree with people", report.agree, ""),
        ("would still ask a person", report.would_ask_person, ""),
        ("would ask the evaluator (no verdict known)", report.would_ask_evaluator, ""),
        ("no person decided (timed out)", report.no_person, ""),
    ]
    width = max(len(str(count)) for _, count, _ in rows)
    lines += [f"  {label:<40} {count:>{width}}{mark}" for label, count, mark in rows]
    judged = report.evaluator_recorded + report.evaluator_run
    if judged or report.would_ask_evaluator:
        cost = f", cost ${report.evaluator_cost_usd:.4f}" if report.evaluator_cost_usd is not None else ""
        failed = f" ({report.evaluator_failed} failed: asking a person)" if report.evaluator_failed else ""
        lines.append(
            f"evaluator: {report.evaluator_recorded} verdicts recorded at run time, {report.evaluator_run} run now"
            f"{failed}{cost}"
            + (
                ""
                if report.evaluator_run
                else "; --evaluate missing runs it on the others"
                if report.would_ask_evaluator
                else ""
            )
        )
    if report.by_rule:
        lines.append("by rule:")
        name_width = max(len(name) for name in report.by_rule)
        for name, tally in report.by_rule.items():
            lines.append(
                f"  {name:<{name_width}}  decided {tally.decided}, agree {tally.agree}, against {tally.against}"
            )
    if report.examples:
        lines.append("examples:")
        for example in report.examples:
            call = example.recorded.call
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            if len(arguments) > 120:
                arguments = arguments[:117] + "..."
            why = example.decision.reason
            if example.evaluation is not None:
                why = f"evaluator {example.evaluation.verdict} at {example.evaluation.confidence or 0:.2f}: "
                why += example.evaluation.reasoning or "no reasoning given"
            lines.append(f"  {example.verdict}: {call.session_id} {call.tool} {arguments} ({why})")
    return "\n".join(lines)


# -- grants ---------------------------------------------------------------------------------
async def cmd_grants_list(args: argparse.Namespace) -> int:
    found: list[Grant] = _admin(args).grants(agent=args.agent, session_id=args.session, tool=args.tool, live=args.live)
    if args.json:
        print_models(found)
    elif not found:
        print("no grants")
    else:
        for grant in found:
            print(grant_line(grant))
    return 0


def grant_line(grant: Grant) -> str:
    scope = grant.scope
    where = {
        "session": f"session {scope.session_id} ({scope.agent})",
        "agent": f"agent {scope.agent}",
        "tool": "every agent",
    }[scope.kind]
    conditions = " when " + " and ".join(c.describe() for c in scope.when) if scope.when else ""
    uses = f", {grant.uses}/{grant.max_uses} uses" if grant.max_uses is not None else f", {grant.uses} uses"
    expires = f", expires {grant.expires_at.isoformat(timespec='seconds')}" if grant.expires_at else ""
    revoked = f" by {grant.revoked_by}" if grant.revoked_at is not None else ""
    return (
        f"{grant.id}  [{grant_state(grant)}{revoked}]  {scope.tool} in {where}{conditions}{uses}{expires}, "
        f"by {grant.created_by}"
    )


def grant_state(grant: Grant, now: datetime | None = None) -> str:
    """``live``, ``revoked``, ``expired``, ``used up`` or ``not yet valid``, at ``now``."""
    now = now or datetime.now(UTC)
    if grant.revoked_at is not None and now >= grant.revoked_at:
        return "revoked"
    if grant.expires_at is not None and now >= grant.expires_at:
        return "expired"
    if grant.max_uses is not None and grant.uses >= grant.max_uses:
        return "used up"
    return "not yet valid" if now < grant.created_at else "live"


async def cmd_grants_add(args: argparse.Namespace) -> int:
    conditions = []
    for text in args.when:
        value = parse_json(text, "--when")
        conditions += value if isinstance(value, list) else [value]
    kind = "session" if args.session else "agent" if args.agent else "tool"
    grant = _admin(args).grant(
        kind, args.tool, agent=args.agent, session_id=args.session, when=conditions, expires_in=args.expires_in,
        max_uses=args.uses, by=args.by, note=args.note,
    )  # fmt: skip
    if args.json:
        print_json(grant.to_dict())
    else:
        print(f"granted: {grant_line(grant)}")
    return 0


async def cmd_grants_revoke(args: argparse.Namespace) -> int:
    revocation = _admin(args).revoke_grant(args.grant_id, by=args.by)
    grant = revocation.grant
    if revocation.revoked:
        print(f"revoked {grant.id} ({grant.scope.tool}) by {grant.revoked_by}")
    else:
        print(f"{grant.id} was revoked already, by {grant.revoked_by}: nothing changed")
    return 0
