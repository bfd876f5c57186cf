"""The `durable-agents` command: real worker and client processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from durable_agents.client import RunResult
from tests.conftest import session_id

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "durable_agents.cli"]


def _cli(*args: str, env_extra: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env_extra or {})})


@pytest.fixture
def cli_worker(env, task_queue, tmp_path):
    """A `durable-agents worker` process for the test agents; yields the common CLI flags."""
    address = env.client.service_client.config.target_host
    flags = ["--address", address, "--task-queue", task_queue, "--store", f"sqlite:///{tmp_path}/cli.db"]
    proc = subprocess.Popen([*CLI, *flags, "worker", "--agent", "tests.agents:weather_agent",
                             "--agent", "tests.agents:looping_agent"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert "worker for booker, looper" in proc.stdout.readline()
    yield flags
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def test_run_prints_the_conversation(cli_worker):
    sid = session_id()
    out = _cli(*cli_worker, "run", "booker", "Book a table for 2 tonight", "--session", sid)
    assert out.returncode == 0, out.stderr
    assert "get_weather" in out.stdout and "book_table" in out.stdout
    assert f"session {sid}: stop, 3 steps, 3 tool calls" in out.stdout


def test_run_json_parses_back_into_the_result_model(cli_worker):
    sid = session_id()
    out = _cli(*cli_worker, "run", "tests.agents:looping_agent", "loop", "--session", sid, "--json")
    assert out.returncode == 0, out.stderr
    result = RunResult.model_validate_json(out.stdout)
    assert result.finish_reason == "max-steps" and result.steps == 4
    assert '"finishReason"' in out.stdout  # the documented camelCase format


@pytest.mark.parametrize("args, needle", [
    (["run"], "the following arguments are required: agent"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["--store", "redis://x", "run", "booker", "hi"], "unknown store URL 'redis://x'"),
    (["worker", "--agent", "no_such_module:agent"], "cannot import 'no_such_module'"),
    (["worker", "--agent", "tests.agents"], "write it as module:attribute"),
])
def test_wrong_usage_is_one_clear_line_and_exit_2(args, needle):
    out = _cli(*args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert len(out.stderr.strip().splitlines()[-1]) > 0
    assert "Traceback" not in out.stderr


def test_unreachable_temporal_is_one_clear_line():
    out = _cli("--address", "127.0.0.1:1", "run", "booker", "hi", timeout=60)
    assert out.returncode == 2
    assert "cannot reach Temporal at 127.0.0.1:1" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    started = time.monotonic()
    out = _cli("demo", env_extra={"DURABLE_AGENTS_DEMO_DIR": str(tmp_path / "demo")}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 model turns, 3 tool calls" in out.stdout
    assert "killed with SIGKILL mid-tool" in out.stdout
    assert "emails sent: 1" in out.stdout  # the safe-to-retry tool re-ran, its effect happened once
    assert "http://127.0.0.1:" in out.stdout and "Stopped the server and the worker." in out.stdout
    print(f"demo took {time.monotonic() - started:.1f}s")
