"""`durable-agents server`: a SIGTERM stops the Temporal server it started (no orphan)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest

from durable_agents.devserver import free_port
from tests.cli.conftest import CLI, ROOT

pytestmark = pytest.mark.integration


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_stops_the_embedded_server(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "server", "--headless", "--port", str(port), "--db-file", str(tmp_path / "t.db")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout.readline().startswith(f"Temporal dev server at 127.0.0.1:{port}")
        assert _listening(port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while _listening(port):  # the temporal child went with it
            assert time.monotonic() < deadline, f"port {port} still served after the command ended"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
