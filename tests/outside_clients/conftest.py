"""Outside clients: an agent run driven from Temporal clients this project did not write
(the ``temporal`` CLI, a plain ``temporalio`` client, ``@temporalio/client`` for Node,
the Temporal UI in Chromium), against the wire contract of ``AgentRun``.

One in-process worker (``tests.outside_clients.agents.payer``, its own SQLite store and
task queue) serves every test of a module. Every wait is bounded; a run that stays
Running is terminated at the module's end. The diagnostics (``diagnose``) read the
run's history with the session's client: they explain a failure, they are not what a
test asserts on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agents import build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.devserver import find_temporal_binary
from tests.outside_clients.agents import AGENT_NAME, payer

NAMESPACE = "default"
USER_TEXT = "Charge ACME Ltd 42.00 for the order."


def new_session_id(prefix: str = "oc") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run_input(session_id: str, *, snake_case: bool = False) -> dict[str, Any]:
    """The AgentRun input a user writes by hand (camelCase keys, as on the wire)."""
    key = "session_id" if snake_case else "sessionId"
    return {key: session_id, "agent": AGENT_NAME, "input": [{"role": "user", "content": USER_TEXT}]}


@dataclass
class Outside:
    """The module's worker: the server's address, its task queue, the runs started."""

    client: Client
    """The session's client (our data converter): for diagnostics and clean-up only."""
    address: str
    task_queue: str
    started: list[str] = field(default_factory=list)

    def session(self, prefix: str = "oc") -> str:
        sid = new_session_id(prefix)
        self.started.append(sid)
        return sid

    async def diagnose(self, workflow_id: str) -> str:
        return await diagnose(self.client, workflow_id)


@pytest.fixture(scope="module")
async def outside(env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Outside]:
    store = SqliteStore(tmp_path_factory.mktemp("outside") / "store.db")
    task_queue = f"tq-outside-{uuid.uuid4().hex[:10]}"
    ours = Outside(env.client, env.client.service_client.config.target_host, task_queue)
    try:
        async with build_worker(env.client, agents=[payer], store=store, task_queue=task_queue):
            try:
                yield ours
            finally:
                await terminate_running(env.client, ours.started)
    finally:
        store.close()


async def terminate_running(client: Client, workflow_ids: list[str]) -> None:
    """Leave no run of ours Running (a wedged one would retry its task for ever)."""
    for wid in workflow_ids:
        handle = client.get_workflow_handle(wid)
        try:
            desc = await asyncio.wait_for(handle.describe(), 10)
            if desc.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
                await asyncio.wait_for(handle.terminate(reason="outside-client test clean-up"), 10)
        except Exception:  # never started, or already gone: nothing to clean
            pass


async def workflow_task_failures(client: Client, workflow_id: str) -> list[str]:
    """The messages of the run's failed workflow tasks (a signal or input that wedges it)."""
    failures = []
    try:
        history = await asyncio.wait_for(client.get_workflow_handle(workflow_id).fetch_history(), 10)
    except Exception as e:  # a diagnostic: say why it is missing
        return [f"(history unreadable: {e})"]
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failure = event.workflow_task_failed_event_attributes.failure
            message = failure.message
            if failure.HasField("cause") and failure.cause.message:
                message += f" (cause: {failure.cause.message})"
            failures.append(message)
    return failures


async def diagnose(client: Client, workflow_id: str) -> str:
    """One paragraph on where the run stands: status, a failing workflow task, its details."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        desc = await asyncio.wait_for(handle.describe(), 10)
    except Exception as e:  # a diagnostic: say why it is missing
        return f"[{workflow_id}: describe failed: {e}]"
    status = WorkflowExecutionStatus.Name(desc.raw_description.workflow_execution_info.status)
    parts = [f"{workflow_id}: {status}"]
    task = desc.raw_description.pending_workflow_task
    if task.attempt > 1:
        parts.append(f"its workflow task is failing (attempt {task.attempt}): the run is WEDGED")
    failures = await workflow_task_failures(client, workflow_id)
    if failures:
        parts.append(f"workflow task failed: {failures[-1][:600]!r}")
    return "[" + "; ".join(parts) + "]"


# -- the `temporal` CLI ------------------------------------------------------------------------


@dataclass
class Ran:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"`temporal {' '.join(self.args)}` printed no JSON: {self}", pytrace=False)

    def __str__(self) -> str:
        return f"exit {self.returncode}, stdout {self.stdout.strip()[-1500:]!r}, stderr {self.stderr.strip()[-1500:]!r}"


def _cli_env() -> dict[str, str]:
    """The CLI's environment without a user's TEMPORAL_* settings (address, API key, TLS,
    profile): the flags below say where to go."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}


async def temporal(address: str, *args: str, timeout: float = 10.0) -> Ran:
    """``temporal <args> --address … --namespace default`` in a process of its own (the
    event loop stays free for the in-process worker), bounded by ``timeout`` seconds."""
    cmd = [
        str(find_temporal_binary()),
        *args,
        "--address",
        address,
        "--namespace",
        NAMESPACE,
        "--command-timeout",
        f"{timeout:g}s",
        "--color",
        "never",
    ]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_cli_env()
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout + 15)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"`temporal {' '.join(args)}` did not end within {timeout + 15:g} s", pytrace=False)
    return Ran(list(args), proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


NULL_PAYLOAD = {"metadata": {"encoding": base64.b64encode(b"binary/null").decode()}}
"""How ``temporal … -o json`` prints a None (a ``binary/null`` payload is not JSON: the CLI
prints the raw payload, ``{"metadata": {"encoding": "YmluYXJ5L251bGw="}}``)."""


def query_result(ran: Ran) -> Any:
    """The value of ``temporal workflow query -o json`` (``{"queryResult": [value]}``)."""
    printed = ran.json()
    values = printed.get("queryResult") if isinstance(printed, dict) else None
    if not values or values[0] == NULL_PAYLOAD:
        return None
    return values[0]
