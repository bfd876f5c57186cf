"""Webhooks: signed, retried with backoff until the receiver takes them, each with a stable id,
and delivered from what the store records: a worker SIGKILLed right after the pause, or a
notifier that stops before delivering, still gets the event out. A webhook's first start
tells what happens from then on, not the store's past (unless asked for a backlog); a
restart goes on from its state file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
CLI = [sys.executable, "-m", "durable_agents.cli"]


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
    queries: list[tuple[str, str]] = field(default_factory=list)
    """(event id, the URL's query string) of every delivery: which webhook it was sent to."""

    def answered(self, event_id: str) -> list[int]:
        return [status for i, status, _, _ in self.seen if i == event_id]

    def told(self, sid: str, query: str | None = None) -> list[str]:
        """The types of the events about session ``sid`` (sent to the webhook with ``query``) taken."""
        ids = {i for i, q in self.queries if query is None or q == query}
        return [
            e["type"] for i, status, _, e in self.seen if status == 200 and i in ids and e["data"]["sessionId"] == sid
        ]


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
        got.queries.append((request.headers["webhook-id"], request.url.query))
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


def notifier(store, receiver: Receiver, state: Path, *urls: str, **options) -> WebhookNotifier:
    hooks = [Webhook(url, SECRET) for url in urls or [receiver.url]]
    return WebhookNotifier(store, hooks, state, poll_seconds=0.1, base_delay=0.05, max_delay=0.2, **options)


def started(notifier: WebhookNotifier) -> WebhookNotifier:
    """The notifier after its first read of the store (a webhook's first start: from now on)."""
    notifier.scan()
    return notifier


async def until(condition, what: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)
    assert condition(), what


async def test_a_receiver_that_fails_twice_gets_the_event_on_the_third_try(
    served: Served, receiver: Receiver, tmp_path: Path
):
    sender = started(notifier(served.store, receiver, tmp_path / "state.json"))
    sid = await served.waiting(prefix="hook")
    event_id = f"approval-requested:{served.store.load_header(sid).approval_id}"
    receiver.failures_left[event_id] = 2
    async with sender.running():
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
    state = tmp_path / "state.json"
    first = started(notifier(served.store, receiver, state))
    sid = await served.waiting(prefix="hook-restart")
    event_id = f"approval-requested:{served.store.load_header(sid).approval_id}"
    receiver.down = True
    async with first.running():
        await until(lambda: receiver.answered(event_id), "a first attempt")
    # the first notifier is gone (as if its process died: what it had read is in its file)
    while_down = await served.waiting(prefix="hook-while-down")  # saved while no notifier ran
    receiver.down = False
    receiver.delay = 0.5  # the second stops while its delivery is taken and not yet answered:
    second = notifier(served.store, receiver, state)  # it finishes that one before it stops
    async with second.running():
        await until(lambda: 200 in receiver.answered(event_id), "the event delivered by the second notifier")
        await until(lambda: receiver.told(while_down), "the event saved while no notifier ran")
    second.scan()  # read again, and deliver what is due: the delivered event is not sent again
    async with httpx.AsyncClient() as http:
        await second.deliver_due(http)
    assert receiver.answered(event_id)[-1] == 200 and receiver.answered(event_id).count(200) == 1
    assert receiver.told(while_down) == ["approval.requested"]


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
        sender = started(notifier(store, receiver, tmp_path / "state.json"))
        client = AgentClient(env.client, store, task_queue)
        result = await client.send("web-payer", "Pay ACME 42.00", session_id=sid)
        assert result.finish_reason == "awaiting-approval"
        worker.kill()  # SIGKILL: nothing of the worker's runs on
        await worker.wait_exit()
        event_id = f"approval-requested:{result.approval_id}"
        async with sender.running():
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
                served.store, [Webhook(url, SECRET, frozenset({"approval.requested"}))], tmp_path / state, since="all"
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


async def test_a_first_start_tells_what_happens_from_then_on_unless_asked_for_a_backlog(
    served: Served, receiver: Receiver, tmp_path: Path
):
    old = await served.waiting(prefix="hook-old")  # in the store before any notifier started
    async with notifier(served.store, receiver, tmp_path / "fresh.json").running() as fresh:
        await until(lambda: (tmp_path / "fresh.json").exists(), "the first read of the store")
        new = await served.waiting(prefix="hook-new")
        await until(lambda: receiver.told(new), "the new session's event")
    assert fresh.scan() == 0 and receiver.told(old) == []  # (in scan order, the old one came first)
    # asked for a backlog: every event the store holds, or those saved since a time
    for n, since in enumerate(["all", datetime.now(UTC) - timedelta(hours=1)], start=1):
        async with notifier(served.store, receiver, tmp_path / f"backlog-{n}.json", since=since).running():
            await until(lambda: len(receiver.told(old)) == n, f"the backlog since {since}")  # noqa: B023
    # a backlog from a time after the old session's save does not hold it
    later = started(notifier(served.store, receiver, tmp_path / "later.json", since=datetime.now(UTC)))
    assert not [e for e in later._state["outbox"] if e["event"]["data"]["sessionId"] == old]


async def test_a_webhook_added_later_starts_from_then_on_while_the_others_resume(
    served: Served, receiver: Receiver, tmp_path: Path
):
    state = tmp_path / "state.json"
    one, two = f"{receiver.url}?one", f"{receiver.url}?two"
    started(notifier(served.store, receiver, state, one))
    while_down = await served.waiting(prefix="hook-added")  # saved while no notifier ran
    both = started(notifier(served.store, receiver, state, one, two))
    async with both.running():
        await until(lambda: receiver.told(while_down, "one"), "the first webhook's event")
        new = await served.waiting(prefix="hook-both")
        await until(lambda: receiver.told(new, "one") and receiver.told(new, "two"), "both webhooks told")
    assert receiver.told(while_down, "two") == []  # saved before the second webhook's first start


async def test_the_web_command_explains_a_missing_secret_file(tmp_path: Path):
    missing = tmp_path / "nowhere" / "webhook.secret"
    done = await asyncio.to_thread(
        subprocess.run,
        [*CLI, "--address", "127.0.0.1:1", "--store", f"sqlite:///{tmp_path / 'store.db'}", "web",
         "--webhook", "http://127.0.0.1:9/hook", "--webhook-secret-file", str(missing)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    assert str(missing) in err and "secrets.token_urlsafe(32)" in err and "chmod 600" in err, err


async def test_the_web_command_starts_from_now_on_or_with_the_backlog_asked_for(
    env: WorkflowEnvironment, served: Served, receiver: Receiver, tmp_path: Path
):
    secret = tmp_path / "webhook.secret"
    secret.write_text(SECRET + "\n")
    old = await served.waiting(prefix="hook-cli-old")
    address = env.client.service_client.config.target_host

    async def web(state: Path, *more: str) -> tuple[asyncio.subprocess.Process, list[str]]:
        proc = await asyncio.create_subprocess_exec(
            *CLI, "web", "--port", "0", "--address", address, "--store", f"sqlite:///{served.store.path}",
            "--webhook", receiver.url, "--webhook-secret-file", str(secret), "--webhook-state", str(state), *more,
            cwd=tmp_path, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        said: list[str] = []
        while not said or "serving on" not in said[-1]:
            said.append((await asyncio.wait_for(proc.stderr.readline(), 30)).decode())
            assert said[-1], f"the server ended: {said}"
        await until(lambda: state.exists(), "the first read of the store")
        return proc, said

    proc, said = await web(tmp_path / "fresh.json")
    try:
        assert any("from now on" in line and "--webhook-since" in line for line in said), said
        new = await served.waiting(prefix="hook-cli-new")
        await until(lambda: receiver.told(new), "the new session's event")
    finally:
        proc.terminate()
        await proc.wait()
    assert receiver.told(old) == []
    proc, said = await web(tmp_path / "backlog.json", "--webhook-since", "all")
    try:
        await until(lambda: receiver.told(old), "the backlog's event")
    finally:
        proc.terminate()
        await proc.wait()
    # a restart on an existing state goes on from it: --webhook-since is for a first start only
    proc, said = await web(tmp_path / "fresh.json", "--webhook-since", "all")
    proc.terminate()
    await proc.wait()
    assert any("--webhook-since" in line and "fresh.json" in line for line in said), said


def test_a_state_file_of_the_first_version_goes_on_where_it_was(tmp_path: Path):
    """Before webhooks had a state each: one cursor, events known by the webhook's place on the
    command line. Each webhook given goes on from that cursor, with its outbox and delivered ids."""
    from durable_agents.checkpoint import SqliteStore

    state = tmp_path / "webhooks.json"
    cursor = "2026-12-01T10:00:00+00:00"
    queued = {"webhook": 0, "key": "0:approval-requested:ap-1", "event": {"id": "approval-requested:ap-1"},
              "attempts": 2, "due": 0}  # fmt: skip
    gone = {**queued, "webhook": 1, "key": "1:approval-requested:ap-1"}  # a second webhook, no longer given
    state.write_text(json.dumps({"cursor": cursor, "outbox": [queued, gone], "delivered": ["0:run-finished:x"]}))
    store = SqliteStore(tmp_path / "store.db")
    try:
        hook = Webhook("http://127.0.0.1:9/hook", SECRET)
        sender = WebhookNotifier(store, [hook], state, since="all")
        assert sender.new == []  # it has state: `since` is for a first start only
        sender.scan()
    finally:
        store.close()
    saved = json.loads(state.read_text())
    assert saved["hooks"] == {hook.id: {"cursor": "2026-12-01T09:55:00+00:00", "start": None}}  # the margin
    assert [(e["hook"], e["key"], e["attempts"]) for e in saved["outbox"]] == [
        (hook.id, f"{hook.id}:approval-requested:ap-1", 2)
    ]
    assert saved["delivered"] == [f"{hook.id}:run-finished:x"]
