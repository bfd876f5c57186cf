"""An agent run driven by Temporal's Node client (``@temporalio/client``, installed into
``.node-client/`` by ``scripts/ensure-node-client.sh``): ``node/agent_run.mjs`` starts
``AgentRun``, polls ``pending_approval``, signals ``approve``, awaits the result and
prints each step as a JSON line; this test asserts on what it printed.

Without ``node`` on PATH the test skips saying so, unless ``CI`` is set: then it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.outside_clients.agents import AGENT_NAME, AMOUNT_CENTS, FINAL_TEXT, RECIPIENT, charges_of
from tests.outside_clients.conftest import Outside, run_input

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ENSURE = ROOT / "scripts" / "ensure-node-client.sh"
SCRIPT = Path(__file__).resolve().parent / "node" / "agent_run.mjs"


@pytest.fixture(scope="module")
def node_client_dir() -> Path:
    """The folder holding @temporalio/client (installed when missing); a skip without node."""
    if not shutil.which("node") or not shutil.which("npm"):
        reason = "Node.js (node and npm) is not on PATH: the @temporalio/client test cannot run"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI is set: install Node.js >= 20.3 there", pytrace=False)
        pytest.skip(reason)
    done = subprocess.run(["bash", str(ENSURE)], capture_output=True, text=True, timeout=600)
    folder = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not folder:
        pytest.fail(
            f"{ENSURE} could not install @temporalio/client: {(done.stderr or done.stdout).strip()[-2000:]}",
            pytrace=False,
        )
    return Path(folder)


async def test_the_node_client_runs_an_agent_to_its_approval_and_end(node_client_dir: Path, outside: Outside):
    sid = outside.session("node")
    args = {
        "clientDir": str(node_client_dir),
        "address": outside.address,
        "namespace": "default",
        "taskQueue": outside.task_queue,
        "workflowId": sid,
        "input": run_input(sid),
        "timeoutMs": 15000,
    }
    proc = await asyncio.create_subprocess_exec(
        "node", str(SCRIPT), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:  # the script bounds its own waits (15 s each); this bounds the script
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(args).encode()), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"node {SCRIPT.name} did not end within 60 s; {await outside.diagnose(sid)}", pytrace=False)
    printed = out.decode(errors="replace")
    events = {}
    for line in printed.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        events[event.get("event")] = event
    ran = f"node {SCRIPT.name} exited {proc.returncode}: stdout {printed[-3000:]!r}, stderr {err.decode()[-2000:]!r}"
    if "error" in events:
        pytest.fail(f"{ran}; {await outside.diagnose(sid)}", pytrace=False)
    assert proc.returncode == 0 and "pending" in events and "result" in events, ran

    pending = events["pending"]["pending"]
    assert isinstance(pending, dict) and pending.get("toolName") == "charge_card", pending
    assert isinstance(pending.get("approvalId"), str) and pending["approvalId"], pending
    assert pending.get("sessionId") == sid and pending.get("agent") == AGENT_NAME, pending
    assert pending.get("arguments") == {"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}, (
        f"the pending approval Node read does not carry the call's arguments: {pending.get('arguments')!r}"
    )

    result = events["result"]["result"]
    assert isinstance(result, dict) and result.get("sessionId") == sid, result
    assert result.get("finishReason") == "stop", result
    assert result.get("text") == FINAL_TEXT, f"the result Node read carries no final text: {result}"
    assert charges_of(sid) == [{"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}], charges_of(sid)
