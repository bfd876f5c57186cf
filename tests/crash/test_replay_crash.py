"""A replay batch survives its worker: the `replay-worker` process is SIGKILLed mid-batch, a
fresh one finishes the batch, every session is replayed exactly once (one run each, the
replays finished before the kill untouched) and no tool runs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.worker import build_worker
from tests.replay_agents import EFFECTS_ENV, MODEL_DELAY_ENV, effects, support

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 20


def replay_worker(address: str, store: Path, queue: str, log: Path, effects_log: Path) -> subprocess.Popen:
    env = {**os.environ, EFFECTS_ENV: str(effects_log), MODEL_DELAY_ENV: "0.1"}
    seen = len(log.read_text(errors="replace")) if log.exists() else 0
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "durable_agents.cli", "--address", address, "--store", f"sqlite:///{store}",
                "replay-worker", "--against", "tests.replay_agents:support", "--replay-queue", queue,
            ],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    marker = "replay worker for support"
    while marker not in log.read_text(errors="replace")[seen:]:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"replay worker did not start:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)
    return proc


async def test_a_worker_killed_mid_batch_loses_and_redoes_no_replay(env, tmp_path, monkeypatch):
    effects_log = tmp_path / "effects.jsonl"
    monkeypatch.setenv(EFFECTS_ENV, str(effects_log))
    store_path, queue = tmp_path / "store.db", f"rq-{uuid.uuid4().hex[:8]}"
    store = SqliteStore(store_path)
    client = AgentClient(env.client, store, f"tq-{uuid.uuid4().hex[:8]}")
    names = [f"rec-{i}" for i in range(SESSIONS)]
    async with build_worker(env.client, agents=[support], store=store, task_queue=client.task_queue):
        await asyncio.gather(*(client.send("support", f"Order {i}?", session_id=s) for i, s in enumerate(names)))
    tools_recorded = len([e for e in effects(str(effects_log)) if e["kind"] == "tool"])

    address = env.client.service_client.config.target_host
    log = tmp_path / "worker.log"
    first = replay_worker(address, store_path, queue, log, effects_log)
    second = None
    try:
        batch = await client.start_replay(names, agent="support", task_queue=queue, tag="crash", concurrency=4)
        deadline = time.monotonic() + 60
        while (await batch.progress())[0] < 6:
            assert time.monotonic() < deadline, log.read_text()
            await asyncio.sleep(0.1)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        done_at_kill = {
            s: h.updated_at
            for s in names
            if (h := store.load_header(f"{s}.replay-crash")) is not None and h.status == "finished"
        }
        assert 6 <= len(done_at_kill) < SESSIONS  # killed mid-batch
        second = replay_worker(address, store_path, queue, log, effects_log)
        report = await asyncio.wait_for(client.batch_report(batch), timeout=120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert (report.total, report.identical, report.failed) == (SESSIONS, SESSIONS, 0)
    outcomes = await batch.outcomes()
    assert all(o.status == "replayed" and o.runs == 1 for o in outcomes)
    for s in names:  # one run of each replay session: none started again
        runs = [w async for w in env.client.list_workflows(f"WorkflowId = '{s}.replay-crash'")]
        assert len(runs) == 1, (s, [r.run_id for r in runs])
    for s, saved in done_at_kill.items():  # finished before the kill: not touched since
        assert store.load_header(f"{s}.replay-crash").updated_at == saved
    assert len([e for e in effects(str(effects_log)) if e["kind"] == "tool"]) == tools_recorded
    store.close()
