"""Waiting on a task queue no worker polls: the CLI says so after a few seconds (and keeps
waiting); `run --no-wait` starts a run and returns, or refuses when no worker would run it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
import uuid
from dataclasses import replace

import pytest

from durable_agents.checkpoint import SqliteStore
from tests.cli.conftest import Cli, one_line_error, session_id, stop

pytestmark = pytest.mark.integration

AGENTS = ["tests.agents:weather_agent"]


@pytest.fixture
def lonely(cli) -> Cli:
    """The shared CLI on a task queue of its own, which no worker polls (yet)."""
    return replace(cli, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")


def _line(stream) -> str:
    """One line, read byte by byte from the pipe's file descriptor (nothing read ahead of ``select``)."""
    data = b""
    while not data.endswith(b"\n"):
        byte = os.read(stream.fileno(), 1)
        if not byte:
            break
        data += byte
    return data.decode()


def _line_on_stderr(proc: subprocess.Popen, needle: str, timeout: float = 30) -> tuple[str, float]:
    """The first stderr line with ``needle``, and when it came (fails after ``timeout`` s of silence)."""
    started = time.monotonic()
    seen = []
    while True:
        left = timeout - (time.monotonic() - started)
        ready, _, _ = select.select([proc.stderr], [], [], max(left, 0))
        assert ready, f"nothing with {needle!r} on stderr after {timeout}s: {seen}"
        line = _line(proc.stderr)
        if needle in line:
            return line, time.monotonic() - started
        assert line, (seen, proc.poll())
        seen.append(line)


def test_run_with_no_worker_says_so_and_keeps_waiting(lonely, tmp_path):
    sid = session_id("lonely")
    proc = lonely.popen("run", "booker", "Book a table for 2", "--session", sid)
    worker = None
    try:
        line, after = _line_on_stderr(proc, "no worker is polling")
        assert line.startswith(f"durable-agents: no worker is polling task queue '{lonely.task_queue}'"), line
        assert "(start one with: durable-agents " in line and "worker --agent MODULE:ATTR" in line, line
        assert f"--task-queue {lonely.task_queue}" in line, line  # the command works as printed
        assert 3 < after < 25, after
        assert proc.poll() is None  # still waiting
        worker = lonely.start_worker(AGENTS, tmp_path / "worker.log")
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        assert f"session {sid}: stop, 3 steps" in stdout
    finally:
        if proc.poll() is None:
            proc.kill()
        if worker is not None:
            stop(worker)


def test_fork_of_a_known_session_with_no_worker_says_so_and_keeps_waiting(cli, lonely):
    sid = session_id("forkme")
    cli.ok("run", "booker", "Book a table for 2", "--session", sid)  # on the shared worker's queue
    proc = lonely.popen("fork", sid, "--from-step", "1")
    try:
        line, _ = _line_on_stderr(proc, "no worker is polling")
        assert f"task queue '{lonely.task_queue}'" in line
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "goes on in Temporal" in stderr, stderr
    finally:
        if proc.poll() is None:
            proc.kill()


def test_fork_of_an_unknown_session_with_no_worker_exits_2_at_once(lonely):
    started = time.monotonic()
    one_line_error(lonely("fork", "no-such-session", "--from-step", "1", timeout=60), 2, "no session 'no-such-session'")
    assert time.monotonic() - started < 30


def test_run_no_wait_starts_the_run_and_says_how_to_watch_it(cli):
    sid = session_id("nowait")
    started = time.monotonic()
    out = cli("run", "booker", "Book a table for 2", "--session", sid, "--no-wait")
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - started < 30
    assert f"started session {sid}" in out.stdout
    watch = next(line for line in out.stdout.splitlines() if "watch" in line)
    assert watch.strip().endswith(f"watch {sid}"), out.stdout
    watched = cli("watch", sid)
    assert watched.returncode == 0 and f"session {sid}: stop, 3 steps" in watched.stdout, watched.stderr


def test_run_no_wait_with_no_worker_exits_1_naming_the_queue_and_starts_nothing(lonely):
    sid = session_id("nowait")
    err = one_line_error(lonely("run", "booker", "hi", "--session", sid, "--no-wait"), 1, "no worker is polling")
    assert f"task queue '{lonely.task_queue}'" in err and "worker --agent MODULE:ATTR" in err
    store = SqliteStore(lonely.store_path)
    try:
        assert store.load_header(sid) is None
    finally:
        store.close()
    one_line_error(lonely.inproc("watch", sid), 2, f"no session '{sid}'")
