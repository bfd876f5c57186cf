"""`durable-agents demo` and its UI links: they die with the demo unless --keep-running, which keeps
server and worker up until Ctrl-C; the demo's last lines say which."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
DEMO = [sys.executable, "-m", "durable_agents.cli", "demo"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "DURABLE_AGENTS_DEMO_DIR": str(tmp_path / "demo")}


def _line(stream) -> str:
    """One line, read byte by byte from the pipe's file descriptor (nothing read ahead of ``select``)."""
    data = b""
    while not data.endswith(b"\n"):
        byte = os.read(stream.fileno(), 1)
        if not byte:
            break
        data += byte
    return data.decode()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_demo_says_its_links_stop_with_it_and_how_to_keep_them(tmp_path):
    out = subprocess.run(DEMO, cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("Stopped the server and the worker"), last
    assert "links above no longer answer" in last and "durable-agents demo --keep-running" in last, last


def test_demo_keep_running_keeps_the_links_alive_until_ctrl_c(tmp_path):
    proc = subprocess.Popen(
        [*DEMO, "--keep-running"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(tmp_path)
    )
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 300
        while not seen or "Ctrl-C" not in seen[-1]:  # unbuffered: what the demo flushed, line by line
            ready, _, _ = select.select([proc.stdout], [], [], max(0, deadline - time.monotonic()))
            assert ready and proc.poll() is None, "".join(seen)
            seen.append(_line(proc.stdout))
        text = "".join(seen)
        assert "keep running" in seen[-1] and "the links work" in seen[-1], seen[-1]
        link = re.search(r"In the Temporal UI: (http://\S+?)/namespaces/default/workflows/(demo-\S+) ", text)
        assert link, text
        ui = link.group(1)
        time.sleep(2)
        assert proc.poll() is None  # still up after the demo
        assert _answers(ui)
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[0].decode()
        assert proc.returncode == 0, rest
        assert rest.strip().splitlines()[-1] == "Stopped the server and the worker.", rest
        assert not _answers(ui)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
