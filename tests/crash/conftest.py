"""Crash-test fixtures: worker subprocesses for tests/crash_agents.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from durable_agents.testing import CrashWindow, WorkerProcess

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "tests.crash_agents:ALL"


@pytest.fixture
def make_worker(env, tmp_path):
    """``make_worker(name, window=None, address=None)`` -> (WorkerProcess, store path, log dir)."""
    started: list[WorkerProcess] = []

    def make(name: str, window: CrashWindow | None = None, address: str | None = None):
        folder = tmp_path / name
        worker = WorkerProcess(
            [AGENTS],
            address=address or env.client.service_client.config.target_host,
            store_url=f"sqlite:///{folder / 'store.db'}",
            task_queue=f"crash-{name}-{uuid.uuid4().hex[:8]}",
            log_dir=folder / "logs",
            crash_window=window,
            cwd=ROOT,
        )
        started.append(worker)
        return worker, folder / "store.db", folder / "logs"

    yield make
    for worker in started:
        worker.stop()
