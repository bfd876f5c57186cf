"""``fork``: a new session from a kept step of another, optionally patched and resumed.

The fork itself runs as a Temporal workflow + activity on a worker that holds
the store (``AgentClient.fork``), so it is recorded and visible in the UI.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from durable_agents.checkpoint.fork import Patch, ToolResultPatch
from durable_agents.checkpoint.format import FormatModel, Message
from durable_agents.cli._common import (
    UsageError,
    add_wait_flags,
    client_of,
    command_prefix,
    detach_on_interrupt,
    no_worker_line,
    parse_json,
    positive_int,
    step_number,
    store_of,
    ui_link,
    unknown_session,
)
from durable_agents.cli._render import plural
from durable_agents.cli.replay import add_report_flags, add_selection, chosen_sessions, scorers_of, write_report
from durable_agents.cli.runs import print_outcome, wait_for
from durable_agents.client.result import RunResult

_MESSAGES = TypeAdapter(list[Message])


class ForkMade(FormatModel):
    """What ``fork --json`` prints."""

    session_id: str
    source_session_id: str
    step: int
    entry: int | None = None
    """The history entry forked, as `history` numbers them (1 is the newest)."""
    agent: str | None = None
    message_count: int
    result: RunResult | None = None
    """The resumed fork's outcome (with ``--resume``)."""


def register(sub: argparse._SubParsersAction) -> None:
    fork = sub.add_parser(
        "fork",
        help="start a new session from a kept step of another (see `history`), optionally patched",
        description="Patches apply in this order: --messages-file, --business-state, --tool-result, "
        "--append-input. The fork runs as a Temporal workflow on a worker holding the store.",
    )
    fork.add_argument("session", nargs="*", help="the session to fork (with --batch: sessions, or a selection)")
    fork.add_argument(
        "--from-step",
        type=step_number,
        required=True,
        metavar="N",
        help="the step to fork from (its newest kept checkpoint, or the one --entry names)",
    )
    fork.add_argument(
        "--entry",
        type=entry_number,
        metavar="#",
        help="fork this one of the step's kept checkpoints: its number in the # column of "
        "`history` (1 is the newest save; it must be an entry of --from-step)",
    )
    fork.add_argument(
        "--tool-result",
        action="append",
        default=[],
        metavar="CALL_ID=JSON",
        help="the result a tool call should have had (JSON; quote text as '\"text\"'); repeatable",
    )
    fork.add_argument(
        "--append-input",
        action="append",
        metavar="TEXT",
        help="a user message sent after any pending tool calls; repeatable",
    )
    fork.add_argument("--business-state", metavar="JSON", help="replace the business state (JSON)")
    fork.add_argument(
        "--messages-file",
        type=Path,
        metavar="F",
        help="replace the transcript: a JSON list of messages, or a checkpoint (show --json)",
    )
    fork.add_argument("--new-session-id", metavar="ID", help="the fork's id (default: SESSION.fork-<n>)")
    fork.add_argument("--resume", action="store_true", help="run the fork at once and wait for its outcome")
    fork.add_argument("--json", action="store_true", help="print the fork (and its outcome) as JSON "
                      "(with --batch: the report)")  # fmt: skip
    add_wait_flags(fork)
    batch = fork.add_argument_group(
        "batches", "--batch forks every session named or selected, runs each fork on the workers of --task-queue "
        "(a batch workflow in this process follows them) and prints a report of each fork against its source"
    )  # fmt: skip
    batch.add_argument("--batch", action="store_true", help="fork many sessions (named, or selected below)")
    add_selection(batch)
    batch.add_argument("--model", metavar="PROVIDER:MODEL", help="a model override for the forks' runs")
    batch.add_argument("--tag", metavar="TAG", help="names the batch and its forks (SESSION.fork-TAG)")
    batch.add_argument("--concurrency", type=positive_int, default=8, metavar="N", help="forks at once (8)")
    add_report_flags(batch, json_flag=False)
    fork.set_defaults(func=cmd_fork)


def entry_number(text: str) -> int:
    """argparse type of ``--entry``: 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid entry {text!r}: expected a whole number (see `history`)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid entry {text!r}: entries count from 1, the newest (see `history`)")
    return value


# -- patch arguments ------------------------------------------------------------------------
def tool_results(values: list[str]) -> list[ToolResultPatch]:
    results = []
    for value in values:
        call_id, sep, raw = value.partition("=")
        if not sep or not call_id.strip():
            raise UsageError(f"--tool-result {value!r}: write it as CALL_ID=JSON, e.g. call_1='{{\"ok\": true}}'")
        results.append(
            ToolResultPatch(tool_call_id=call_id.strip(), result=parse_json(raw, f"--tool-result {call_id.strip()}"))
        )
    return results


def messages_file(path: Path) -> list[Message]:
    try:
        data: Any = json.loads(path.read_text())
    except OSError as e:
        raise UsageError(f"--messages-file {str(path)!r}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raise UsageError(f"--messages-file {str(path)!r}: malformed JSON ({e})") from None
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    try:
        return _MESSAGES.validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"--messages-file {str(path)!r}: not a list of messages ({where}: {first['msg']})") from None


def build_patch(args: argparse.Namespace) -> Patch:
    fields: dict[str, Any] = {}
    if args.messages_file is not None:
        fields["messages"] = messages_file(args.messages_file)
    if args.business_state is not None:
        fields["business_state"] = parse_json(args.business_state, "--business-state")
    results = tool_results(args.tool_result)
    if results:
        fields["tool_results"] = results
    if args.append_input:
        fields["append_input"] = args.append_input[0] if len(args.append_input) == 1 else args.append_input
    return Patch(**fields)


# -- the command ------------------------------------------------------------------------------
def _check_source_and_target(args: argparse.Namespace) -> None:
    """What the fork would refuse, refused here in CLI words (and without waiting for a worker)."""
    store = store_of(args)
    if store.load_header(args.session) is None and not store.history(args.session, 1):
        raise unknown_session(args, args.session)  # a deleted session's kept history can still be forked
    target = args.new_session_id
    if target is not None and (target == args.session or store.load_header(target) is not None):
        raise UsageError(
            f"cannot fork into session {target!r}: it already has a checkpoint; delete it first "
            f"(`{command_prefix(args)} delete {shlex.quote(target)}`), pick another --new-session-id, "
            f"or leave the flag out for {args.session}.fork-<n>"
        )


async def cmd_fork(args: argparse.Namespace) -> int:
    from durable_agents.cli._progress import NoWorkerWarning

    patch = build_patch(args)  # argument errors first, before any connection
    if args.batch:
        return await cmd_fork_batch(args, patch)
    if len(args.session) != 1 or _batch_flags(args):
        raise UsageError("fork takes one SESSION; to fork many (or --agent/--status/--since/--until, --model, "
                         "--tag, --max-changed), add --batch")  # fmt: skip
    args.session = args.session[0]
    _check_source_and_target(args)
    client = await client_of(args)
    prefix = command_prefix(args)
    gone_on = (
        f"stopped waiting; the fork of session {shlex.quote(args.session)} goes on in Temporal: "
        f"`{prefix} sessions` lists it once it is made"
    )
    async with detach_on_interrupt(gone_on), NoWorkerWarning(client.temporal, args.task_queue, no_worker_line(args)):
        made = await client.fork(args.session, args.from_step, patch, args.new_session_id, entry=args.entry)
    view = ForkMade(
        session_id=made.session_id,
        source_session_id=args.session,
        step=made.step,
        entry=made.entry,
        agent=made.agent,
        message_count=made.message_count,
    )
    if not args.json:
        which = f" (history entry {made.entry})" if args.entry is not None else ""
        print(
            f"forked {args.session} at step {made.step}{which} into {made.session_id} "
            f"({plural(made.message_count, 'message')}, status in-progress)"
        )
    if not args.resume:
        if args.json:
            print(view.model_dump_json(by_alias=True, exclude_none=True, indent=2))
        else:
            print(f"show it:   {prefix} show {made.session_id}\nresume it: {prefix} resume {made.session_id}")
        return 0
    header = store_of(args).load_header(made.session_id)
    started = time.perf_counter()
    result = await wait_for(args, made.session_id, client.resume(made.session_id, agent=made.agent))
    if args.json:
        view.result = result
        print(view.model_dump_json(by_alias=True, exclude_none=True, indent=2))
        if link := ui_link(args, made.session_id):
            print(f"Temporal UI: {link}", file=sys.stderr)
        return 0
    print()
    start = header.run_start_index if header is not None and header.run_start_index is not None else 0
    await print_outcome(args, result, start=start, started=started)
    return 0


# -- fork --batch ---------------------------------------------------------------------------------
def _batch_flags(args: argparse.Namespace) -> bool:
    chosen = ("select_agent", "status", "since", "until", "model", "tag", "max_changed", "junit", "limit")
    return any(getattr(args, k) is not None for k in chosen) or bool(args.score)


async def cmd_fork_batch(args: argparse.Namespace, patch: Patch) -> int:
    from durable_agents.checkpoint.dataset import StoreRecordings
    from durable_agents.checkpoint.replay import check_tag, new_tag
    from durable_agents.checkpoint.replay_report import parse_threshold
    from durable_agents.replay import fork_batch

    if args.resume or args.new_session_id or args.entry is not None:
        raise UsageError(
            "--batch forks into SESSION.fork-TAG and runs each fork: drop --resume, --new-session-id, --entry"
        )
    threshold = parse_threshold(args.max_changed) if args.max_changed is not None else None
    args.json = "-" if args.json else None  # the report's JSON on stdout
    tag = check_tag(args.tag) if args.tag else new_tag()
    scorers = scorers_of(args)
    args.sessions = list(args.session)
    sessions = chosen_sessions(args, StoreRecordings(store_of(args)))
    if not sessions:
        raise UsageError("the selection names no session")
    client = await client_of(args)
    if args.json != "-":
        print(f"forking {plural(len(sessions), 'session')} at step {args.from_step} (tag {tag})", file=sys.stderr)
    from durable_agents.cli._progress import NoWorkerWarning

    # the forks run on the workers of --task-queue: say so when none polls it
    async with NoWorkerWarning(client.temporal, args.task_queue, no_worker_line(args)):
        report = await fork_batch(
            client, sessions, from_step=args.from_step, patch=patch, model=args.model, tag=tag,
            concurrency=args.concurrency, scorers=scorers,
        )  # fmt: skip
    return write_report(args, report, threshold)
