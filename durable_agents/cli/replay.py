"""``replay``, ``replay-worker`` and ``export``: evaluate a changed agent against recorded runs.

``replay SESSION… --against MODULE:AGENT`` replays each session (or the sessions a
selection or a dataset file names) with a replay worker in this process (or, with
``--workers-elsewhere``, on the ``replay-worker`` processes serving ``--replay-queue``),
then prints the regression report, writes it as JSON and JUnit XML when asked, and exits 1
when more sessions changed than ``--max-changed`` allows (a CI gate).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durable_agents.checkpoint.dataset import DatasetRecordings, Recordings, StoreRecordings, select_sessions
from durable_agents.checkpoint.format import CheckpointStatus
from durable_agents.checkpoint.replay import check_tag, new_tag
from durable_agents.checkpoint.replay_report import ReplayReport, Scorer, parse_threshold
from durable_agents.cli._common import UsageError, client_of, command_prefix, positive_int, store_of

REGRESSION_EXIT = 1
"""The exit code when the report passes ``--max-changed`` (a failed CI job)."""


def register(sub: argparse._SubParsersAction) -> None:
    replay = sub.add_parser(
        "replay",
        help="replay recorded sessions against a changed agent (tools answered from the recording) and report",
        description="Each session is driven again from its first user message (or --from-step) by the changed "
        "agent, in a new session SESSION.replay-TAG. Tool calls are answered from the recording; a call with no "
        "recording gets an error result (--unrecorded). No tool with side effects runs unless --live-tool names it.",
    )
    replay.add_argument("sessions", nargs="*", metavar="SESSION", help="sessions to replay (or select them below)")
    replay.add_argument("--against", required=True, metavar="MODULE:AGENT", help="the changed agent")
    replay.add_argument("--dataset", type=Path, metavar="FILE", help="replay the sessions of this file (`export`)")
    add_selection(replay)
    add_policy_flags(replay)
    replay.add_argument("--from-step", type=int, default=0, metavar="N", help="start after step N of each source")
    replay.add_argument("--model", metavar="PROVIDER:MODEL", help="a model override for every replayed run")
    replay.add_argument("--tag", metavar="TAG", help="names the batch and its sessions (default: a new one); "
                        "the same tag again goes on with that batch")  # fmt: skip
    replay.add_argument("--concurrency", type=positive_int, default=8, metavar="N", help="sessions at once (8)")
    replay.add_argument(
        "--workers-elsewhere",
        action="store_true",
        help="start no worker here: replay-worker processes serve --replay-queue",
    )
    replay.add_argument("--replay-queue", metavar="QUEUE", help="the replay workers' task queue "
                        "(default: TASK_QUEUE.replay with --workers-elsewhere, else one of the batch's own)")  # fmt: skip
    add_report_flags(replay)
    replay.set_defaults(func=cmd_replay)

    worker = sub.add_parser(
        "replay-worker",
        help="a worker for replays of a changed agent (run many, on machines sharing the store)",
    )
    worker.add_argument("--against", required=True, metavar="MODULE:AGENT", help="the changed agent")
    worker.add_argument("--dataset", type=Path, metavar="FILE", help="read the sources from this file")
    worker.add_argument("--replay-queue", metavar="QUEUE", help="its task queue (default: TASK_QUEUE.replay)")
    add_policy_flags(worker)
    worker.set_defaults(func=cmd_replay_worker)

    export = sub.add_parser(
        "export", help="write sessions to a dataset file (one checkpoint a line) to replay without the store"
    )
    export.add_argument("sessions", nargs="*", metavar="SESSION")
    export.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    export.add_argument(
        "--redact", metavar="MODULE:FUNCTION", help="a function(checkpoint) -> checkpoint applied to each first"
    )
    add_selection(export)
    export.set_defaults(func=cmd_export)


# -- shared flags -----------------------------------------------------------------------------
def add_selection(parser: Any) -> None:
    parser.add_argument("--agent", dest="select_agent", metavar="NAME", help="select the sessions of this agent")
    parser.add_argument(
        "--status", choices=[s.value for s in CheckpointStatus], help="select sessions with this status"
    )
    parser.add_argument("--since", type=date_time, metavar="DATE", help="select sessions saved on or after DATE")
    parser.add_argument("--until", type=date_time, metavar="DATE", help="select sessions saved on or before DATE")


def add_policy_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--match",
        default="arguments",
        metavar="POLICY",
        help="which recorded call answers a call: arguments (same tool and arguments; default), position "
        "(the same place, same tool) or MODULE:FUNCTION",
    )
    parser.add_argument(
        "--unrecorded",
        default="error",
        metavar="POLICY",
        help="a call with no recording gets: error (an error result; default), live (the tool runs when it "
        "is safe_to_retry or named by --live-tool) or MODULE:FUNCTION (a stub)",
    )
    parser.add_argument(
        "--live-tool", action="append", default=[], metavar="TOOL", help="a side-effecting tool allowed to run"
    )


def add_report_flags(parser: Any, *, json_flag: bool = True) -> None:
    parser.add_argument(
        "--score",
        action="append",
        default=[],
        metavar="[NAME=]MODULE:FUNCTION",
        help="a column: function(source, replay) -> number; repeatable",
    )
    parser.add_argument(
        "--max-changed",
        metavar="N|P%",
        help="exit 1 when more sessions changed (diverged or failed) than this: a count or a share",
    )
    if json_flag:
        parser.add_argument("--json", metavar="FILE", help="write the report as JSON (- for stdout, then no table)")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="write the report as JUnit XML")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="rows in the table (default: all)")


def date_time(text: str) -> datetime:
    """argparse type: an ISO date or date-time (UTC unless it says)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid date {text!r}: write it as 2026-12-01 or 2026-12-01T09:30") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _function(spec: str, flag: str) -> Callable[..., Any]:
    from durable_agents._loading import load_object  # (it imports the agent layer: only when asked)

    found = load_object(flag, spec, "myapp.evals:same_answer")
    if not callable(found):
        raise UsageError(f"{flag} {spec!r}: {type(found).__name__} is not a function")
    return found


def policy_of(args: argparse.Namespace):
    from durable_agents.replay.policy import ReplayPolicy

    match: Any = args.match if args.match in ("arguments", "position") else _function(args.match, "--match")
    unrecorded: Any = (
        args.unrecorded if args.unrecorded in ("error", "live") else _function(args.unrecorded, "--unrecorded")
    )
    return ReplayPolicy(match=match, unrecorded=unrecorded, live_tools=tuple(args.live_tool))


def against_of(args: argparse.Namespace):
    from durable_agents._loading import load_agents

    agents = load_agents(args.against)
    if len(agents) != 1:
        raise UsageError(f"--against {args.against!r}: names {len(agents)} agents; name one")
    return agents[0]


def scorers_of(args: argparse.Namespace) -> dict[str, Scorer]:
    scorers: dict[str, Scorer] = {}
    for spec in args.score:
        name, sep, target = spec.partition("=")
        if not sep:
            name, target = spec.rpartition(":")[2], spec
        scorers[name] = _function(target, "--score")
    return scorers


def recordings_of(args: argparse.Namespace) -> Recordings:
    if args.dataset is not None:
        return DatasetRecordings(args.dataset)
    return StoreRecordings(store_of(args))


def chosen_sessions(args: argparse.Namespace, recordings: Recordings) -> list[str]:
    """The sessions named, else those selected (from the dataset file, or the store)."""
    selecting = any(getattr(args, k) is not None for k in ("select_agent", "status", "since", "until"))
    if args.sessions and selecting:
        raise UsageError("name sessions or select them (--agent, --status, --since, --until), not both")
    if args.sessions:
        return list(args.sessions)
    if isinstance(recordings, DatasetRecordings):
        found = [recordings.load(s) for s in recordings.session_ids()]
        return [
            c.session_id
            for c in found
            if c is not None
            and (args.select_agent is None or c.agent == args.select_agent)
            and (args.status is None or c.status == args.status)
            and (args.since is None or (c.updated_at is not None and c.updated_at >= args.since))
            and (args.until is None or (c.updated_at is not None and c.updated_at <= args.until))
        ]
    if not selecting:
        raise UsageError("name the sessions, or select them with --agent, --status, --since or --until")
    return select_sessions(
        store_of(args), agent=args.select_agent, status=args.status, since=args.since, until=args.until
    )


# -- replay -----------------------------------------------------------------------------------
async def cmd_replay(args: argparse.Namespace) -> int:
    threshold = parse_threshold(args.max_changed) if args.max_changed is not None else None  # bad flags first
    if args.tag is not None:
        check_tag(args.tag)
    scorers = scorers_of(args)
    policy = policy_of(args)
    recordings = recordings_of(args)
    sessions = chosen_sessions(args, recordings)
    if not sessions:
        raise UsageError("the selection names no session")
    tag = args.tag or new_tag()
    client = await client_of(args)
    options: dict[str, Any] = dict(
        tag=tag, from_step=args.from_step, model=args.model, concurrency=args.concurrency, recordings=recordings
    )
    if args.workers_elsewhere:
        name = against_of(args).name  # loaded here too: its name is what the runs ask the workers for
        queue = args.replay_queue or f"{args.task_queue}.replay"
        batch = await client.start_replay(sessions, agent=name, task_queue=queue, **options)
        _say_started(args, batch.tag, len(sessions), queue, name)
        report = await _follow(client, batch, recordings, scorers)
    else:
        from durable_agents.replay.worker import build_replay_worker

        agent = against_of(args)
        queue = args.replay_queue or f"{args.task_queue}.replay-{tag}"
        worker = build_replay_worker(
            client.temporal, against=agent, store=client.store, task_queue=queue, recordings=recordings,
            policy=policy,
        )  # fmt: skip
        async with worker:
            batch = await client.start_replay(sessions, agent=agent.name, task_queue=queue, **options)
            _say_started(args, batch.tag, len(sessions), queue, agent.name)
            report = await _follow(client, batch, recordings, scorers)
    return write_report(args, report, threshold)


def _say_started(args: argparse.Namespace, tag: str, count: int, queue: str, agent: str) -> None:
    if args.json != "-":
        print(f"replaying {count} session(s) against {agent} (tag {tag}, task queue {queue!r})", file=sys.stderr)


async def _follow(client: Any, batch: Any, recordings: Recordings, scorers: dict[str, Scorer]) -> ReplayReport:
    report_task = asyncio.ensure_future(client.batch_report(batch, recordings=recordings, scorers=scorers))
    if sys.stderr.isatty():
        while not report_task.done():
            try:
                done, total = await batch.progress()
                print(f"\r{done}/{total} sessions replayed", end="", file=sys.stderr, flush=True)
            except Exception:  # noqa: BLE001 - progress is best effort
                pass
            await asyncio.wait({report_task}, timeout=1.0)
        print(file=sys.stderr)
    return await report_task


def write_report(args: argparse.Namespace, report: ReplayReport, threshold: Any) -> int:
    if args.json == "-":
        print(report.model_dump_json(by_alias=True, indent=2))
    else:
        print(report.table(args.limit))
        if args.json:
            Path(args.json).write_text(report.model_dump_json(by_alias=True, indent=2) + "\n")
    if args.junit is not None:
        args.junit.write_text(report.junit_xml())
    if threshold is not None:
        over = report.over(threshold.text)
        if over is not None:
            print(f"durable-agents: regression: {over}", file=sys.stderr)
            return REGRESSION_EXIT
    return 0


# -- replay-worker ------------------------------------------------------------------------------
async def cmd_replay_worker(args: argparse.Namespace) -> int:
    from durable_agents.cli.server import _stop_on_signals, _until, durable_store
    from durable_agents.client.connection import connect
    from durable_agents.replay.worker import build_replay_worker

    agent = against_of(args)
    policy = policy_of(args)
    store = durable_store(args)
    recordings = recordings_of(args)
    queue = args.replay_queue or f"{args.task_queue}.replay"
    from durable_agents.cli._common import codec_of

    client = await connect(args.address, args.namespace, codec=codec_of(args))

    async def serve() -> None:
        worker = build_replay_worker(
            client, against=agent, store=store, task_queue=queue, recordings=recordings, policy=policy
        )
        async with worker:
            print(f"replay worker for {agent.name} on task queue {queue!r}, store {store.location}", flush=True)
            await asyncio.Event().wait()

    await _until(_stop_on_signals(), serve())
    return 0


# -- export -----------------------------------------------------------------------------------
async def cmd_export(args: argparse.Namespace) -> int:
    from durable_agents.checkpoint.dataset import export_sessions

    redact = _function(args.redact, "--redact") if args.redact else None
    store = store_of(args)
    sessions = chosen_sessions(args, StoreRecordings(store))
    if not sessions:
        raise UsageError("the selection names no session")
    count = await asyncio.to_thread(export_sessions, store, sessions, args.output, redact=redact)
    print(f"exported {count} session(s) to {args.output}")
    print(f"replay them: {command_prefix(args)} replay --dataset {args.output} --against MODULE:AGENT")
    return 0
