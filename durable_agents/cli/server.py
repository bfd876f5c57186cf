"""Processes: ``server``, ``worker``, ``dev``, ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

from durable_agents.checkpoint.stores import redact
from durable_agents.cli._common import UsageError, store_of


def register(sub: argparse._SubParsersAction) -> None:
    server = sub.add_parser("server", help="run the embedded Temporal dev server with its UI")
    _server_args(server)
    server.set_defaults(func=cmd_server)

    worker = sub.add_parser("worker", help="run a worker for one or more agents")
    worker.add_argument(
        "--agent",
        action="append",
        required=True,
        metavar="MODULE:ATTR",
        help="an Agent (or list of Agents) to serve; repeatable",
    )
    worker.set_defaults(func=cmd_worker)

    dev = sub.add_parser("dev", help="embedded Temporal server + a worker in one process")
    dev.add_argument(
        "--agent",
        action="append",
        required=True,
        metavar="MODULE:ATTR",
        help="an Agent (or list of Agents) for the worker to serve, e.g. myapp.agents:booker; repeatable",
    )
    _server_args(dev)
    dev.set_defaults(func=cmd_dev)

    demo = sub.add_parser("demo", help="start everything, run the example agent, stop everything (or --keep-running)")
    demo.add_argument("--model", help="run the example on a real model (needs its API key)")
    demo.add_argument(
        "--keep-running",
        action="store_true",
        help="after the demo, keep the server (and its UI links) and the worker up until Ctrl-C",
    )
    demo.set_defaults(func=cmd_demo)


def _server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, help="gRPC port (default 7233, or a free one)")
    p.add_argument("--ui-port", type=int, help="UI port (default port+1000)")
    p.add_argument("--db-file", default=".durable-agents/temporal.db", help="Temporal's SQLite file")
    p.add_argument("--headless", action="store_true", help="no web UI")


def _dev_server(args: argparse.Namespace):
    from durable_agents.devserver import DevServer

    return DevServer(
        port=args.port, ui_port=args.ui_port, ui=not args.headless, db_file=Path(args.db_file) if args.db_file else None
    )


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT, so a server process never outlives its command."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # e.g. Windows
            loop.add_signal_handler(sig, stop.set)
    return stop


async def _until(stop: asyncio.Event, work) -> None:
    """Run ``work`` until it ends or ``stop`` is set (then cancel it)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _with_server(args: argparse.Namespace, work, hint: str | None = None) -> int:
    """Start the embedded server, run ``work(server)`` until done or a signal, stop the server."""
    stop = _stop_on_signals()
    async with _dev_server(args) as server:  # stops the server on the way out
        print(f"Temporal dev server at {server.address}" + (f", UI {server.ui_url}" if server.ui else ""), flush=True)
        print(_state_line(server), flush=True)
        if hint:
            print(hint, flush=True)
        await _until(stop, work(server))
    return 0


def _state_line(server) -> str:
    return f"Temporal's state in {Path(server.db_file).absolute()}" if server.db_file else "Temporal's state in memory"


async def cmd_server(args: argparse.Namespace) -> int:
    return await _with_server(args, lambda server: asyncio.to_thread(server.wait), "Ctrl-C to stop.")


async def run_worker(args: argparse.Namespace, address: str | None) -> int:
    from durable_agents._loading import load_agents
    from durable_agents.connection import connect
    from durable_agents.worker import build_worker

    agents = [a for spec in args.agent for a in load_agents(spec)]
    store = durable_store(args)
    client = await connect(address, args.namespace)
    worker = build_worker(client, agents=agents, store=store, task_queue=args.task_queue)
    names = ", ".join(a.name for a in agents)
    print(f"worker for {names} on task queue {args.task_queue!r}, store {store.location}", flush=True)
    async with worker:  # leaving it shuts down gracefully: running tools may finish
        await asyncio.Event().wait()
    return 0


def durable_store(args: argparse.Namespace):
    """The ``--store`` a worker keeps runs in; a memory store (gone with the process) is refused."""
    store = store_of(args)
    if not store.durable:
        raise UsageError(
            f"--store {redact(args.store)} keeps runs in the worker's memory only: a crash loses them and "
            "no other command can see them; use --store sqlite:///path/to/store.db (the default), "
            "file:///path/to/dir or postgresql://…"
        )
    return store


async def cmd_worker(args: argparse.Namespace) -> int:
    """SIGTERM/SIGINT shut the worker down gracefully, so the next worker picks up at once."""
    durable_store(args)
    await _until(_stop_on_signals(), run_worker(args, args.address))
    return 0


async def cmd_dev(args: argparse.Namespace) -> int:
    durable_store(args)  # before the server starts
    return await _with_server(args, lambda server: run_worker(args, server.address))


async def cmd_demo(args: argparse.Namespace) -> int:
    from durable_agents.examples.demo import run_demo

    return await run_demo(model=args.model, keep_running=args.keep_running, store_url=args.store)
