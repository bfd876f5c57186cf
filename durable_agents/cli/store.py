"""Store maintenance: ``delete`` and ``prune``."""

from __future__ import annotations

import argparse

from durable_agents.checkpoint.errors import ConfigurationError, DurableAgentsError
from durable_agents.checkpoint.format import CheckpointStatus
from durable_agents.checkpoint.stores._subagents import subagent_sessions
from durable_agents.cli._common import client_of, command_prefix, duration, live_run, load_header, store_of
from durable_agents.cli._render import plural
from durable_agents.workflows.contracts import AGENT_RUN_WORKFLOW


def register(sub: argparse._SubParsersAction) -> None:
    delete = sub.add_parser(
        "delete", help="delete a session's checkpoint (and its history), with its sub-agent sessions"
    )
    delete.add_argument("session")
    delete.add_argument(
        "--keep-history",
        action="store_true",
        help="keep its history entries (the session can still be forked from them)",
    )
    delete.add_argument(
        "--force", action="store_true", help="delete it even while it has a live run or waits for approval"
    )
    delete.set_defaults(func=cmd_delete)

    prune = sub.add_parser(
        "prune",
        help="delete sessions and history entries last saved before a cutoff (a parent and its "
        "sub-agent sessions go together, or stay together)",
    )
    prune.add_argument(
        "--older-than",
        type=duration,
        required=True,
        metavar="AGE",
        help="age with a unit s, m, h or d, e.g. 30d or 12h",
    )
    prune.add_argument(
        "--force", action="store_true", help="prune sessions with a live run or waiting for approval too"
    )
    prune.set_defaults(func=cmd_prune)


async def cmd_delete(args: argparse.Namespace) -> int:
    header = load_header(args, args.session)
    client = await client_of(args)
    if not args.force and await live_run(client, args.session):
        raise DurableAgentsError(
            f"session {args.session!r} has a live run: cancel it first ({command_prefix(args)} cancel "
            f"{args.session}), or delete it anyway with --force (the run then stops)"
        )
    if not args.force and header.status == CheckpointStatus.AWAITING_APPROVAL:
        raise DurableAgentsError(
            f"session {args.session!r} waits for approval {header.approval_id}: decide it first "
            f"({command_prefix(args)} approve|reject {args.session}), or delete it anyway with --force"
        )
    parent = header.parent_session_id
    if not args.force and parent is not None and store_of(args).load_header(parent) is not None:
        raise DurableAgentsError(
            f"session {args.session!r} is a sub-agent session of {parent!r} (its record of the call): "
            f"delete {parent!r}, which deletes its sub-agent sessions too, or delete this one anyway with --force"
        )
    children = subagent_sessions(store_of(args), args.session)
    store_of(args).delete(args.session, keep_history=args.keep_history)
    kept = " (history kept)" if args.keep_history else ""
    also = f" and its {plural(len(children), 'sub-agent session')}" if children else ""
    print(f"deleted session {args.session}{also}{kept}")
    return 0


async def cmd_prune(args: argparse.Namespace) -> int:
    live: set[str] = set()
    note = "kept sessions with a live run or waiting for approval (--force prunes those too)"
    if not args.force:  # sessions whose run is live keep their checkpoint, however old its last save
        try:
            client = await client_of(args)
            query = f'WorkflowType = "{AGENT_RUN_WORKFLOW}" AND ExecutionStatus = "Running"'
            live = {w.id async for w in client.temporal.list_workflows(query)}
        except ConfigurationError:  # Temporal unreachable: any unfinished session may be live
            live = {s.session_id for s in store_of(args).list_sessions(status=CheckpointStatus.IN_PROGRESS)}
            note = "Temporal is not reachable, so every unfinished session was kept (--force prunes those too)"
    removed = store_of(args).prune(args.older_than, keep=live, include_waiting=args.force)
    print(f"pruned {plural(removed, 'session')}, and history entries, last saved more than {_age(args.older_than)} ago")
    if not args.force:
        print(note)
    return 0


def _age(delta) -> str:
    seconds = delta.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
