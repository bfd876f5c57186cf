"""``durable-agents web-token`` and ``durable-agents web`` as a person runs them (real processes)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "durable_agents.cli"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


async def test_a_token_made_on_the_command_line_signs_in_to_the_served_api(env: WorkflowEnvironment, tmp_path: Path):
    made = cli("web-token", "add", "alice", "--role", "approver", "--tool", "pay", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("da_") and "shown only now" in made.stderr
    listed = cli("web-token", "list", cwd=tmp_path)
    assert "alice\tapprover tools=pay" in listed.stdout and token not in listed.stdout

    refused = cli("web", "--host", "0.0.0.0", "--anonymous", "viewer", cwd=tmp_path)
    assert refused.returncode == 2 and "loopback" in refused.stderr

    address = env.client.service_client.config.target_host
    proc = await asyncio.create_subprocess_exec(
        *CLI, "--address", address, "web", "--port", "0", cwd=tmp_path, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stderr is not None
        line = ""
        while "serving on" not in line:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "the server ended before serving"
        url = line.split("serving on ", 1)[1].split()[0]
        async with httpx.AsyncClient(base_url=url) as http:
            me = (await http.get("api/me", headers={"Authorization": f"Bearer {token}"})).json()
            assert me == {"name": "alice", "roles": ["approver"], "agents": None, "tools": ["pay"], "via": "token"}
            assert (await http.get("api/me")).status_code == 401
            page = await http.get("")
            assert page.status_code == 200 and "inbox.js" in page.text
            approvals = await http.get("api/approvals", headers={"Authorization": f"Bearer {token}"})
            assert approvals.status_code == 200 and approvals.json()["total"] == 0
        assert cli("web-token", "revoke", "alice", cwd=tmp_path).returncode == 0
        async with httpx.AsyncClient(base_url=url) as http:  # the file is read again: the token no longer works
            assert (await http.get("api/me", headers={"Authorization": f"Bearer {token}"})).status_code == 401
    finally:
        proc.terminate()
        await proc.wait()
