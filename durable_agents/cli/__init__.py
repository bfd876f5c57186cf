"""The ``durable-agents`` command line.

Commands live in one module per concept: processes (``server``), runs
(``runs``), approvals (``approvals``), reading sessions (``inspect``), forks
(``fork``), approval policies and grants (``policy``) and store maintenance (``store``).

Exit codes: 0 done; 1 the operation failed (a run failed, a session is busy,
nothing to approve, no worker polls the queue for ``run --no-wait``, Temporal
refused); 2 wrong usage (bad flags or values, malformed JSON, unknown session or
step, configuration); 130 interrupted (Ctrl-C while waiting for a run only stops
the waiting: the run goes on in Temporal and ``watch SESSION`` follows it
again, as the one line printed says); 141 its output was closed early.
Errors are one line on stderr (``DURABLE_AGENTS_DEBUG=1`` shows tracebacks).

A closed output (``durable-agents sessions | head -1``) ends the command
quietly, as it ends ``git log | head``: no message, exit 141 (128 + SIGPIPE),
the status a shell reports for a tool that SIGPIPE stopped, so ``set -o
pipefail`` scripts see the same as with git. (The process does not restore
SIGPIPE's default action instead: Temporal's network threads share the
process and must keep getting EPIPE, not the signal.)
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
from collections.abc import Sequence

from durable_agents._defaults import DEFAULT_TASK_QUEUE
from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError, DurableAgentsError
from durable_agents.cli import approvals, deploys, fork, inspect, policy, production, replay, runs, server, store, web
from durable_agents.cli._common import (
    STORE_ENCRYPTION_ENV,
    STORE_ENV,
    Detached,
    codec_of,
    default_store_url,
    env_flag,
)
from durable_agents.cli._messages import cli_message

DEBUG_ENV = "DURABLE_AGENTS_DEBUG"
OUTPUT_CLOSED = 128 + 13  # 128 + SIGPIPE, as a shell reports a tool stopped by it
USAGE_ERRORS = (ConfigurationError, CheckpointNotFoundError)


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (plus where to look), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="durable-agents",
        description="Run LLM agents durably on Temporal. Temporal connection settings follow "
        "Temporal's own conventions (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, profiles).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    add_global_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (server, runs, approvals, policy, inspect, fork, replay, store, production, deploys, web):
        module.register(sub)
    for command in _subcommands(parser):  # the same flags after the command: `worker … --task-queue X`
        add_global_flags(command.add_argument_group(GLOBAL_GROUP), after_command=True)
    return parser


GLOBAL_GROUP = "global options (before or after the command)"


def add_global_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, after_command: bool = False) -> None:
    """The flags every command shares. Before the command they carry the defaults; a
    command's copies (``after_command``) set nothing unless given, so a value given in
    either place wins (after the command, when in both) and the defaults stay."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if after_command else value

    parser.add_argument("--address", default=default(None),
                        help="Temporal address host:port (default: TEMPORAL_ADDRESS or localhost:7233)")  # fmt: skip
    parser.add_argument(
        "--namespace", default=default(None), help="Temporal namespace (default: TEMPORAL_NAMESPACE or default)"
    )
    parser.add_argument(
        "--store",
        default=default(default_store_url()),
        help=f"checkpoint store URL (default: ${STORE_ENV} or {default_store_url()})",
    )
    parser.add_argument("--task-queue", default=default(DEFAULT_TASK_QUEUE), help="Temporal task queue")
    parser.add_argument(
        "--encryption-key-file",
        default=default(None),
        metavar="PATH",
        help="encrypt Temporal payloads with the keys in PATH (ID:BASE64 a line, newest last; default: "
        "$DURABLE_AGENTS_ENCRYPTION_KEY_FILE, or the keys in $DURABLE_AGENTS_ENCRYPTION_KEYS)",
    )
    parser.add_argument(
        "--store-encryption",
        action=argparse.BooleanOptionalAction,
        default=default(env_flag(STORE_ENCRYPTION_ENV)),
        help=f"encrypt message content in the store too, with the same keys (default: ${STORE_ENCRYPTION_ENV}=1)",
    )
    parser.add_argument(
        "--summaries",
        choices=["agent-only", "first-line"],
        default=default(None),
        help="what a run's summary in the Temporal UI says (default: agent-only with encryption, else first-line)",
    )


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every command's parser, and its own sub-commands' (``web-token add``), depth first."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found += [command, *_subcommands(command)]
    return found


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("durable-agents")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown (not installed)"


async def _dispatch(args: argparse.Namespace) -> int:
    try:
        if args.command != "new-key":
            codec_of(args)  # malformed encryption keys are refused whatever the command
        return await args.func(args)
    finally:
        opened = getattr(args, "_store", None)
        if opened is not None:
            opened.close()
        traces = getattr(args, "_tracer_provider", None)
        if traces is not None:  # a worker's: export the spans still batched (entry() skips atexit hooks)
            traces.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except BrokenPipeError:  # `--help | head -1`
        return _output_closed()
    command = _dispatch(args)
    try:
        code = asyncio.run(command)
        sys.stdout.flush()  # a closed pipe shows here when the output fit in the buffer
        return code
    except BrokenPipeError:
        return _output_closed()
    except Detached as e:  # Ctrl-C while waiting: the run goes on in Temporal
        return _say(e.line, 130)
    except USAGE_ERRORS as e:  # wrong usage or setup: like argparse, exit 2
        return _fail(cli_message(e, args), 2)
    except DurableAgentsError as e:
        return _fail(cli_message(e, args), 1)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if os.environ.get(DEBUG_ENV):
            raise
        return _fail(_describe(e), 1)
    finally:
        command.close()  # never awaited if asyncio.run refused to start (a no-op once run)


def _fail(message: str, code: int) -> int:
    return _say(f"error: {message}", code)


def _say(message: str, code: int) -> int:
    """``durable-agents: <message>`` as one line on stderr; returns ``code``."""
    try:
        print(f"durable-agents: {' '.join(str(message).split())}", file=sys.stderr)
    except BrokenPipeError:
        return _output_closed()
    return code


def _output_closed() -> int:
    """The reader of our output went away: say nothing more, and exit 141.

    What is still buffered, and anything printed later, goes to the null device,
    so flushing at exit cannot fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError, io.UnsupportedOperation):  # not a file (e.g. a test's StringIO)
                pass
    finally:
        os.close(devnull)
    return OUTPUT_CLOSED


def _describe(error: Exception) -> str:
    from temporalio.service import RPCError

    if isinstance(error, RPCError):
        return f"Temporal refused the request ({error.status.name}): {error.message}"
    return f"{type(error).__name__}: {error} (set {DEBUG_ENV}=1 for the traceback)"


def entry() -> None:
    """Console-script entry point.

    Exits without interpreter finalization: the Temporal core runtime's
    threads can abort a finalizing interpreter after the work is done.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = _output_closed()
    os._exit(code)
