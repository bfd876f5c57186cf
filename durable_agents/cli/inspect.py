"""Reading sessions from the store: ``sessions``, ``show``, ``history``, ``diff``.

These read the checkpoint store only (no Temporal connection needed); ``--json``
prints the documented checkpoint format (camelCase), parseable back with the
``checkpoint.format`` models.
"""

from __future__ import annotations

import argparse

from durable_agents.checkpoint.compare import compare_trajectories, format_comparison
from durable_agents.checkpoint.context import sent_messages, step_position
from durable_agents.checkpoint.errors import CheckpointNotFoundError
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, FinishReason, Role
from durable_agents.cli._common import (
    add_ui_flag,
    command_prefix,
    load_checkpoint,
    positive_int,
    print_json,
    print_models,
    store_of,
    ui_link,
    unknown_session,
)
from durable_agents.cli._render import (
    history_table,
    pending_positions,
    plural,
    render_checkpoint,
    render_message,
    sessions_table,
)
from durable_agents.cli._subagents import subagent_lines
from durable_agents.client.outcomes import pending_from_store

STATUSES = [s.value for s in CheckpointStatus]


def register(sub: argparse._SubParsersAction) -> None:
    sessions = sub.add_parser("sessions", help="list sessions (newest first)")
    sessions.add_argument("--status", choices=STATUSES, help="only sessions with this status")
    sessions.add_argument("--agent", help="only this agent's sessions")
    sessions.add_argument("--json", action="store_true", help="print them as a JSON list (SessionSummary)")
    sessions.set_defaults(func=cmd_sessions)

    show = sub.add_parser("show", help="a session's transcript: turns, tool calls, results, pending approval")
    show.add_argument("session")
    show.add_argument("--json", action="store_true", help="print the checkpoint (the documented format)")
    show.add_argument(
        "--as-sent",
        type=positive_int,
        metavar="STEP",
        help="the messages the model was sent for step STEP, as the run's context policy cut them",
    )
    add_ui_flag(show)
    show.set_defaults(func=cmd_show)

    history = sub.add_parser(
        "history",
        help="a session's kept checkpoints, newest first, numbered (fork from any step, or any entry)",
    )
    history.add_argument("session")
    history.add_argument("--limit", type=positive_int, metavar="N", help="at most N entries")
    history.add_argument("--json", action="store_true", help="print a JSON list of history entries")
    history.set_defaults(func=cmd_history)

    diff = sub.add_parser("diff", help="compare two sessions' trajectories: where they diverge, how they drift")
    diff.add_argument("a", metavar="A", help="a session id")
    diff.add_argument("b", metavar="B", help="another session id")
    diff.add_argument("--json", action="store_true", help="print the comparison as JSON")
    diff.set_defaults(func=cmd_diff)


async def cmd_sessions(args: argparse.Namespace) -> int:
    found = store_of(args).list_sessions(status=args.status and CheckpointStatus(args.status), agent=args.agent)
    if args.json:
        print_models(found)
    elif not found:
        print("no sessions" + (" matching" if args.status or args.agent else ""))
    else:
        print(sessions_table(found, aborted=_aborted(store_of(args), found)))
    return 0


def _aborted(store, found: list) -> set[str]:
    """The in-progress sessions whose last run was aborted (their checkpoint's finish reason says so)."""
    aborted = set()
    for summary in found:
        if summary.status == CheckpointStatus.IN_PROGRESS:
            header = store.load_header(summary.session_id)
            if header is not None and header.finish_reason == FinishReason.ABORTED:
                aborted.add(summary.session_id)
    return aborted


async def cmd_show(args: argparse.Namespace) -> int:
    checkpoint = load_checkpoint(args, args.session)
    if args.as_sent is not None:
        return _show_as_sent(args, checkpoint)
    if args.json:
        print(checkpoint.to_json())
        return 0
    store = store_of(args)
    pending = pending_from_store(store, args.session)
    recorded = [c.id for at, c in pending_positions(checkpoint.messages) if store.tool_result(args.session, at)]
    nested = subagent_lines(store, checkpoint)  # each sub-agent's turns, under its call
    print(render_checkpoint(checkpoint, pending, decide=command_prefix(args), recorded=recorded, nested=nested))
    link = ui_link(args, args.session)
    if link:
        print(f"Temporal UI: {link}")
    return 0


def _show_as_sent(args: argparse.Namespace, checkpoint: Checkpoint) -> int:
    """The request of one step, rebuilt from the checkpoint by the code that built it."""
    messages = checkpoint.messages
    position = step_position(messages, args.as_sent)
    if position is None:
        steps = sum(1 for m in messages if m.role == Role.ASSISTANT)
        raise CheckpointNotFoundError(
            f"session {args.session!r} has {plural(steps, 'step')}, no step {args.as_sent}",
            session_id=args.session,
            kept_steps=list(range(1, steps + 1)),
        )
    sent = sent_messages(messages, position)
    window = messages[position].context
    if args.json:
        print_json(
            {
                "sessionId": args.session,
                "step": args.as_sent,
                "position": position,
                "window": window.to_dict() if window is not None else None,
                "messages": [m.model_copy(update={"context": None}).to_dict() for m in sent],
            }
        )
        return 0
    how = "cut by the run's context policy" if window is not None else "the whole transcript before it"
    print(f"step {args.as_sent} (message {position}) was sent {plural(len(sent), 'message')}, {how}:")
    for message in sent:
        print("\n".join(render_message(message)))
    return 0


async def cmd_history(args: argparse.Namespace) -> int:
    store = store_of(args)
    entries = store.history(args.session, args.limit)
    if not entries and store.load_header(args.session) is None:
        raise unknown_session(args, args.session)
    if args.json:  # each entry with its number (`fork --entry`), 1 the newest
        print_json([{"entry": n, **e.to_dict()} for n, e in enumerate(entries, 1)])
    elif not entries:
        print(f"session {args.session} has no kept history")
    else:
        print(history_table(entries))
        print(
            f"\nfork from a step (its newest entry): {command_prefix(args)} fork {args.session} --from-step N"
            f"\nor from one entry of it:            {command_prefix(args)} fork {args.session} --from-step N --entry #"
        )
    return 0


async def cmd_diff(args: argparse.Namespace) -> int:
    a, b = load_checkpoint(args, args.a), load_checkpoint(args, args.b)
    comparison = compare_trajectories(a, b)
    if args.json:
        print(comparison.to_json())
    else:
        print(f"a: {args.a}\nb: {args.b}")
        print(format_comparison(comparison))
    return 0
