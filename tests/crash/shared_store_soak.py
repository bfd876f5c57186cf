"""The deployment ladder's third rung under crashes: several worker processes on ONE
task queue and ONE shared store (PostgreSQL), killed (SIGKILL) at random moments.

Used by tests/crash/test_pg_soak.py (small, in ``make test``) and bench/pg_soak.py
(large). Every worker incarnation logs to one directory (records carry the pid),
so :func:`check_guarantees` sees every execution of every run, whichever worker
ran it. Temporal hands out a run's activities to any worker polling the queue, so
a run's steps move between workers (and their transcript caches) all the time;
a kill moves its in-flight steps to whichever worker picks up the retry.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_agents import AgentClient
from durable_agents.checkpoint import CheckpointStatus, FinishReason
from durable_agents.checkpoint.stores import open_store
from durable_agents.testing import (
    PROVIDER_CALLS,
    SIDE_EFFECTS,
    GuaranteeViolation,
    WorkerProcess,
    check_guarantees,
    infer_window,
    read_records,
)

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "tests.crash_agents:ALL"
IN_FLIGHT = {"during-tool", "after-tool-before-record", "during-model-call"}
"""Where a kill lands on a run when the killed worker had one of its steps running."""


@dataclass
class SoakReport:
    seed: int
    runs: int
    workers: int
    local: bool
    worker_kills: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    """Run-kills by window: a step of the run was running on the killed worker."""
    others: int = 0
    """Runs in progress at a kill with no step running on the killed worker."""
    violations: list[str] = field(default_factory=list)
    shared_runs: int = 0
    """Runs whose steps ran on more than one worker."""
    resumed_elsewhere: int = 0
    """Run-kills whose run went on on another worker (not the killed one's restart)."""
    returns: int = 0
    """Runs with a model call by a worker incarnation that had worked on the run before
    another one wrote to it (its transcript cache held the session: it must read the
    other's messages)."""
    elapsed: float = 0.0
    durations: list[float] = field(default_factory=list)
    totals: Counter[str] = field(default_factory=Counter)

    def lines(self) -> list[str]:
        mode = " (half on local activities)" if self.local else ""
        durations = sorted(self.durations) or [0.0]
        return [
            f"shared-store soak seed={self.seed}: {self.runs} runs on {self.workers} workers, one task queue, "
            f"one PostgresStore{mode}; {self.worker_kills} worker kills, {sum(self.hits.values())} run-kills "
            f"(a step in flight; {self.others} runs elsewhere or between steps) in {self.elapsed:.0f}s; "
            f"{len(self.violations)} violations",
            f"runs with steps on >1 worker: {self.shared_runs}/{self.runs}; killed steps resumed on another "
            f"worker: {self.resumed_elsewhere}; runs taken up again by a worker that had cached them: {self.returns}",
            f"run time median {durations[len(durations) // 2]:.0f}s, max {durations[-1]:.0f}s; "
            + ", ".join(f"{k} {v}" for k, v in self.totals.items()),
            *(f"  {where:26} {n}" for where, n in self.hits.most_common()),
        ]


async def _sleep_unless(seconds: float, stop) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop():
        await asyncio.sleep(0.05)


async def _restart(proc: WorkerProcess, temporal: Any, delay: float) -> None:
    await asyncio.sleep(delay)  # a supervisor's pause: the other workers take over meanwhile
    await proc.start_ready(temporal)


async def run_soak(
    temporal: Any,
    store_url: str,
    folder: Path,
    *,
    runs: int,
    workers: int = 2,
    kills: int = 4,
    seed: int = 0,
    local: bool = True,
    gap: tuple[float, float] = (0.3, 1.5),
    restart_delay: tuple[float, float] = (0.0, 2.0),
    activity_slots: int | None = 3,
    result_timeout: float = 240.0,
) -> SoakReport:
    """``runs`` soak runs (``crash-soak``; every other one ``crash-soak-local`` when
    ``local``) on ``workers`` worker processes sharing one task queue and the store
    at ``store_url``; ``kills`` times, after a random pause in ``gap``, a random
    live worker is SIGKILLed (and started again in the background after a pause
    in ``restart_delay``). ``activity_slots`` per worker: a worker with every slot
    busy leaves the next activity to another one (else Temporal runs a run's
    activities on its workflow's worker), so runs go back and forth between workers
    and each worker's transcript cache reads messages the others wrote. Then every run
    must finish (``stop``) and keep every guarantee (violations are reported, not raised)."""
    rng = random.Random(seed)
    report = SoakReport(seed=seed, runs=runs, workers=workers, local=local)
    logs, queue = folder / "logs", f"pg-soak-{uuid.uuid4().hex[:8]}"
    address = temporal.service_client.config.target_host
    procs = [
        WorkerProcess(
            [AGENTS],
            address=address,
            store_url=store_url,
            task_queue=queue,
            log_dir=logs,
            cwd=ROOT,
            max_concurrent_activities=activity_slots,
        )
        for _ in range(workers)
    ]
    for w, proc in enumerate(procs):
        proc.log_path = logs / f"worker-{w}.log"  # one log directory, one output file each
    store = open_store(store_url)
    restarts: dict[int, asyncio.Task[Any]] = {}
    kill_hits: list[tuple[str, int, float]] = []  # (session, killed worker, time)
    try:
        await asyncio.gather(*(p.start_ready(temporal) for p in procs))
        client = AgentClient(temporal, store, queue)
        sids = [f"pg-soak-{seed}-{i}" for i in range(runs)]
        started = time.monotonic()
        begun = time.time()
        handles = [
            await client.start(
                "crash-soak-local" if local and i % 2 else "crash-soak", f"pg seed {seed}/{i}", session_id=sid
            )
            for i, sid in enumerate(sids)
        ]
        done: set[str] = set()
        last_poll = [0.0]

        def all_done() -> bool:
            if time.monotonic() - last_poll[0] > 0.25:
                last_poll[0] = time.monotonic()
                for sid in sids:
                    h = None if sid in done else store.load_header(sid)
                    if h is not None and h.status == CheckpointStatus.FINISHED:
                        done.add(sid)
            return len(done) == len(sids)

        for _ in range(kills):
            await _sleep_unless(rng.uniform(*gap), all_done)
            while not all_done() and not any(p.alive for w, p in enumerate(procs) if w not in restarts):
                await asyncio.sleep(0.05)  # every worker is starting again: wait for one
            if all_done():
                break
            w = rng.choice([w for w, p in enumerate(procs) if p.alive and w not in restarts])
            pid = procs[w].kill()
            at = time.time()
            report.worker_kills += 1
            assert pid is not None
            touched = {
                r["session"]
                for name in (SIDE_EFFECTS, PROVIDER_CALLS)
                for r in read_records(logs, name)
                if r["pid"] == pid
            }
            for sid in sids:
                header = store.load_header(sid)
                if header is None or header.status != CheckpointStatus.IN_PROGRESS:
                    continue
                if sid not in touched:  # (only the killed pid's records can place a kill in flight)
                    report.others += 1
                    continue
                where = infer_window(store, sid, logs, pid)
                if where in IN_FLIGHT:
                    report.hits[where] += 1
                    kill_hits.append((sid, w, at))
                else:
                    report.others += 1
            restarts[w] = asyncio.create_task(_restart(procs[w], temporal, rng.uniform(*restart_delay)))
            restarts[w].add_done_callback(lambda _t, w=w: restarts.pop(w, None))
        await asyncio.gather(*list(restarts.values()))

        for sid, handle in zip(sids, handles):
            result = await asyncio.wait_for(client.result(sid, handle), result_timeout)
            if result.finish_reason != FinishReason.STOP:
                report.violations.append(f"{sid} finished with {result.finish_reason}")
                continue
            report.durations.append(store.load_header(sid).updated_at.timestamp() - begun)
            try:
                summary = check_guarantees(store.load(sid), logs, logs)
            except GuaranteeViolation as e:
                report.violations.append(str(e))
                continue
            report.totals.update(
                tool_calls=summary.tool_calls,
                model_calls=summary.provider_calls,
                durability_errors=len(summary.durability_errors),
                safe_reruns=len(summary.re_runs),
                regenerated_uncommitted=summary.regenerated_uncommitted,
            )
        report.elapsed = time.monotonic() - started
        for w, proc in enumerate(procs):
            if not proc.alive:
                report.violations.append(f"worker {w} (pid {proc.pid}) exited by itself: {proc.log()[-2000:]}")
    finally:
        for task in list(restarts.values()):
            task.cancel()
        for proc in procs:
            proc.stop()
        store.close()

    owner = {pid: w for w, proc in enumerate(procs) for pid in proc.pids}
    records = sorted(
        (r for name in (SIDE_EFFECTS, PROVIDER_CALLS) for r in read_records(logs, name) if r.get("event") != "end"),
        key=lambda r: r["t"],
    )
    by_session: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_session.setdefault(r["session"], []).append(r)
    report.shared_runs = sum(len({owner[r["pid"]] for r in rs}) > 1 for rs in by_session.values())
    for rs in by_session.values():  # a model call by an incarnation that read the session before another wrote to it
        seen: set[int] = set()  # incarnations that made a model call for the run (and cached it)
        for before, r in itertools.pairwise(rs):
            if "position" in before:
                seen.add(before["pid"])
            if "position" in r and r["pid"] in seen and before["pid"] != r["pid"]:
                report.returns += 1
                break
    for sid, w, at in kill_hits:
        after = next((r for r in by_session.get(sid, []) if r["t"] > at), None)
        report.resumed_elsewhere += after is not None and owner[after["pid"]] != w
    return report
