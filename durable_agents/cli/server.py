"""Processes: ``server``, ``worker``, ``dev``, ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

from durable_agents.checkpoint.stores import redact
from durable_agents.cli._common import UsageError, codec_of, store_of
from durable_agents.cli.deploys import add_versioning_flags, versioning_of


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
    _observability_args(worker)
    _tuning_args(worker)
    add_versioning_flags(worker)
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
    _observability_args(dev)
    _tuning_args(dev)
    add_versioning_flags(dev)
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
    p.add_argument(
        "--codec-port",
        type=int,
        default=0,
        help="with encryption keys: the port of the codec server the UI decrypts payloads with (default: a free one)",
    )


def _observability_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics (Temporal SDK's and ours) at :PORT/metrics",
    )
    p.add_argument(
        "--health-port", type=int, metavar="PORT", help="serve /healthz (liveness) and /readyz (polling) at :PORT"
    )
    p.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="export OpenTelemetry traces over OTLP/HTTP to URL (e.g. http://localhost:4318; default from "
        "OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; needs durable-agents[otel])",
    )
    p.add_argument(
        "--observability-host",
        default="127.0.0.1",
        help="address the metrics and health endpoints listen on (default 127.0.0.1; 0.0.0.0 in a container)",
    )


def _tuning_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tuning (defaults fit one host; see bench/capacity.py)")
    g.add_argument(
        "--max-concurrent-activities",
        type=int,
        default=200,
        metavar="N",
        help="model calls, tools and store steps running at once (regular and local, each; default 200)",
    )
    g.add_argument(
        "--max-concurrent-workflow-tasks",
        type=int,
        default=100,
        metavar="N",
        help="workflow tasks at once; with local or auto activities a run's task lasts through its model call, "
        "so this bounds the runs in a model call at once (default 100)",
    )
    g.add_argument(
        "--max-cached-workflows",
        type=int,
        default=1000,
        metavar="N",
        help="runs kept in memory between steps; an evicted run replays its history on its next step (default 1000)",
    )
    g.add_argument("--pollers", default="5", metavar="N|auto", help="long-polls per task queue kind (default 5)")
    g.add_argument(
        "--budgets",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="provider rate-limit budgets (a Budget or a list of them) shared by every worker on this store; "
        "repeatable (docs: how-to/production/rate-limits)",
    )
    g.add_argument("--fair-share", metavar="MODULE:ATTR", help="a FairShare: whose calls waiting for budget go first")
    g.add_argument(
        "--sticky-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="after a worker dies, how long each run it had cached waits before another worker takes it (default 5)",
    )


def _tuning_of(args: argparse.Namespace) -> dict:
    from datetime import timedelta

    from durable_agents.checkpoint.errors import ConfigurationError

    pollers = args.pollers
    if pollers != "auto":
        try:
            pollers = int(pollers)
        except ValueError:
            raise ConfigurationError(f"--pollers {args.pollers}: use a number (1 or more) or 'auto'") from None
    for flag, value in (("--max-concurrent-activities", args.max_concurrent_activities),
                        ("--max-concurrent-workflow-tasks", args.max_concurrent_workflow_tasks),
                        ("--max-cached-workflows", args.max_cached_workflows)):  # fmt: skip
        if value < (0 if flag == "--max-cached-workflows" else 1):
            raise ConfigurationError(f"{flag} {value}: use a positive number")
    if args.sticky_timeout <= 0:
        raise ConfigurationError(f"--sticky-timeout {args.sticky_timeout:g}: use a positive number of seconds")
    from durable_agents._loading import load_all, load_object
    from durable_agents.providers.budgets import Budget, FairShare

    budgets = [
        b
        for spec in args.budgets
        for b in load_all("--budgets", spec, Budget, "a Budget (or a list of Budgets)", "myapp.limits:budgets")
    ]
    fair_share = None
    if args.fair_share:
        fair_share = load_object("--fair-share", args.fair_share, "myapp.limits:by_tenant")
        if not isinstance(fair_share, FairShare):
            raise ConfigurationError(f"--fair-share {args.fair_share!r}: not a FairShare")
        if not budgets:
            raise ConfigurationError("--fair-share orders calls waiting for budget: give --budgets too")
    return {
        "budgets": budgets,
        "fair_share": fair_share,
        "max_concurrent_activities": args.max_concurrent_activities,
        "max_concurrent_local_activities": args.max_concurrent_activities,
        "max_concurrent_workflow_tasks": args.max_concurrent_workflow_tasks,
        "max_cached_workflows": args.max_cached_workflows,
        "pollers": pollers,
        "sticky_queue_timeout": timedelta(seconds=args.sticky_timeout),
    }


def _dev_server(args: argparse.Namespace, codec_endpoint: str | None = None):
    from durable_agents.devserver import DevServer

    return DevServer(
        port=args.port,
        ui_port=args.ui_port,
        ui=not args.headless,
        db_file=Path(args.db_file) if args.db_file else None,
        ui_codec_endpoint=codec_endpoint,
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
    from durable_agents.devserver import free_port

    stop = _stop_on_signals()
    codec = codec_of(args) if not args.headless else None  # with keys, the UI decrypts through our codec server
    codec_port = (args.codec_port or free_port()) if codec is not None else None
    endpoint = f"http://127.0.0.1:{codec_port}" if codec_port else None
    with contextlib.ExitStack() as closing:
        async with _dev_server(args, endpoint) as server:  # stops the server on the way out
            print(
                f"Temporal dev server at {server.address}" + (f", UI {server.ui_url}" if server.ui else ""), flush=True
            )
            if codec is not None and codec_port is not None:
                from durable_agents.codec_server import codec_server, ui_origins

                origins = ui_origins(server.ui_url or "")
                closing.enter_context(codec_server(codec, port=codec_port, origins=origins))
                print(f"codec server at {endpoint}: the UI decrypts payloads (keys {', '.join(codec.keys.ids)})")
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
    from durable_agents.client.connection import connect
    from durable_agents.observability import metrics_runtime, serve_health
    from durable_agents.worker import build_worker

    tuning = _tuning_of(args)  # wrong flags are refused before anything starts
    agents = [a for spec in args.agent for a in load_agents(spec)]
    store = durable_store(args)
    host = args.observability_host
    runtime = metrics_runtime(args.metrics_port, host) if args.metrics_port else None
    traces = _tracer_provider(args)  # None unless --otlp-endpoint or OTEL_EXPORTER_OTLP_*ENDPOINT
    client = await connect(address, args.namespace, codec=codec_of(args), runtime=runtime)
    deployment, build_id = versioning_of(args)
    worker = build_worker(
        client, agents=agents, store=store, task_queue=args.task_queue, tracing=traces or False,
        deployment=deployment, build_id=build_id, **tuning,
    )  # fmt: skip
    names = ", ".join(a.name for a in agents)
    async with serve_health(worker, client, port=args.health_port, host=host, store=store, runtime=runtime) as health:
        print(f"worker for {names} on task queue {args.task_queue!r}, store {store.location}", flush=True)
        versioned = worker.config().get("deployment_config")
        if versioned is not None:
            print(f"build {versioned.version.to_canonical_string()} (runs pinned to it)", flush=True)
        for line in _observability_lines(args, client):
            print(line, flush=True)
        if tuning["budgets"]:
            shown = ", ".join(b.describe() for b in tuning["budgets"])
            print(f"rate-limit budgets (shared by the workers on this store): {shown}", flush=True)
        async with worker:  # leaving it shuts down gracefully: running tools may finish
            try:
                await asyncio.Event().wait()
            finally:
                health.stopping = True  # /readyz says so while running tools finish
    return 0


def _tracer_provider(args: argparse.Namespace):
    """With ``--otlp-endpoint`` or the standard variables: the provider exporting the worker's spans."""
    from durable_agents.tracing import configure, endpoint_from_env, traces_url

    endpoint = getattr(args, "otlp_endpoint", None) or endpoint_from_env()
    if not endpoint:
        return None
    args.otlp_traces_url = traces_url(endpoint) if args.otlp_endpoint else endpoint
    # global: spans a tool makes itself (opentelemetry.trace.get_tracer) join the run's trace
    args._tracer_provider = configure(endpoint if args.otlp_endpoint else None)  # shut down (flushed) at exit
    return args._tracer_provider


def _observability_lines(args: argparse.Namespace, client) -> list[str]:
    host, lines = args.observability_host, []
    if client.data_converter.payload_codec is not None:
        lines.append(f"payloads encrypted ({client.data_converter.payload_codec!r})")
    if getattr(args, "store_encryption", False):
        lines.append("message content encrypted in the store")
    if args.metrics_port:
        lines.append(f"metrics at http://{host}:{args.metrics_port}/metrics")
    if args.health_port:
        lines.append(f"health at http://{host}:{args.health_port}/healthz and /readyz")
    if getattr(args, "otlp_traces_url", None):
        lines.append(f"traces to {args.otlp_traces_url} (OTLP/HTTP)")
    return lines


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
    from durable_agents.cli.demo import run_demo

    return await run_demo(model=args.model, keep_running=args.keep_running, store_url=args.store)
