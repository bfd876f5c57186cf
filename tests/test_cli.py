"""The `durable-agents` command: usage errors as real processes.

Every command is tested in tests/cli/ (one shared worker process); the demo in tests/test_demo.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "durable_agents.cli"]


def _cli(*args: str, env_extra: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env_extra or {})},
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run"], "the following arguments are required: agent"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["--store", "redis://x", "run", "booker", "hi"], "unknown store URL 'redis://x'"),
        (["worker", "--agent", "no_such_module:agent"], "cannot import 'no_such_module'"),
        (["worker", "--agent", "tests.agents"], "write it as module:attribute"),
    ],
)
def test_wrong_usage_is_one_clear_line_and_exit_2(args, needle):
    out = _cli(*args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_unreachable_temporal_is_one_clear_line():
    out = _cli("--address", "127.0.0.1:1", "run", "booker", "hi", timeout=60)
    assert out.returncode == 2
    assert "cannot reach Temporal at 127.0.0.1:1" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
