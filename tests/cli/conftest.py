"""CLI tests: real `durable-agents` processes against the session's Temporal dev server.

One worker process serves every test of this package (``cli`` fixture); tests
that stop workers start their own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "durable_agents.cli"]
AGENTS = [
    "tests.agents:weather_agent",
    "tests.agents:payments_agent",
    "tests.agents:slow_agent",
    "tests.agents:bad_agent",
    "tests.agents:looping_agent",
    "tests.cli.agents_cli:napper_agent",
    "tests.cli.agents_cli:dozer_agent",
    "tests.cli.agents_cli:greeter_agent",
]


def session_id(prefix: str = "c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Ran:
    """What an in-process CLI call printed, shaped like ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


def one_line_error(out: subprocess.CompletedProcess | Ran, code: int, needle: str) -> str:
    """Assert a failure printed as one clear line on stderr (no traceback); return it."""
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    err = out.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("durable-agents") and needle in err, err
    return err


@dataclass
class Cli:
    """Runs ``durable-agents <global flags> …`` as a separate process."""

    address: str
    task_queue: str
    store_path: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.store_path}"

    @property
    def flags(self) -> list[str]:
        return ["--address", self.address, "--task-queue", self.task_queue, "--store", self.store_url]

    def __call__(
        self,
        *args: str,
        timeout: float = 120,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        merged = {k: v for k, v in os.environ.items() if k != "DURABLE_AGENTS_UI_URL"}  # deterministic links
        merged.update({**self.env, **(env or {})})
        return subprocess.run(
            [*CLI, *self.flags, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=merged
        )

    def inproc(self, *args: str) -> Ran:
        """``main()`` in this process: the same code path, without an interpreter start (~1 s).

        For read commands and argument errors; runs and decisions use real processes.
        """
        from durable_agents.cli import main

        def call() -> int:
            try:
                return main([*self.flags, *args])
            except SystemExit as e:  # argparse
                return int(e.code or 0)

        out, err = io.StringIO(), io.StringIO()
        path = list(sys.path)  # a command that imports MODULE:ATTR puts its directory on it, as a CLI must
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                with ThreadPoolExecutor(1) as pool:  # its own thread: callers may be inside an event loop
                    code = pool.submit(call).result()
        finally:
            sys.path[:] = path  # this test process imports the package as installed, never from the root
        return Ran(code, out.getvalue(), err.getvalue())

    def read(self, *args: str) -> str:
        """An in-process read command that must succeed; its stdout."""
        out = self.inproc(*args)
        assert out.returncode == 0, (out.stdout, out.stderr)
        return out.stdout

    def read_json(self, *args: str) -> Any:
        return json.loads(self.read(*args, "--json"))

    def run_argv(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        """A command line as printed by the CLI (global flags included)."""
        return subprocess.run(
            argv,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={k: v for k, v in os.environ.items() if k != "DURABLE_AGENTS_UI_URL"},
        )

    def ok(self, *args: str, **kw: Any) -> str:
        out = self(*args, **kw)
        assert out.returncode == 0, (out.stdout, out.stderr)
        return out.stdout

    def json(self, *args: str, **kw: Any) -> Any:
        return json.loads(self.ok(*args, "--json", **kw))

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [*CLI, *self.flags, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def start_worker(self, agents: list[str], log: Path) -> subprocess.Popen:
        """A `durable-agents worker` process; returns once it polls."""
        handle = log.open("w")
        args = [a for spec in agents for a in ("--agent", spec)]
        proc = subprocess.Popen(
            [*CLI, *self.flags, "worker", *args],
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **self.env},  # the same environment as the commands (e.g. encryption keys)
        )
        deadline = time.monotonic() + 60
        while "worker for" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{log.read_text()}")
            time.sleep(0.05)
        return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="package")
def cli(env, tmp_path_factory) -> Cli:
    """The CLI against one shared worker (all test agents) and one SQLite store."""
    folder = tmp_path_factory.mktemp("cli")
    runner = Cli(
        address=env.client.service_client.config.target_host,
        task_queue=f"cli-{uuid.uuid4().hex[:8]}",
        store_path=folder / "store.db",
    )
    worker = runner.start_worker(AGENTS, folder / "worker.log")
    yield runner
    stop(worker)
