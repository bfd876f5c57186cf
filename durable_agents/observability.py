"""A worker's health endpoint and Prometheus metrics (both off unless asked for).

    durable-agents worker --agent myapp:booker --metrics-port 9464 --health-port 8080

- ``/metrics`` on ``--metrics-port``: the Temporal SDK's runtime metrics
  (``temporal_*``: task slots, poll and execution latencies, requests…) and
  ours (``durable_agents_*``, see :mod:`durable_agents.metrics`), served by the
  SDK's Prometheus exporter (``temporalio.runtime.PrometheusConfig``).
- ``/healthz`` on ``--health-port`` (liveness): 200 while the worker's event
  loop answers (it ticks every second; 503 after ``stall_seconds`` without a tick);
- ``/readyz`` (readiness): 200 once Temporal lists this worker among the task
  queue's pollers, while the worker runs and Temporal answers; 503 with the
  reason otherwise (also from the moment the worker starts shutting down).

Both listen on 127.0.0.1 unless a host is given (``--observability-host
0.0.0.0`` in a container). The answers are JSON and carry no payloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from durable_agents._http import HttpServerThread
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import CheckpointStatus
from durable_agents.checkpoint.stores.base import CheckpointStore

__all__ = ["WorkerHealth", "metrics_runtime", "serve_health"]

DEFAULT_HOST = "127.0.0.1"


def metrics_runtime(port: int, host: str = DEFAULT_HOST) -> Runtime:
    """A Temporal runtime exporting metrics at ``http://host:port/metrics``; connect the
    worker's client with it (``durable_agents.connect(runtime=…)``)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise ConfigurationError(
                f"cannot serve metrics on {host}:{port} ({e.strerror or e}); pick another --metrics-port"
            ) from None
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))


@dataclass
class WorkerHealth:
    """What ``/healthz`` and ``/readyz`` answer; :meth:`watch` keeps it current from the worker's loop."""

    worker: Worker
    client: Client
    store: CheckpointStore | None = None
    runtime: Runtime | None = None
    """With metrics: the runtime whose ``durable_agents_approvals_waiting`` gauge is set."""
    stall_seconds: float = 30.0
    approvals_every: float = 30.0
    ticked_at: float = field(default_factory=time.monotonic)
    polling: bool = False
    """Temporal has listed this worker among the task queue's pollers."""
    problem: str | None = "starting: not polling yet"
    stopping: bool = False

    def liveness(self) -> tuple[bool, dict]:
        quiet = time.monotonic() - self.ticked_at
        if quiet > self.stall_seconds:
            return False, {"status": "stalled", "reason": f"the worker's event loop has not answered for {quiet:.0f}s"}
        return True, {"status": "alive"}

    def readiness(self) -> tuple[bool, dict]:
        alive, body = self.liveness()
        if not alive:
            return False, body
        if self.stopping:
            return False, {"status": "not ready", "reason": "shutting down"}
        if self.problem:
            return False, {"status": "not ready", "reason": self.problem}
        return True, {"status": "ready", "taskQueue": self.worker.task_queue}

    async def watch(self, every: float = 1.0) -> None:
        """Tick, and check readiness, until cancelled."""
        next_count = 0.0
        while True:
            self.ticked_at = time.monotonic()
            self.problem = await self._check()
            if self.runtime is not None and self.store is not None and time.monotonic() >= next_count:
                next_count = time.monotonic() + self.approvals_every
                await self._count_waiting()
            await asyncio.sleep(every)

    async def _check(self) -> str | None:
        if self.worker.is_shutdown or not self.worker.is_running:
            return "the worker is not running"
        try:
            await self.client.service_client.check_health(timeout=timedelta(seconds=5))
        except Exception as e:  # noqa: BLE001 - any failure means: not ready, and why
            return f"Temporal does not answer at {self.client.service_client.config.target_host}: {e}"
        if not self.polling:
            from durable_agents._workers import workflow_pollers

            identity = self.worker.config().get("identity") or self.client.identity
            try:
                pollers = await workflow_pollers(self.client, self.worker.task_queue)
            except Exception as e:  # noqa: BLE001
                return f"cannot list the pollers of task queue {self.worker.task_queue!r}: {e}"
            self.polling = any(p.identity == identity for p in pollers)
            if not self.polling:
                return f"not polling task queue {self.worker.task_queue!r} yet"
        return None

    async def _count_waiting(self) -> None:
        from durable_agents.activities import metrics

        assert self.store is not None and self.runtime is not None
        try:
            waiting = await asyncio.to_thread(self.store.list_sessions, status=CheckpointStatus.AWAITING_APPROVAL)
        except Exception:  # noqa: BLE001 - a store outage shows in the runs, not here
            return
        metrics.approvals_waiting(self.runtime.metric_meter, len(waiting))


def health_app(health: WorkerHealth):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def healthz(request: Request) -> JSONResponse:
        ok, body = health.liveness()
        return JSONResponse(body, status_code=200 if ok else 503)

    async def readyz(request: Request) -> JSONResponse:
        ok, body = health.readiness()
        return JSONResponse(body, status_code=200 if ok else 503)

    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz)])


@contextlib.asynccontextmanager
async def serve_health(
    worker: Worker,
    client: Client,
    *,
    port: int | None,
    host: str = DEFAULT_HOST,
    store: CheckpointStore | None = None,
    runtime: Runtime | None = None,
) -> AsyncIterator[WorkerHealth]:
    """Keep a :class:`WorkerHealth` current while the block runs (the worker running in it);
    with ``port``, serve it; with ``runtime``, keep the approvals gauge current too."""
    health = WorkerHealth(worker, client, store=store, runtime=runtime)
    server = HttpServerThread(health_app(health), host, port, "health endpoint", "--health-port") if port else None
    if server is not None:
        server.start()
    watcher = asyncio.ensure_future(health.watch())
    try:
        yield health
    finally:
        health.stopping = True
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if server is not None:
            await asyncio.to_thread(server.stop)
