"""The ``durable-agents`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence

from checkpoint.errors import ConfigurationError, DurableAgentsError
from checkpoint.stores import DEFAULT_STORE_URL, open_store
from durable_agents.connection import DEFAULT_TASK_QUEUE

STORE_ENV = "DURABLE_AGENTS_STORE"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="durable-agents",
        description="Run LLM agents durably on Temporal. Temporal connection settings follow "
        "Temporal's own conventions (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, profiles).",
    )
    parser.add_argument("--address", help="Temporal address host:port (default: TEMPORAL_ADDRESS or localhost:7233)")
    parser.add_argument("--namespace", help="Temporal namespace (default: TEMPORAL_NAMESPACE or default)")
    parser.add_argument("--store", default=os.environ.get(STORE_ENV, DEFAULT_STORE_URL),
                        help=f"checkpoint store URL (default: ${STORE_ENV} or {DEFAULT_STORE_URL})")
    parser.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help="Temporal task queue")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    server = sub.add_parser("server", help="run the embedded Temporal dev server with its UI")
    _server_args(server)

    worker = sub.add_parser("worker", help="run a worker for one or more agents")
    worker.add_argument("--agent", action="append", required=True, metavar="MODULE:ATTR",
                        help="an Agent (or list of Agents) to serve; repeatable")

    dev = sub.add_parser("dev", help="embedded Temporal server + a worker in one process")
    dev.add_argument("--agent", action="append", required=True, metavar="MODULE:ATTR")
    _server_args(dev)

    run = sub.add_parser("run", help="send input to an agent and wait for the run")
    run.add_argument("agent", help="agent name, or MODULE:ATTR of an Agent")
    run.add_argument("input", nargs="*", help="user message(s); none resumes the session")
    run.add_argument("--session", help="session id (default: a new one)")
    run.add_argument("--model", help="run on another model, e.g. anthropic:claude-sonnet-4-5")
    run.add_argument("--json", action="store_true", help="print the result as JSON")

    demo = sub.add_parser("demo", help="start everything, run the example agent, stop everything")
    demo.add_argument("--model", help="run the example on a real model (needs its API key)")
    demo.add_argument("--keep-running", action="store_true", help="leave server and UI up until Ctrl-C")
    return parser


def _server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, help="gRPC port (default 7233, or a free one)")
    p.add_argument("--ui-port", type=int, help="UI port (default port+1000)")
    p.add_argument("--db-file", default=".durable-agents/temporal.db", help="Temporal's SQLite file")
    p.add_argument("--headless", action="store_true", help="no web UI")


async def _cmd_server(args: argparse.Namespace) -> int:
    from durable_agents.devserver import DevServer

    server = _dev_server(args)
    async with server:
        print(f"Temporal dev server at {server.address}" + (f", UI {server.ui_url}" if server.ui else ""))
        print("Ctrl-C to stop.")
        await asyncio.to_thread(server.wait)
    return 0


def _dev_server(args: argparse.Namespace):
    from pathlib import Path

    from durable_agents.devserver import DevServer

    return DevServer(port=args.port, ui_port=args.ui_port, ui=not args.headless,
                     db_file=Path(args.db_file) if args.db_file else None)


async def _run_worker(args: argparse.Namespace, address: str | None) -> int:
    from durable_agents.connection import connect
    from durable_agents.loading import load_agents
    from durable_agents.worker import build_worker

    agents = [a for spec in args.agent for a in load_agents(spec)]
    store = open_store(args.store)
    client = await connect(address, args.namespace)
    worker = build_worker(client, agents=agents, store=store, task_queue=args.task_queue)
    names = ", ".join(a.name for a in agents)
    print(f"worker for {names} on task queue {args.task_queue!r}, store {args.store}", flush=True)
    await worker.run()
    return 0


async def _cmd_dev(args: argparse.Namespace) -> int:
    server = _dev_server(args)
    async with server:
        print(f"Temporal dev server at {server.address}, UI {server.ui_url}", flush=True)
        return await _run_worker(args, server.address)


async def _cmd_run(args: argparse.Namespace) -> int:
    import uuid

    from durable_agents.client import AgentClient
    from durable_agents.loading import load_agents
    from durable_agents.render import render_transcript

    name = load_agents(args.agent)[0].name if ":" in args.agent else args.agent
    session = args.session or f"{name}-{uuid.uuid4().hex[:8]}"
    client = await AgentClient.connect(args.address, store=args.store, namespace=args.namespace,
                                       task_queue=args.task_queue)
    started = time.perf_counter()
    result = await client.send(name, args.input, session_id=session, model=args.model)
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True, indent=2))
        return 0
    print(render_transcript(result.messages))
    print(f"\nsession {session}: {result.finish_reason}, {result.steps} steps, "
          f"{len(result.tool_calls)} tool calls, {result.usage.input_tokens}+"
          f"{result.usage.output_tokens} tokens, {time.perf_counter() - started:.2f}s")
    return 0


async def _cmd_demo(args: argparse.Namespace) -> int:
    from durable_agents.demo import run_demo

    return await run_demo(model=args.model, keep_running=args.keep_running, store_url=args.store)


COMMANDS = {"server": _cmd_server, "dev": _cmd_dev, "run": _cmd_run, "demo": _cmd_demo,
            "worker": lambda a: _run_worker(a, a.address)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return asyncio.run(COMMANDS[args.command](args))
    except ConfigurationError as e:  # wrong usage or setup: like argparse, exit 2
        print(f"durable-agents: error: {e.message}", file=sys.stderr)
        return 2
    except DurableAgentsError as e:
        print(f"durable-agents: error: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """Console-script entry point.

    Exits without interpreter finalization: the Temporal core runtime's
    threads can abort a finalizing interpreter after the work is done.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
