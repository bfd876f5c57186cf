"""Many sessions on one worker with a 1 s model: wall time against the ideal, steps/s, worker RSS.

N sessions of --steps steps (a model turn that takes --model-seconds, then an
instant tool) start at once on one in-process worker on the embedded server (and on
--workers - 1 more `durable-agents worker` processes on the same task queue and store);
the ideal wall time is steps × model seconds (every session's turns overlap). Where the time
over it goes: when each session's first model call was asked (after the batch began: the
median and the last) and how long a session waits between the end of one model call and the
start of its next (its tool step and the orchestration around both: median and 90th
percentile), and where a run's start goes: the median time after the batch began of each
history event before its first model call (the run started, its workflow tasks and activities
taken and done). The modes
``raw-local`` and ``raw-regular`` run the same sessions on the raw Temporal loop
(``_raw_loop.py``: a model-like activity with the same latency and an instant tool-like one,
no store), on a worker with the same tuning, side by side in the same run; ``raw-local-start``
is the raw local loop started as our client starts a run (the input written to the store file,
then update-with-start: the floor of a run's start, with --client-process). The sessions are
sent from the worker's process, or with --client-process from a process of their own (as an
application's server sends them; ``_capacity_clients.py``), ours and the raw loop's alike.

    .venv/bin/python bench/capacity.py [--sessions 50,100,200] [--steps 5] [--mode raw-local,local,...] [--workers 2]
                                       [--client-process]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from statistics import median, quantiles

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _raw_loop import SLOW_MODEL_CALLS, RawAgentLoop, RawRun, raw_slow_model_turn, raw_tool_call
from temporalio.api.enums.v1 import EventType, TaskQueueType, TimeoutType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.worker import _pollers as poller_behavior
from durable_agents.worker import build_worker

BENCH = Path(__file__).resolve().parent
CLI = Path(sys.executable).with_name("durable-agents")


def configure(opts: argparse.Namespace, calls: Path) -> None:
    """The agents' settings, for this process and the workers it starts (``_capacity_agents``)."""
    os.environ["CAPACITY_MODEL_SECONDS"] = str(opts.model_seconds)
    os.environ["CAPACITY_STEPS"] = str(opts.steps - 1)  # tool steps; the last model turn answers
    os.environ["CAPACITY_CALLS"] = str(calls)
    if opts.model_heartbeat:
        os.environ["CAPACITY_HEARTBEAT"] = str(opts.model_heartbeat)


async def start_workers(client: Client, opts: argparse.Namespace, address: str, store: str, queue: str) -> list:
    """``--workers - 1`` worker processes (the CLI's, with the in-process worker's tuning but the
    CLI's 100 workflow task slots); back once all poll."""
    procs = []
    for _ in range(opts.workers - 1):
        cmd = [str(CLI), "--address", address, "--store", store, "--task-queue", queue, "worker"]
        cmd += ["--agent", "_capacity_agents:AGENTS", "--pollers", str(opts.pollers)]
        cmd += ["--max-concurrent-activities", str(opts.activities)]
        cmd += ["--sticky-timeout", str(opts.sticky)] if opts.sticky else []
        env = {**os.environ, "PYTHONPATH": str(BENCH)}
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # noqa: ASYNC220
    while procs:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
        if len({p.identity for p in resp.pollers}) >= len(procs):  # this process polls once its worker runs
            break
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a worker process exited at start")
        await asyncio.sleep(0.2)
    return procs


def cpu_seconds(pid: int | None = None) -> float:
    """CPU (user + system) used so far by this process, or by process ``pid`` (the server)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def task_timeouts(client: Client, workflow_ids: list[str]) -> tuple[int, list[list]]:
    """Workflow tasks of these runs that timed out while a worker held them (a busy worker
    late with its task: the task is given again and the run replays), and each run's history
    up to its first model call (``start_steps``)."""
    late, histories = 0, []
    for workflow_id in workflow_ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        late += sum(
            1
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
            and e.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
        )
        histories.append(list(history.events[:16]))
    return late, histories


START_STEPS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "run started",
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: "workflow task {n} taken",
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "workflow task {n} done",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity {n} scheduled",
    EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED: "activity {n} taken",
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity {n} done",
}


def start_steps(histories: list[list], calls: list[tuple[str, float]], ids: list[str], began: float) -> str:
    """Where a run's start goes: the median time after the batch began of each history event
    before the session's first model call was asked (then that call), as one line."""
    first: dict[str, float] = {}
    for sid, at in calls:
        first[sid] = min(at, first.get(sid, at))
    steps: dict[str, list[float]] = {}
    for sid, events in zip(ids, histories, strict=True):
        if sid not in first:
            continue
        seen: dict[EventType.ValueType, int] = {}
        for e in events:
            at = e.event_time.ToMicroseconds() / 1e6
            if at > first[sid]:
                break
            if e.event_type not in START_STEPS:
                continue
            seen[e.event_type] = seen.get(e.event_type, 0) + 1
            steps.setdefault(START_STEPS[e.event_type].format(n=seen[e.event_type]), []).append(at - began)
        steps.setdefault("first model call asked", []).append(first[sid] - began)
    return ", ".join(f"{name} {median(times):.2f}" for name, times in sorted(steps.items(), key=lambda s: median(s[1])))


def timeline(calls: list[tuple[str, float]], ids: list[str], began: float, model_seconds: float) -> tuple[float, ...]:
    """Seconds: the sessions' first model calls after ``began`` (median, last), and the waits
    between one model call's end and the session's next call (median, 90th percentile)."""
    asked: dict[str, list[float]] = {sid: [] for sid in ids}
    for sid, at in calls:
        if sid in asked:
            asked[sid].append(at)
    firsts = sorted(min(times) - began for times in asked.values() if times)
    gaps = [b - a - model_seconds for times in asked.values() for a, b in itertools.pairwise(sorted(times))]
    if not gaps:  # --steps 1: one model call a session, nothing between calls
        return median(firsts), firsts[-1], math.nan, math.nan
    return median(firsts), firsts[-1], median(gaps), quantiles(gaps, n=10)[-1] if len(gaps) > 1 else gaps[0]


def raw_tuning(tuning: dict) -> dict:
    """The raw loop's worker (Temporal's defaults otherwise: its workflow sandbox) with our worker's tuning."""
    behavior = poller_behavior(tuning["pollers"])  # as build_worker makes it
    return {
        "activities": [raw_slow_model_turn, raw_tool_call],
        "max_concurrent_workflow_tasks": tuning["max_concurrent_workflow_tasks"],
        "max_concurrent_activities": tuning["max_concurrent_activities"],
        "max_concurrent_local_activities": tuning["max_concurrent_local_activities"],
        "workflow_task_poller_behavior": behavior,
        "activity_task_poller_behavior": behavior,
    }


class ClientProcess:
    """``_capacity_clients.py``: sends each batch from a process of its own."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.cpu = 0.0
        """Its CPU seconds at its last answer."""

    async def _line(self) -> dict:
        line = await asyncio.to_thread(self.proc.stdout.readline)  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the client process exited ({self.proc.wait()})")
        return json.loads(line)

    async def send(self, mode: str, ids: list[str], opts: argparse.Namespace) -> dict:
        batch = {"mode": mode, "ids": ids, "steps": opts.steps, "modelSeconds": opts.model_seconds}
        self.proc.stdin.write(json.dumps(batch) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        done = await self._line()
        self.cpu = done["cpu"]
        return done


@contextlib.asynccontextmanager
async def client_process(opts: argparse.Namespace, address: str, tmp: str, queue: str):
    """With ``--client-process``: the clients' process, connected and warmed up (one run of each mode)."""
    if not opts.client_process:
        yield None
        return
    cmd = [sys.executable, str(BENCH / "_capacity_clients.py"), address, str(Path(tmp) / "store.db"), queue]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # noqa: ASYNC220
    try:
        clients = ClientProcess(proc)
        await clients._line()  # ready
        for mode in opts.mode.split(","):
            await clients.send(mode, [f"warm-client-{mode}-{uuid.uuid4().hex[:6]}"], opts)
        yield clients
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(30)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="50,100,200")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--model-seconds", type=float, default=1.0)
    parser.add_argument(
        "--mode",
        default="raw-local,local,raw-regular,regular",
        help="of regular, local, auto, and the raw Temporal loop: raw-regular, raw-local, and raw-local-start "
        "(the raw local loop started as our client starts a run: its input written to the store, then "
        "update-with-start; with --client-process)",
    )
    parser.add_argument(
        "--task-timeout", type=float, help="AgentClient(workflow_task_timeout=…) seconds (default: Temporal's 10)"
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (the first in this process)")
    parser.add_argument("--model-heartbeat", type=float, help="Agent(model_heartbeat_timeout=…) (default: the default)")
    parser.add_argument("--activities", type=int, default=200, help="build_worker(max_concurrent_activities=…)")
    parser.add_argument("--pollers", default="auto", help="build_worker(pollers=…): 'auto' or a number")
    parser.add_argument("--workflow-tasks", type=int, default=100, help="build_worker(max_concurrent_workflow_tasks=…)")
    parser.add_argument(
        "--sticky", type=float, help="build_worker(sticky_queue_timeout=…) seconds (default: the default)"
    )
    parser.add_argument(
        "--client-process",
        action="store_true",
        help="send the sessions from a process of their own (_capacity_clients.py), not from the worker's",
    )
    opts = parser.parse_args()
    ideal = opts.steps * opts.model_seconds
    rows = []
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        configure(opts, Path(tmp) / "calls")
        from _capacity_agents import AGENTS, MODES, model_call_starts, model_calls

        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"capacity-{uuid.uuid4().hex[:6]}"
        pollers = opts.pollers if opts.pollers == "auto" else int(opts.pollers)
        tuning = {
            "pollers": pollers,
            "max_concurrent_workflow_tasks": opts.workflow_tasks,
            "max_concurrent_activities": opts.activities,
            "max_concurrent_local_activities": opts.activities,
            **({"sticky_queue_timeout": timedelta(seconds=opts.sticky)} if opts.sticky else {}),
        }
        print(f"worker: {tuning}", flush=True)
        procs = await start_workers(client, opts, server.address, f"sqlite:///{Path(tmp) / 'store.db'}", queue)
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(
                build_worker(client, agents=AGENTS, store=store, task_queue=queue, **tuning)
            )
            timeout = {"workflow_task_timeout": timedelta(seconds=opts.task_timeout)} if opts.task_timeout else {}
            da = AgentClient(client, store, queue, **timeout)
            await asyncio.gather(*(da.send(f"cap-{m}", "warm up", session_id=f"warm-{m}") for m in MODES))
            raw_queue = f"{queue}-raw"
            raw = Worker(client, task_queue=raw_queue, workflows=[RawAgentLoop], **raw_tuning(tuning))
            await stack.enter_async_context(raw)

            clients = await stack.enter_async_context(client_process(opts, server.address, tmp, queue))

            async def run_raw(mode: str, ids: list[str]) -> tuple[int, int]:
                if clients is not None:
                    return (await clients.send(mode, ids, opts))["steps"], 0
                if mode == "raw-local-start":
                    raise SystemExit(
                        "--mode raw-local-start needs --client-process (it starts runs as our client does)"
                    )
                run = RawRun(steps=opts.steps - 1, local=mode == "raw-local", model_seconds=opts.model_seconds)
                turns = await asyncio.gather(
                    *(client.execute_workflow(RawAgentLoop.run, run, id=i, task_queue=raw_queue) for i in ids)
                )
                return sum(turns), 0

            async def run_ours(mode: str, ids: list[str]) -> tuple[int, int]:
                calls = model_calls()
                if clients is not None:
                    done = await clients.send(mode, ids, opts)
                    return done["steps"], model_calls() - calls - done["requests"]
                results = await asyncio.gather(*(da.send(f"cap-{mode}", "go", session_id=sid) for sid in ids))
                return sum(r.steps for r in results), model_calls() - calls - sum(r.usage.requests for r in results)

            await run_raw("raw-local", ["warm-raw-local"])
            await run_raw("raw-regular", ["warm-raw-regular"])
            for mode in opts.mode.split(","):
                for n in (int(x) for x in opts.sessions.split(",")):
                    started, began = time.perf_counter(), time.time()
                    cpu = cpu_seconds(), cpu_seconds(server.pid), sum(cpu_seconds(p.pid) for p in procs)
                    client_cpu = clients.cpu if clients is not None else 0.0
                    ids = [f"cap-{uuid.uuid4().hex[:10]}" for _ in range(n)]
                    steps, twice = await (run_raw if mode.startswith("raw-") else run_ours)(mode, ids)
                    wall = time.perf_counter() - started
                    worker_cpu, server_cpu = cpu_seconds() - cpu[0], cpu_seconds(server.pid) - cpu[1]
                    worker_cpu += sum(cpu_seconds(p.pid) for p in procs) - cpu[2]
                    worker_cpu += (clients.cpu if clients is not None else 0.0) - client_cpu
                    busy = (worker_cpu + server_cpu) / (wall * (os.cpu_count() or 1))
                    late, histories = await task_timeouts(client, ids)
                    calls = SLOW_MODEL_CALLS if mode.startswith("raw-") else model_call_starts()
                    when = timeline(calls, ids, began, opts.model_seconds)
                    print(f"{mode:11} {n:4} sessions' start, s (median): {start_steps(histories, calls, ids, began)}")
                    rows.append((mode, n, wall, wall / ideal, steps / wall, rss_mb(), twice, late, busy, when))
                    print(
                        f"{mode:11} {n:4} sessions: {wall:6.1f} s ({wall / ideal:.2f}× ideal), "
                        f"{steps / wall:5.1f} steps/s, RSS {rss_mb():.0f} MB, {twice} model calls asked again, "
                        f"{late} workflow tasks timed out; "
                        f"CPU per step: workers + client {1000 * worker_cpu / steps:.1f} ms, "
                        f"server {1000 * server_cpu / steps:.1f} ms; cores busy {100 * busy:.0f} %; "
                        f"first model calls at {when[0]:.2f} s (median), {when[1]:.2f} s (last); "
                        f"between model calls {1000 * when[2]:.0f} ms (median), {1000 * when[3]:.0f} ms (p90)",
                        flush=True,
                    )
        for p in procs:
            p.terminate()
            p.wait(30)
        store.close()
    print(f"\n{opts.workers} worker process(es); RSS is the first's")
    print(f"{opts.steps} steps per session, {opts.model_seconds:g} s model; ideal wall {ideal:g} s")
    print(
        "×raw: steps/s against the raw loop of the same activity kind (local and auto: raw-local) at as many sessions"
    )
    print("first call: when the sessions' first model calls were asked, s after the start (median / last)")
    print("between: from a model call's end to the session's next call, ms (median / 90th percentile)")
    print(
        f"{'mode':11} {'sessions':>8} {'wall s':>7} {'× ideal':>8} {'steps/s':>8} {'×raw':>5} {'RSS MB':>7} "
        f"{'asked again':>11} {'tasks timed out':>15} {'cores busy':>10} {'first call':>11} {'between':>9}"
    )
    rates = {(mode, n): rate for mode, n, _, _, rate, *_ in rows}
    for mode, n, wall, ratio, rate, rss, twice, late, busy, when in rows:
        base = rates.get(("raw-regular" if mode == "regular" else "raw-local", n))
        vs = f"{rate / base:5.2f}" if base and not mode.startswith("raw-") else f"{'':5}"
        print(
            f"{mode:11} {n:8} {wall:7.1f} {ratio:8.2f} {rate:8.1f} {vs} {rss:7.0f} {twice:11} {late:15} "
            f"{100 * busy:9.0f}% {when[0]:5.2f}/{when[1]:4.2f} {1000 * when[2]:4.0f}/{1000 * when[3]:<4.0f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
