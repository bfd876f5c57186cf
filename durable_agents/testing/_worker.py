"""Worker subprocesses for crash tests: start, wait until polling, SIGKILL, start afresh.

    worker = WorkerProcess(["myapp.agents:booker"], address=..., store_url="sqlite:///s.db",
                           task_queue="tq", log_dir=tmp, crash_window=CrashWindow.DURING_TOOL)
    await worker.start_ready(client)
    handle = await agent_client.start("booker", "hi", session_id="s1")
    await worker.wait_exit()            # it killed itself at the window
    await worker.restart(client)        # a fresh worker finishes the run
    result = await agent_client.result("s1", handle)

The subprocess is ``python -m durable_agents.testing worker …``: the regular
``build_worker`` with a :class:`CrashingSqliteStore` and recorded providers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable_agents.testing._core import KILLS, LOG_DIR_ENV, WINDOW_ENV, CrashWindow, read_records


class WorkerProcess:
    """One logical worker; each :meth:`start` is a new process (a new incarnation).

    ``agents``: ``module:attr`` specs importable from ``cwd``. ``crash_window``: where
    each incarnation kills itself (once per session; markers in ``log_dir``).
    ``sticky_timeout``: seconds a workflow task waits on a dead incarnation's sticky
    queue before any worker may take it (Temporal's default, 10 s, only adds latency
    after each kill); ``None`` keeps the default. ``max_concurrent_activities``: the
    worker's activity slots (``build_worker``'s default when ``None``); a worker with
    every slot busy leaves a run's next activities to the other workers of its queue.
    """

    def __init__(
        self,
        agents: Sequence[str],
        *,
        address: str,
        store_url: str,
        task_queue: str,
        log_dir: str | Path,
        crash_window: CrashWindow | str | None = None,
        namespace: str | None = None,
        cwd: str | Path | None = None,
        sticky_timeout: float | None = 1.0,
        env: dict[str, str] | None = None,
        max_concurrent_activities: int | None = None,
    ) -> None:
        self.agents, self.address, self.store_url = list(agents), address, store_url
        self.task_queue, self.namespace = task_queue, namespace
        self.log_dir = Path(log_dir)
        self.crash_window = CrashWindow(crash_window) if crash_window else None
        self.cwd, self.sticky_timeout, self.env = Path(cwd or os.getcwd()), sticky_timeout, env or {}
        self.max_concurrent_activities = max_concurrent_activities
        self.log_path = self.log_dir / f"worker-{task_queue}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []
        self.exit_codes: list[int] = []

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "durable_agents.testing",
            "worker",
            "--address",
            self.address,
            "--store",
            self.store_url,
            "--task-queue",
            self.task_queue,
            "--log-dir",
            str(self.log_dir),
        ]
        for spec in self.agents:
            cmd += ["--agent", spec]
        if self.namespace:
            cmd += ["--namespace", self.namespace]
        if self.crash_window:
            cmd += ["--crash-window", self.crash_window.value]
        if self.sticky_timeout:
            cmd += ["--sticky-timeout", str(self.sticky_timeout)]
        if self.max_concurrent_activities:
            cmd += ["--max-activities", str(self.max_concurrent_activities)]
        return cmd

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> WorkerProcess:
        if self.alive:
            raise RuntimeError(f"worker {self.pid} is still running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, LOG_DIR_ENV: str(self.log_dir)}
        env.pop(WINDOW_ENV, None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pids.append(self.proc.pid)
        return self

    async def wait_ready(self, client: Any = None, timeout: float = 60.0) -> None:
        """Until this incarnation says it runs and, given a Temporal client, until the
        server lists it among the task queue's workflow and activity pollers."""
        deadline, marker = time.monotonic() + timeout, f"ready pid={self.pid} "
        while marker not in self.log():
            if not self.alive:
                raise RuntimeError(f"worker exited with {self.proc and self.proc.returncode}:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.pid} did not start:\n{self.log()[-3000:]}")
            await asyncio.sleep(0.05)
        while client is not None and not await self._polling(client):
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.pid} does not poll {self.task_queue!r}")
            await asyncio.sleep(0.1)

    async def _polling(self, client: Any) -> bool:
        from temporalio.api.enums.v1 import TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

        identity = f"{self.pid}@{socket.gethostname()}"
        from temporalio.service import RPCError, RPCStatusCode

        transient = {RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE}
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            try:
                resp = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=client.namespace, task_queue=TaskQueue(name=self.task_queue), task_queue_type=kind
                    )
                )
            except RPCError as e:
                if e.status not in transient:
                    raise
                return False  # a busy server: ask again (the caller's deadline bounds it)
            if identity not in {p.identity for p in resp.pollers}:
                return False
        return True

    async def start_ready(self, client: Any = None, timeout: float = 60.0) -> WorkerProcess:
        self.start()
        await self.wait_ready(client, timeout)
        return self

    def kill(self) -> int | None:
        """SIGKILL this incarnation (no cleanup of any kind); returns its pid."""
        if not self.alive:
            return None
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self._reap()
        return self.proc.pid

    async def wait_exit(self, timeout: float = 60.0) -> int:
        """Until this incarnation exits (e.g. killed itself at its window); its exit code."""
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.pid} still runs after {timeout}s")
            await asyncio.sleep(0.05)
        return self._reap()

    async def restart(self, client: Any = None, timeout: float = 60.0) -> WorkerProcess:
        """Kill the running incarnation, if any, and start a fresh one."""
        self.kill()
        return await self.start_ready(client, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self._reap()

    def _reap(self) -> int:
        assert self.proc is not None
        code = self.proc.wait()
        if len(self.exit_codes) < len(self.pids):
            self.exit_codes.append(code)
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kills(self) -> list[dict[str, Any]]:
        """Kills its incarnations did to themselves at a crash window."""
        return [k for k in read_records(self.log_dir, KILLS) if k["pid"] in self.pids]

    async def __aenter__(self) -> WorkerProcess:
        return await self.start_ready()

    async def __aexit__(self, *exc: object) -> None:
        self.stop()


# -- the subprocess -------------------------------------------------------------------
async def _serve(args: argparse.Namespace) -> None:
    import durable_agents.worker as worker_module
    from durable_agents._loading import load_agents
    from durable_agents.checkpoint.stores import SqliteStore, open_store
    from durable_agents.client.connection import connect
    from durable_agents.testing._core import configure, recording_providers
    from durable_agents.testing._stores import CrashingSqliteStore

    configure(log_dir=args.log_dir, window=args.crash_window or "")
    store = open_store(args.store)
    if isinstance(store, SqliteStore):
        store.close()
        store = CrashingSqliteStore(store.path, window=args.crash_window, history_limit=store.history_limit)
    elif args.crash_window:
        raise SystemExit(f"crash windows need a sqlite:/// store, not {args.store}")
    configure(store=store)
    agents = [a for spec in args.agent for a in load_agents(spec)]
    client = await connect(args.address, args.namespace)
    sticky = timedelta(seconds=args.sticky_timeout) if args.sticky_timeout else timedelta(seconds=5)
    slots = {"max_concurrent_activities": args.max_activities} if args.max_activities else {}
    worker = worker_module.build_worker(
        client,
        agents=agents,
        store=store,
        task_queue=args.task_queue,
        providers=recording_providers(),
        sticky_queue_timeout=sticky,
        **slots,
    )
    async with worker:
        print(
            f"ready pid={os.getpid()} agents={','.join(a.name for a in agents)} window={args.crash_window or '-'}",
            flush=True,
        )
        await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m durable_agents.testing")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="a crash-test worker (see durable_agents.testing)")
    w.add_argument("--address", required=True)
    w.add_argument("--namespace")
    w.add_argument("--store", required=True)
    w.add_argument("--task-queue", required=True)
    w.add_argument("--agent", action="append", required=True)
    w.add_argument("--log-dir", required=True)
    w.add_argument("--crash-window", choices=[c.value for c in CrashWindow])
    w.add_argument("--sticky-timeout", type=float)
    w.add_argument("--max-activities", type=int)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
    os._exit(0)
