"""Fixtures for the MCP tests: a record file, and the test server over streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.agents import SERVER


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """Where the test server writes what it received."""
    return tmp_path / "mcp-record.jsonl"


@pytest.fixture
def http_mcp(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The test server over streamable HTTP in a subprocess on a free port: (url, record file)."""
    record = tmp_path / "mcp-http-record.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--record", str(record), "--http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "port=N" once the socket is bound
        assert line.startswith("port="), f"the HTTP test server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split('=')[1])}/mcp", record
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
