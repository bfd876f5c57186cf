"""`durable-agents demo` end to end as a user runs it after `pip install`: from the installed
wheel (tests/installed_wheel.py), in a folder of their own; a real server, worker processes,
a SIGKILL. Then `durable-agents replay` from the same install over the sessions it left."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_the_installed_demo_runs_end_to_end_and_its_sessions_replay(installed, env, tmp_path):
    demo = tmp_path / "demo"
    out = subprocess.run(
        [str(installed.cli), "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=installed.env(DURABLE_AGENTS_DEMO_DIR=str(demo)),
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

    # the demo's two sessions (the booking and its fork) replayed against the same agent,
    # from the installed package, on a Temporal server of the test's
    replay = subprocess.run(
        [
            str(installed.cli),
            "--address",
            env.client.service_client.config.target_host,
            "--store",
            f"sqlite:///{demo / 'store.db'}",
            "replay",
            "--agent",
            "booker",
            "--against",
            "durable_agents.examples.booker:booker",
            "--max-changed",
            "0",
            "--json",
            "-",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=installed.env(),
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    report = json.loads(replay.stdout)
    assert (report["total"], report["identical"], report["failed"]) == (2, 2, 0), report
