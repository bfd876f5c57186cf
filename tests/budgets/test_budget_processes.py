"""Budgets across worker processes: two workers on one PostgreSQL store share one budget;
a worker SIGKILLed while it holds a reservation frees it when its lease ends, not before."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError

from durable_agents.checkpoint import open_store
from durable_agents.checkpoint.budget_ledger import BUDGETS_SUFFIX, SqliteLedger
from durable_agents.checkpoint.format import FinishReason
from durable_agents.client import AgentClient

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODEL = "anthropic:claude-fake"


class Workers:
    def __init__(self, address: str, store_url: str, task_queue: str, fake) -> None:
        self.address, self.store_url, self.task_queue, self.fake = address, store_url, task_queue, fake
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, budget: dict, *extra: str) -> subprocess.Popen:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": self.fake.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test-key",
        }
        args = [self.address, self.store_url, self.task_queue, name, json.dumps(budget), *extra]
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.budgets.worker_main", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == "ready", f"worker {name} did not start (exit {process.poll()})"
        return process

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.wait(10)


def sid(prefix: str = "s") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("shared", [True, False], ids=["one-ledger", "a-ledger-each"])
async def test_two_worker_processes_on_one_postgres_store_share_one_budget(env, postgres_url, shared):
    from tests.fakes.rate_limited import RateLimitedServer
    from tests.postgres_server import fresh_schema

    per_window, window = 4, 3.0
    budget = {"model": MODEL, "requests_per_minute": per_window, "window_seconds": window}
    with (
        RateLimitedServer(requests_per_window=per_window, window=window, tool_turns=0) as fake,
        fresh_schema(postgres_url) as url,
    ):
        store = open_store(url)
        workers = Workers(env.client.service_client.config.target_host, url, f"tq-{uuid.uuid4().hex[:8]}", fake)
        try:
            mode = () if shared else ("own-ledger",)
            workers.start("w1", budget, *mode)
            workers.start("w2", budget, *mode)
            client = AgentClient(env.client, store, workers.task_queue)
            sessions = [sid() for _ in range(16)]
            results = await asyncio.wait_for(
                asyncio.gather(*[client.send("budgeted", s, session_id=s) for s in sessions]), timeout=240
            )
        finally:
            workers.stop()
            store.close()
    assert [r.finish_reason for r in results] == [FinishReason.STOP] * len(sessions)
    if shared:
        assert {a.worker for a in fake.admitted} == {"w1", "w2"}, "one worker took every call"
        assert len(fake.refused) <= 1, f"{len(fake.refused)} 429s with one shared budget"
    else:  # each worker keeps the limit alone: together they are refused (the test can fail)
        assert len(fake.refused) >= 2, f"only {len(fake.refused)} 429s with a budget per worker"


async def test_a_killed_holder_frees_its_reservation_when_its_lease_ends(env, tmp_path):
    from tests.fakes.rate_limited import RateLimitedServer

    window = 6.0
    budget = {"model": MODEL, "requests_per_minute": 1, "window_seconds": window}
    store_path = tmp_path / "store.db"
    with RateLimitedServer(requests_per_window=1, window=window, tool_turns=0, hold_seconds=30) as fake:
        store = open_store(f"sqlite:///{store_path}")
        workers = Workers(env.client.service_client.config.target_host, f"sqlite:///{store_path}", "tq-" + sid(), fake)
        client = AgentClient(env.client, store, workers.task_queue)
        first, second = sid("first"), sid("second")
        try:
            holder = workers.start("w1", budget)
            await client.start("budgeted", first, session_id=first)
            deadline = time.monotonic() + 60
            while not fake.admitted and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert fake.admitted, "the first call never reached the provider"
            os.kill(holder.pid, signal.SIGKILL)  # mid-call: its reservation is never settled
            holder.wait(10)
            killed_at = time.time()
            with sqlite3.connect(f"{store_path}{BUDGETS_SUFFIX}") as db:
                [(expires_at,)] = db.execute("SELECT expires_at FROM da_budget_rows").fetchall()
            ledger = SqliteLedger(f"{store_path}{BUDGETS_SUFFIX}")
            held = ledger.usage(f"{MODEL}", killed_at)
            freed = ledger.usage(f"{MODEL}", expires_at)
            ledger.close()
            fake.hold_seconds = 0
            workers.start("w2", budget)
            result = await asyncio.wait_for(client.send("budgeted", second, session_id=second), timeout=120)
        finally:
            workers.stop()
            with contextlib.suppress(RPCError):  # (it may have finished on the second worker)
                await env.client.get_workflow_handle(first).terminate()
            store.close()
    assert held.requests == 1, "the killed worker's reservation was not held"
    assert expires_at <= fake.admitted[0].at + window * 1.1  # its lease: one window (and a margin) from its booking
    assert freed.requests == 0, "the reservation outlived its lease"
    assert result.finish_reason == FinishReason.STOP
    assert fake.admitted[0].tag == first and second in {a.tag for a in fake.admitted}
    # nothing was sent before the killed call's lease ended (the provider still counted that call)
    later = [a.at for a in fake.admitted[1:]] + [at for at, _, _ in fake.refused]
    assert min(later) >= expires_at, "a call was sent while the killed worker's reservation still counted"
