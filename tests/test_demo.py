"""`durable-agents demo` end to end: a real server, worker processes, a SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "durable_agents.cli", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DURABLE_AGENTS_DEMO_DIR": str(tmp_path / "demo")},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "awaiting-approval after 2 model turns, 3 tool calls" in text  # the booking paused
    assert "Booked a table for 2 at Da Enzo in Rome" in text  # and ran once approved
    assert "killed with SIGKILL mid-tool" in text
    assert "emails sent: 1" in text  # the safe-to-retry tool re-ran; its effect happened once
    assert "Rain everywhere tonight: I did not book." in text  # the fork took the other path
    assert "diverged at step 1, 5 vs 2 steps" in text
    assert "/namespaces/default/workflows/demo-" in text and "Stopped the server and the worker." in text
