"""Store maintenance: ``delete`` and ``prune``."""

from __future__ import annotations

import argparse

from durable_agents.checkpoint.errors import DurableAgentsError
from durable_agents.cli._common import client_of, command_prefix, duration, live_run, load_header, store_of
from durable_agents.cli._render import plural


def register(sub: argparse._SubParsersAction) -> None:
    delete = sub.add_parser("delete", help="delete a session's checkpoint (and its history)")
    delete.add_argument("session")
    delete.add_argument(
        "--keep-history",
        action="store_true",
        help="keep its history entries (the session can still be forked from them)",
    )
    delete.set_defaults(func=cmd_delete)

    prune = sub.add_parser("prune", help="delete sessions and history entries last saved before a cutoff")
    prune.add_argument(
        "--older-than",
        type=duration,
        required=True,
        metavar="AGE",
        help="age with a unit s, m, h or d, e.g. 30d or 12h",
    )
    prune.set_defaults(func=cmd_prune)


async def cmd_delete(args: argparse.Namespace) -> int:
    load_header(args, args.session)
    client = await client_of(args)
    if await live_run(client, args.session):
        raise DurableAgentsError(
            f"session {args.session!r} has a live run: cancel it first ({command_prefix(args)} cancel {args.session})"
        )
    store_of(args).delete(args.session, keep_history=args.keep_history)
    kept = " (history kept)" if args.keep_history else ""
    print(f"deleted session {args.session}{kept}")
    return 0


async def cmd_prune(args: argparse.Namespace) -> int:
    removed = store_of(args).prune(args.older_than)
    print(f"pruned {plural(removed, 'session')}, and history entries, last saved more than {_age(args.older_than)} ago")
    return 0


def _age(delta) -> str:
    seconds = delta.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
