"""Webhooks: signed, retried with backoff until the receiver takes them, each with a stable id,
and delivered from what the store records: a worker SIGKILLed right after the pause, or a
notifier that stops before delivering, still gets the event out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.testing import WorkflowEnvironment

from durable_agents.checkpoint import SqliteStore
from durable_agents.client import AgentClient
from durable_agents.testing import WorkerProcess
from durable_agents.web.webhooks import Webhook, WebhookNotifier, verify
from tests.web.conftest import Served

pytestmark = pytest.mark.integration

SECRET = "s3cret-for-the-tests-only"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Receiver:
    url: str
    failures_left: dict[str, int] = field(default_factory=dict)
    """Per event id: how many more deliveries to answer with 500."""
    down: bool = False
    delay: float = 0.0
    """Seconds between taking a delivery (in ``seen``) and answering it."""
    seen: list[tuple[str, int, bool, dict]] = field(default_factory=list)
    """(event id, status answered, signature valid, event) of every delivery."""

    def answered(self, event_id: str) -> list[int]:
        return [status for i, status, _, _ in self.seen if i == event_id]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got = Receiver("")

    async def hook(request: Request) -> Response:
        body = await request.body()
        event = json.loads(body)
        valid = verify(SECRET, {k.lower(): v for k, v in request.headers.items()}, body)
        status = 200
        if got.down or got.failures_left.get(event["id"], 0) > 0:
            got.failures_left[event["id"]] = got.failures_left.get(event["id"], 0) - 1
            status = 500
        got.seen.append((request.headers["webhook-id"], status, valid, event))
        await asyncio.sleep(got.delay)
        return Response(status_code=status)

    server = uvicorn.Server(
        uvicorn.Config(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), port=0, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    got.url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/hook"
    try:
        yield got
    finally:
        server.should_exit = True
        await serving


def notifier(store, receiver: Receiver, state: Path) -> WebhookNotifier:
    return WebhookNotifier(
        store, [Webhook(receiver.url, SECRET)], state, poll_seconds=0.1, base_delay=0.05, max_delay=0.2
    )


async def until(condition, what: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)
    assert condition(), what


async def test_a_receiver_that_fails_twice_gets_the_event_on_the_third_try(
    served: Served, receiver: Receiver, tmp_path: Path
):
    sid = await served.waiting(prefix="hook")
    event_id = f"approval-requested:{served.store.load_header(sid).approval_id}"
    receiver.failures_left[event_id] = 2
    async with notifier(served.store, receiver, tmp_path / "state.json").running():
        await until(lambda: 200 in receiver.answered(event_id), "the event delivered")
        await served.client.approve(sid, decided_by="alice")
        await until(lambda: [e for e in receiver.seen if _finished(e[3], sid)], "run.finished")
    assert receiver.answered(event_id) == [500, 500, 200]
    deliveries = [e for e in receiver.seen if e[0] == event_id]
    assert all(valid for _, _, valid, _ in deliveries)  # signed, and the signature checks out
    assert len({json.dumps(e[3], sort_keys=True) for e in deliveries}) == 1  # the same event each time
    assert deliveries[0][3]["data"] == {
        "sessionId": sid, "agent": "web-payer", "step": 1, "approvalId": event_id.split(":", 1)[1]
    }  # fmt: skip


def _finished(event: dict, sid: str) -> bool:
    return (
        event["type"] == "run.finished"
        and event["data"]["sessionId"] == sid
        and event["data"]["finishReason"] == "stop"
    )


async def test_a_notifier_stopped_before_delivering_delivers_after_a_restart_once(
    served: Served, receiver: Receiver, tmp_path: Path
):
    sid = await served.waiting(prefix="hook-restart")
    event_id = f"approval-requested:{served.store.load_header(sid).approval_id}"
    state = tmp_path / "state.json"
    receiver.down = True
    async with notifier(served.store, receiver, state).running():
        await until(lambda: receiver.answered(event_id), "a first attempt")
    # the first notifier is gone (as if its process died: what it had read is in its file)
    receiver.down = False
    receiver.delay = 0.5  # the second stops while its delivery is taken and not yet answered:
    second = notifier(served.store, receiver, state)  # it finishes that one before it stops
    async with second.running():
        await until(lambda: 200 in receiver.answered(event_id), "the event delivered by the second notifier")
    second.scan()  # read again, and deliver what is due: the delivered event is not sent again
    async with httpx.AsyncClient() as http:
        await second.deliver_due(http)
    assert receiver.answered(event_id)[-1] == 200 and receiver.answered(event_id).count(200) == 1


async def test_a_worker_killed_right_after_the_pause_still_gets_the_approval_out(
    env: WorkflowEnvironment, receiver: Receiver, tmp_path: Path
):
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    task_queue = f"tq-hook-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        ["tests.web.agents:payer"],
        address=env.client.service_client.config.target_host,
        store_url=store_url,
        task_queue=task_queue,
        log_dir=tmp_path / "logs",
        cwd=ROOT,
    )
    store = SqliteStore(tmp_path / "store.db")
    sid = f"hook-kill-{uuid.uuid4().hex[:8]}"
    try:
        await worker.start_ready(env.client)
        client = AgentClient(env.client, store, task_queue)
        result = await client.send("web-payer", "Pay ACME 42.00", session_id=sid)
        assert result.finish_reason == "awaiting-approval"
        worker.kill()  # SIGKILL: nothing of the worker's runs on
        await worker.wait_exit()
        event_id = f"approval-requested:{result.approval_id}"
        async with notifier(store, receiver, tmp_path / "state.json").running():
            await until(lambda: 200 in receiver.answered(event_id), "the approval's event")
    finally:
        worker.stop()
        with contextlib.suppress(Exception):
            await env.client.get_workflow_handle(sid).terminate(reason="test clean-up")
        store.close()
    assert receiver.answered(event_id) == [200]


async def test_the_example_receiver_checks_signatures_and_tells_each_event_once(served: Served, tmp_path: Path):
    script = ROOT / "examples" / "webhook_receiver" / "receiver.py"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), "--port", "0", "--seen-db", str(tmp_path / "seen.db"),
        env={**os.environ, "WEBHOOK_SECRET": SECRET}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        url = first.split("listening on ", 1)[1].strip()
        sid = await served.waiting(prefix="hook-example")
        approval = served.store.load_header(sid).approval_id
        # two senders with their own state deliver the same event: the receiver tells it once
        for state in ("one.json", "two.json"):
            sender = WebhookNotifier(
                served.store, [Webhook(url, SECRET, frozenset({"approval.requested"}))], tmp_path / state
            )
            sender.scan()
            async with httpx.AsyncClient() as http:
                await sender.deliver_due(http)
            assert not [e for e in sender._state["outbox"] if approval in e["key"]], "not delivered"
        async with httpx.AsyncClient() as http:
            forged = await http.post(
                url, content=b"{}", headers={"Webhook-Timestamp": "1", "Webhook-Signature": "v1=00"}
            )
        assert forged.status_code == 401
    finally:
        proc.terminate()
        out, _ = await proc.communicate()
    told = [line for line in out.decode().splitlines() if approval in line]
    assert told == [f"approval.requested: web-payer / session {sid} waits for a decision (approval {approval})"]
