"""A budget wait handed to the workflow's timer is a normal wait, not a crash: the worker's log
says it in one INFO line, with no traceback; a real activity failure still logs its traceback.
A real `durable-agents worker` process (with Python's logging at INFO) and its log."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from durable_agents.checkpoint import open_store
from durable_agents.checkpoint.format import FinishReason
from durable_agents.client import AgentClient
from durable_agents.errors import PropagatingToolError

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _start_worker(address: str, store_url: str, task_queue: str, log: Path) -> subprocess.Popen:
    with log.open("w") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.budgets.logged_cli", "worker", "--address", address,
             "--store", store_url, "--task-queue", task_queue, "--agent", "tests.budgets.logged_agents:AGENTS",
             "--budgets", "tests.budgets.logged_agents:BUDGETS"],
            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while "rate-limit budgets" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc


async def test_a_budget_wait_logs_one_info_line_and_a_real_failure_its_traceback(env, tmp_path):
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    task_queue = f"tq-log-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    proc = _start_worker(env.client.service_client.config.target_host, store_url, task_queue, log)
    store = open_store(store_url)
    try:
        client = AgentClient(env.client, store, task_queue)
        waited = await client.send("log-waiter", "work", session_id=f"waiter-{uuid.uuid4().hex[:8]}")
        history = await env.client.get_workflow_handle(waited.session_id).fetch_history()
        handed = [
            e.activity_task_failed_event_attributes.failure.application_failure_info.type
            for e in history.events
            if e.HasField("activity_task_failed_event_attributes")
        ]
        before_failure = log.read_text()
        with pytest.raises(PropagatingToolError):
            await client.send("log-charger", "charge", session_id=f"charger-{uuid.uuid4().hex[:8]}")
    finally:
        proc.terminate()
        proc.wait(30)
        store.close()
    assert waited.finish_reason == FinishReason.STOP
    assert handed == ["BudgetWait"], handed  # the second model call handed its wait to the workflow once
    waits = [line for line in before_failure.splitlines() if "rate-limit budget" in line and "INFO" in line]
    assert len(waits) == 1, before_failure
    assert "scripted:log-step-then-answer" in waits[0] and "waits on a timer" in waits[0], waits[0]
    assert "Traceback" not in before_failure and "Completing activity as failed" not in before_failure, before_failure
    failed = log.read_text()[len(before_failure) :]
    assert "Completing activity as failed" in failed and "Traceback" in failed, failed
    assert "the payment provider is down (a real failure)" in failed, failed
