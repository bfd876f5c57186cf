"""Runs: ``run``, ``resume``, ``watch``, ``cancel``, and how every waiting command prints an outcome.

Ctrl-C while a command waits for a run stops the waiting only: the run goes on
in Temporal, and ``watch SESSION`` follows it again (exit 130).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable

from durable_agents.checkpoint.errors import DurableAgentsError
from durable_agents.checkpoint.format import CheckpointStatus, Message, Role
from durable_agents.cli._common import (
    UsageError,
    add_wait_flags,
    client_of,
    command_prefix,
    detach_on_interrupt,
    live_run,
    no_worker_line,
    print_json,
    progress_wanted,
    store_of,
    ui_link,
    unknown_session,
)
from durable_agents.cli._live import print_events
from durable_agents.cli._render import approval_marks, pending_lines, plural, render_transcript
from durable_agents.client.result import RunResult
from durable_agents.errors import SessionFinishedError
from durable_agents.events import Event


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="send input to an agent and wait for the run")
    run.add_argument("agent", help="agent name, or MODULE:ATTR of an Agent")
    run.add_argument(
        "input", nargs="*", default=[], help="user message(s); none resumes the session (as `resume` does)"
    )
    run.add_argument("--session", help="session id (default: a new one)")
    run.add_argument("--model", help="run on another model, e.g. anthropic:claude-sonnet-4-6")
    run.add_argument(
        "--interrupt",
        action="store_true",
        help="abort the session's live run first (its unfinished tool calls get cancelled results)",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    add_stream_flags(run)
    run.add_argument(
        "--no-wait",
        action="store_true",
        help="start the run and return at once (follow it with `watch`); refuses, starting nothing, "
        "when no worker polls the task queue",
    )
    add_wait_flags(run)
    run.set_defaults(func=cmd_run)

    resume = sub.add_parser(
        "resume",
        help="continue an unfinished session (a fork, a crashed or aborted run, one stopped at its step limit)",
        description="Continue an unfinished session with no new input: a fork, a crashed or aborted run, or "
        "one stopped at its step limit (max-steps: it runs more steps). A finished session, whose agent gave "
        "its answer, is refused (exit 1): its resume would make one more model call with no new input, which "
        "a real model bills; give it new input with `run AGENT 'message' --session SESSION`, or pass --force.",
    )
    resume.add_argument("session")
    resume.add_argument("--agent", help="agent name (default: the one the session records)")
    resume.add_argument(
        "--force",
        action="store_true",
        help="resume a finished session too: one more model turn with no new input",
    )
    resume.add_argument("--json", action="store_true", help="print the result as JSON")
    add_wait_flags(resume)
    resume.set_defaults(func=cmd_resume)

    watch = sub.add_parser(
        "watch",
        help="follow a session's live run (progress, then its outcome, as `run` prints it); "
        "a finished or paused session's outcome at once",
    )
    watch.add_argument("session")
    watch.add_argument("--json", action="store_true", help="print the result as JSON")
    add_stream_flags(watch)
    watch.add_argument(
        "--after",
        type=int,
        default=None,
        metavar="OFFSET",
        help="with --stream/--events: the session's events after this offset (0: all of them); "
        "default: from the start of its latest run",
    )
    add_wait_flags(watch)
    watch.set_defaults(func=cmd_watch)

    cancel = sub.add_parser("cancel", help="abort a session's live run (the checkpoint stays resumable)")
    cancel.add_argument("session")
    cancel.add_argument("--json", action="store_true", help="print the aborted run's result as JSON")
    cancel.set_defaults(func=cmd_cancel)


def add_stream_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print the model's text as it streams, and each tool call and approval as it happens "
        "(default: on when stdout is a terminal)",
    )
    parser.add_argument(
        "--events",
        action="store_true",
        help="print every event of the run as one JSON line (the last one holds the result)",
    )


def streaming(args: argparse.Namespace) -> bool:
    if args.events or getattr(args, "after", None) is not None:
        return True
    flag = getattr(args, "stream", None)
    return flag if flag is not None else (sys.stdout.isatty() and not args.json)


# -- waiting and printing outcomes ---------------------------------------------------------
async def wait_for(
    args: argparse.Namespace, session_id: str, waiting: Awaitable[RunResult], *, progress: bool = True
) -> RunResult:
    """Await ``waiting`` (a run's outcome) with live progress on stderr when wanted.

    Ctrl-C stops the waiting, not the run: :class:`Detached` says how to follow it again.
    """
    from durable_agents.cli._progress import NoWorkerWarning, Progress

    client = await client_of(args)
    quoted = shlex.quote(session_id)
    gone_on = (
        f"stopped waiting; the run of session {quoted} goes on in Temporal: "
        f"follow it again with `{command_prefix(args)} watch {quoted}`"
    )
    async with (
        detach_on_interrupt(gone_on),
        NoWorkerWarning(client.temporal, args.task_queue, no_worker_line(args)),
        Progress(client.temporal, session_id, enabled=progress and progress_wanted(args)),
    ):
        return await waiting


async def print_outcome(
    args: argparse.Namespace,
    result: RunResult,
    *,
    start: int = 0,
    started: float | None = None,
    transcript: bool = True,
) -> None:
    """The transcript from ``start``, a summary line, the pending approval if any, the UI link."""
    link = ui_link(args, result.session_id)
    if result.drift is not None:
        print(
            f"durable-agents: warning: the agent changed since the checkpoint: {result.drift.describe()}",
            file=sys.stderr,
        )
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True, indent=2))
        if link:
            print(f"Temporal UI: {link}", file=sys.stderr)
        return
    pending = None
    if result.approval_id:
        pending = await (await client_of(args)).pending_approval(result.session_id)
    if transcript:  # (a streamed run's was printed as it went)
        print(render_transcript(result.messages, start=start, marks=approval_marks(pending)))
    took = f", {time.perf_counter() - started:.2f}s" if started is not None else ""
    print(
        f"\nsession {result.session_id}: {result.finish_reason}, {plural(result.steps, 'step')}, "
        f"{plural(len(result.tool_calls), 'tool call')}, {result.usage.input_tokens}+"
        f"{result.usage.output_tokens} tokens{took}"
    )
    if result.detail:
        print(result.detail)
    if pending is not None:
        print("\n".join(pending_lines(pending, decide=command_prefix(args))))
    if link:
        print(f"Temporal UI: {link}")


# -- commands ------------------------------------------------------------------------------
async def cmd_run(args: argparse.Namespace) -> int:
    from durable_agents._loading import load_agents
    from durable_agents._workers import no_worker_message, worker_polling
    from durable_agents.client.client import answered
    from durable_agents.client.streams import follow

    name = load_agents(args.agent)[0].name if ":" in args.agent else args.agent
    session = args.session or f"{name}-{uuid.uuid4().hex[:8]}"
    header = store_of(args).load_header(session)
    if not args.input and header is not None and header.parent_session_id is None and answered(header):
        # no input resumes: refused as `resume` refuses it (a sub-agent's session is refused as such below)
        reason = header.finish_reason.value if header.finish_reason else None
        raise SessionFinishedError(session, header.agent, reason)
    client = await client_of(args)
    if args.no_wait and not await worker_polling(client.temporal, args.task_queue):
        raise DurableAgentsError(no_worker_message(args.task_queue, command_prefix(args)))
    started = time.perf_counter()
    after = store_of(args).last_event_offset(session)
    # always streamed to the store's event log, so `watch` can follow it from anywhere
    handle = await client.start(
        name, args.input, session_id=session, model=args.model, interrupt=args.interrupt, stream=True
    )
    if args.no_wait:
        _print_started(args, name, session, handle.first_execution_run_id)
        return 0
    if streaming(args):
        return await _streamed(args, session, follow(client, session, after), started)
    result = await wait_for(args, session, client.outcome(session))
    await print_outcome(args, result, start=0 if header is None else header.message_count, started=started)
    return 0


async def _streamed(
    args: argparse.Namespace, session: str, events: AsyncIterator[Event], started: float | None = None
) -> int:
    """Print a run's events as they come (text or JSON lines), then its summary."""
    result = await wait_for(args, session, print_events(events, as_json=args.events), progress=False)
    if not args.events:
        await print_outcome(args, result, started=started, transcript=False)
    return 0


def _print_started(args: argparse.Namespace, agent: str, session: str, run_id: str | None) -> None:
    if args.json:
        print_json({"sessionId": session, "agent": agent, "taskQueue": args.task_queue, "runId": run_id})
        return
    print(f"started session {session} ({agent}) on task queue {args.task_queue!r}")
    print(f"watch it: {command_prefix(args)} watch {shlex.quote(session)}")
    if link := ui_link(args, session):
        print(f"Temporal UI: {link}")


async def cmd_resume(args: argparse.Namespace) -> int:
    client = await client_of(args)
    header = store_of(args).load_header(args.session)
    if header is None:
        raise unknown_session(args, args.session)
    if not (args.agent or header.agent):
        raise UsageError(f"session {args.session!r} records no agent: name the one to run it with --agent NAME")
    started = time.perf_counter()
    result = await wait_for(args, args.session, client.resume(args.session, agent=args.agent, force=args.force))
    # a finished session continues after its end; an unfinished one is shown from its run's start
    start = header.message_count if header.status == CheckpointStatus.FINISHED else header.run_start_index or 0
    await print_outcome(args, result, start=start, started=started)
    return 0


async def cmd_watch(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from durable_agents.client.streams import latest_run_start

    client = await client_of(args)
    before = store_of(args).load_header(args.session)
    if before is None and not await live_run(client, args.session):
        raise unknown_session(args, args.session)
    if streaming(args):
        after = args.after if args.after is not None else latest_run_start(store_of(args), args.session)
        return await _streamed(args, args.session, client.watch(args.session, after=after))
    try:
        result = await wait_for(args, args.session, client.outcome(args.session))
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND or before is None:
            raise
        raise _no_run(args, before.status, before.step_index) from None
    header = store_of(args).load_header(args.session)
    await print_outcome(args, result, start=_run_start(result.messages, header.run_start_index if header else None))
    return 0


def _run_start(messages: list[Message], index: int | None) -> int:
    """Where the run's output starts: its first input (from 0 for a session's first run, as `run` prints it)."""
    if not index or all(m.role == Role.SYSTEM for m in messages[:index]):
        return 0
    return index


def _no_run(args: argparse.Namespace, status: CheckpointStatus, step: int) -> DurableAgentsError:
    quoted, prefix = shlex.quote(args.session), command_prefix(args)
    hint = f"see it with `{prefix} show {quoted}`"
    if status == CheckpointStatus.IN_PROGRESS:
        hint += f", continue it with `{prefix} resume {quoted}`"
    return DurableAgentsError(
        f"session {args.session!r} has no run in Temporal to watch (its checkpoint: {status.value}, step {step}); {hint}"
    )


async def cmd_cancel(args: argparse.Namespace) -> int:
    client = await client_of(args)
    result = await client.cancel(args.session)
    if result is None:
        if store_of(args).load_header(args.session) is None:
            raise unknown_session(args, args.session)
        print(f"session {args.session}: no live run to cancel", file=sys.stderr)
        return 0
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True, indent=2))
    else:
        print(
            f"session {args.session}: {result.finish_reason}, {plural(len(result.tool_calls), 'tool call')} "
            f"of this run; resume it with `{command_prefix(args)} resume {args.session}`"
        )
    return 0
