"""A worker's health endpoint and Prometheus metrics, over real HTTP.

``durable-agents worker --metrics-port … --health-port …`` runs as a process
against the session's Temporal dev server; runs with tools, tool errors and
approvals go through it, and ``/metrics`` is read as Prometheus would.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.activities import metrics
from durable_agents.checkpoint.format import CheckpointStatus
from durable_agents.devserver import free_port
from durable_agents.observability import metrics_runtime, serve_health
from tests.cli.conftest import CLI, ROOT, Cli, stop

pytestmark = pytest.mark.integration

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def total(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    found = 0.0
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            found += float(match.group(3))
    return found


def _wait_for(url: str, status: int, seconds: float = 30) -> httpx.Response:
    deadline = time.monotonic() + seconds
    while True:
        try:
            answer = httpx.get(url, timeout=2)
            if answer.status_code == status:
                return answer
        except httpx.TransportError:
            answer = None
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer {status}: {answer and (answer.status_code, answer.text)}")
        time.sleep(0.1)


def _worker(cli: Cli, log: Path, *extra: str) -> subprocess.Popen:
    agents = ["tests.agents:weather_agent", "tests.agents:payments_agent", "tests.agents:bad_agent"]
    agents.append("tests.agents:slow_agent")
    return subprocess.Popen(
        [*CLI, *cli.flags, "worker", *(a for spec in agents for a in ("--agent", spec)), *extra],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_health_and_metrics_of_a_worker_process(env, tmp_path):
    cli = Cli(env.client.service_client.config.target_host, f"obs-{uuid.uuid4().hex[:8]}", tmp_path / "store.db")
    metrics_port, health_port = free_port(), free_port()
    started = time.monotonic()
    worker = _worker(
        cli, tmp_path / "worker.log", "--metrics-port", str(metrics_port), "--health-port", str(health_port)
    )
    health = f"http://127.0.0.1:{health_port}"
    try:
        ready = _wait_for(f"{health}/readyz", 200)
        print(f"ready {time.monotonic() - started:.1f}s after the worker process started")
        assert ready.json() == {"status": "ready", "taskQueue": cli.task_queue}
        assert httpx.get(f"{health}/healthz").json() == {"status": "alive"}
        log = (tmp_path / "worker.log").read_text()
        assert f"metrics at http://127.0.0.1:{metrics_port}/metrics" in log and f"health at {health}/healthz" in log

        assert cli("run", "booker", "Book a table", "--session", "obs-1").returncode == 0
        assert cli("run", "bad", "go", "--session", "obs-2").returncode == 0
        paused = cli("run", "payments", "Charge it", "--session", "obs-3")
        assert "approval" in paused.stdout + paused.stderr, paused
        for _ in range(2):
            assert cli("approve", "obs-3").returncode == 0, cli("approvals")

        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        assert total(text, "durable_agents_runs", agent="booker", status="stop") == 1
        assert total(text, "durable_agents_runs", agent="payments", status="stop") == 1
        assert total(text, "durable_agents_steps", agent="booker") == 3
        assert total(text, "durable_agents_tool_calls", agent="booker", tool="get_weather", outcome="result") == 2
        assert total(text, "durable_agents_tool_calls", agent="bad", outcome="unknown-tool") == 1
        assert total(text, "durable_agents_tool_calls", agent="bad", tool="book_table", outcome="validation-error") == 1
        assert total(text, "durable_agents_tool_calls", agent="bad", tool="flaky", outcome="error") == 1
        assert total(text, "durable_agents_approvals", agent="payments", event="requested") == 2
        assert total(text, "durable_agents_approvals", agent="payments", event="approved") == 2
        assert total(text, "durable_agents_model_tokens", agent="booker", kind="input") > 0
        assert total(text, "durable_agents_model_tokens", agent="booker", kind="output") > 0
        for sdk in ("temporal_worker_task_slots_available", "temporal_activity_execution_latency_count"):
            assert total(text, sdk, task_queue=cli.task_queue) > 0, sdk  # the SDK's own, same endpoint

        # SIGTERM: while running tools finish (graceful shutdown), /readyz says so, /healthz is fine
        slow = cli.popen("run", "slow", "go", "--session", "obs-4", "--no-wait")
        slow.wait(timeout=60)
        _wait_for_running_tool(cli, "obs-4")
        worker.send_signal(signal.SIGTERM)
        stopping = _wait_for(f"{health}/readyz", 503, seconds=8)
        assert stopping.json() == {"status": "not ready", "reason": "shutting down"}
        assert httpx.get(f"{health}/healthz").status_code == 200
        assert worker.wait(timeout=60) == 0
    finally:
        stop(worker)
    with pytest.raises(httpx.TransportError):  # gone with the worker
        httpx.get(f"{health}/healthz", timeout=2)


def _wait_for_running_tool(cli: Cli, session_id: str) -> None:
    """Until the slow run's turn and its first result are stored (its slow tool then runs)."""
    from durable_agents.checkpoint import SqliteStore

    store, deadline = SqliteStore(cli.store_path), time.monotonic() + 30
    try:
        while (header := store.load_header(session_id)) is None or header.message_count < 3:
            assert time.monotonic() < deadline, header
            time.sleep(0.1)
    finally:
        store.close()
    time.sleep(0.5)


@activity.defn
async def _record() -> None:
    metrics.tool_call("a", "wire", "tool-durability-error")


@workflow.defn(sandboxed=False)
class _Recording:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(_record, start_to_close_timeout=timedelta(seconds=10))
        metrics.run_ended("a", "stop")


async def test_in_process_readiness_liveness_and_the_approvals_gauge(env, store, tmp_path):
    """``serve_health`` with a real worker: not ready before it polls, ready while it does;
    a blocked event loop fails liveness; the approvals gauge counts the store's waiting sessions."""
    from durable_agents.checkpoint import Checkpoint

    store.save(Checkpoint(session_id="waits", agent="a", status=CheckpointStatus.AWAITING_APPROVAL, approval_id="x"))
    port, health_port = free_port(), free_port()
    client = await Client.connect(env.client.service_client.config.target_host, runtime=metrics_runtime(port))
    queue = f"obs-{uuid.uuid4().hex[:8]}"
    worker = Worker(client, task_queue=queue, workflows=[_Recording], activities=[_record])
    url = f"http://127.0.0.1:{health_port}"
    runtime = client.service_client.config.runtime
    async with serve_health(worker, client, port=health_port, store=store, runtime=runtime) as health:
        health.stall_seconds = 0.5
        not_yet = await asyncio.to_thread(httpx.get, f"{url}/readyz")
        assert not_yet.status_code == 503 and not_yet.json()["reason"] == "the worker is not running"
        async with worker:
            await asyncio.to_thread(_wait_for, f"{url}/readyz", 200)
            await client.execute_workflow(_Recording.run, id=f"rec-{uuid.uuid4().hex}", task_queue=queue)

            answers: list[int] = []
            probe = threading.Thread(target=lambda: answers.append(_probe_while_blocked(f"{url}/healthz")))
            probe.start()
            time.sleep(1.5)  # the worker's event loop blocked (a sync call in async code)
            probe.join()
            assert answers == [503]
            await asyncio.to_thread(_wait_for, f"{url}/healthz", 200)
    text = await asyncio.to_thread(lambda: httpx.get(f"http://127.0.0.1:{port}/metrics").text)
    assert total(text, "durable_agents_approvals_waiting") == 1
    assert total(text, "durable_agents_durability_errors", agent="a", tool="wire") == 1
    assert total(text, "durable_agents_runs", agent="a", status="stop", workflow_type="_Recording") == 1


def _probe_while_blocked(url: str) -> int:
    time.sleep(1.0)  # past stall_seconds into the block
    return httpx.get(url, timeout=5).status_code
