"""Recovery after a worker SIGKILL: seconds from the kill until the killed step runs again.

Real `durable-agents worker` processes (the CLI, its defaults) on one embedded
server; a model turn and a tool that each take --slow seconds. For each
activity mode and each phase (a model turn, a tool call), a run is started, the
worker running that step is SIGKILLed, and the bench waits for the step to start
again on a worker:

  standby: a second worker is already polling (N workers in production);
  restart: the only worker is started again right after the kill (a supervisor).

    .venv/bin/python bench/recovery.py [--slow 3] [--repeat 2] [--heartbeat 3] [--task-timeout 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer

BENCH = Path(__file__).resolve().parent
SLOW = {"value": 3.0}
CLI = Path(sys.executable).with_name("durable-agents")


class Worker:
    def __init__(self, address: str, store: str, queue: str, log: Path, slow: float, heartbeat: float | None) -> None:
        self.cmd = [str(CLI), "--address", address, "--store", store, "--task-queue", queue]
        self.cmd += ["worker", "--agent", "_recovery_agents:AGENTS"]
        self.env = {**os.environ, "PYTHONPATH": str(BENCH), "RECOVERY_LOG": str(log), "RECOVERY_SLOW": str(slow)}
        self.env["RECOVERY_HEARTBEAT"] = str(heartbeat or "")
        self.queue, self.proc = queue, None

    async def start(self, client: Client) -> None:
        self.proc = subprocess.Popen(  # noqa: ASYNC220 (returns at once)
            self.cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        identity = f"{self.proc.pid}@{socket.gethostname()}"
        while True:
            seen = []
            for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
                resp = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=client.namespace, task_queue=TaskQueue(name=self.queue), task_queue_type=kind
                    )
                )
                seen.append(identity in {p.identity for p in resp.pollers})
            if all(seen):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}")
            await asyncio.sleep(0.1)

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)


def events(log: Path, session: str, event: str) -> list[dict]:
    if not log.exists():
        return []
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["session"] == session and r["event"] == event]


async def wait_for(log: Path, session: str, event: str, count: int, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while len(found := events(log, session, event)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{session}: no {event} #{count} after {timeout}s")
        await asyncio.sleep(0.02)
    return found[count - 1]


async def one(client, agents, workers, log, mode, phase, standby) -> tuple[float, float]:
    session = f"recovery-{mode}-{phase}-{uuid.uuid4().hex[:6]}"
    handle = await agents.start(f"recovery-{mode}", "go", session_id=session)
    first = await wait_for(log, session, phase, 1)
    await asyncio.sleep(0.3)  # inside the step, not at its first line
    victim = next(w for w in workers if w.proc and w.proc.pid == first["pid"])
    victim.kill()
    killed = time.time()
    if not standby:
        await victim.start(client)
    again = await wait_for(log, session, phase, 2)
    # the step after it: the workflow task that schedules it may first wait on the dead worker's sticky queue
    after = await wait_for(log, session, "tool" if phase == "model" else "model", 1 if phase == "model" else 2)
    if standby:
        await victim.start(client)  # the next case has two workers again
    await asyncio.wait_for(agents.result(session, handle), 180)
    return again["t"] - killed, after["t"] - again["t"] - SLOW["value"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=float, default=3.0, help="seconds a model turn and a tool take")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--heartbeat", type=float, help="both heartbeat timeouts, seconds (default: the defaults)")
    parser.add_argument(
        "--task-timeout", type=float, help="AgentClient(workflow_task_timeout=…) seconds (default: Temporal's 10)"
    )
    opts = parser.parse_args()
    SLOW["value"] = opts.slow
    rows: list[tuple[str, str, str, list[tuple[float, float]]]] = []
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store_path, log = Path(tmp) / "store.db", Path(tmp) / "steps.jsonl"
        for standby in (True, False):
            queue = f"recovery-{uuid.uuid4().hex[:6]}"
            workers = [
                Worker(server.address, f"sqlite:///{store_path}", queue, log, opts.slow, opts.heartbeat)
                for _ in range(2 if standby else 1)
            ]
            for w in workers:
                await w.start(client)
            timeout = {"workflow_task_timeout": timedelta(seconds=opts.task_timeout)} if opts.task_timeout else {}
            agents = AgentClient(client, SqliteStore(store_path), queue, **timeout)
            try:
                for mode in ("regular", "local"):
                    for phase in ("model", "tool"):
                        took = [
                            await one(client, agents, workers, log, mode, phase, standby) for _ in range(opts.repeat)
                        ]
                        rows.append(("standby" if standby else "restart", mode, phase, took))
                        shown = " ".join(f"{t:.1f}s (+{n:.1f}s)" for t, n in took)
                        print(f"{rows[-1][0]:8} {mode:8} {phase:6} {shown}", flush=True)
            finally:
                for w in workers:
                    w.stop()
    print(f"\nseconds from SIGKILL until the killed step starts again (a step takes {opts.slow:g} s),")
    print("and the delay before the step after it starts (beyond the killed step's own time):")
    print(f"{'workers':8} {'mode':8} {'step':6} {'again median':>12} {'max':>6} {'next step delay':>16}")
    for who, mode, phase, took in rows:
        again, after = [t for t, _ in took], [n for _, n in took]
        print(
            f"{who:8} {mode:8} {phase:6} {statistics.median(again):11.1f}s {max(again):5.1f}s "
            f"{statistics.median(after):15.1f}s"
        )


if __name__ == "__main__":
    asyncio.run(main())
