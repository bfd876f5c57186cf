"""Approval policies with real processes (issue 42): two worker processes on one task queue
see a policy change at once (SQLite and PostgreSQL stores), and a grant's expiry holds across
a worker SIGKILL and a Temporal server restart. Policies and grants are written to the policy
book beside the store, as any process would."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from durable_agents import AgentClient, connect
from durable_agents.activities.approval_policy import DECIDE_BY_POLICY
from durable_agents.checkpoint import FinishReason, SqliteStore
from durable_agents.checkpoint.approval_grants import Grant, GrantScope
from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for
from durable_agents.checkpoint.stores.postgres import PostgresStore
from durable_agents.devserver import DevServer, free_port
from durable_agents.testing import CrashWindow, WorkerProcess
from tests.conftest import session_id

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "tests.policy_agents:ALL"
DENY_ALL = {"deny": [{"name": "payments frozen", "tools": ["pay"]}]}
ALLOW_SMALL = {
    "allow": [
        {"name": "small payments", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}
    ]
}


def _worker(
    address: str, store_url: str, queue: str, folder: Path, name: str, crash_window: CrashWindow | None = None
) -> WorkerProcess:
    return WorkerProcess(
        [AGENTS],
        address=address,
        store_url=store_url,
        task_queue=queue,
        log_dir=folder / name,
        cwd=ROOT,
        env={"POLICY_TOOL_LOG": str(folder / "paid.jsonl")},
        crash_window=crash_window,
    )


def _paid(folder: Path) -> list[dict]:
    path = folder / "paid.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request, tmp_path):
    """(store, its URL) that both workers and the test open."""
    if request.param == "sqlite":
        store = SqliteStore(tmp_path / "store.db")
        yield store, f"sqlite:///{tmp_path / 'store.db'}"
    else:
        base = request.getfixturevalue("postgres_url")
        store = PostgresStore(base)
        yield store, base
    store.close()


async def test_two_workers_decide_the_next_gated_call_under_a_changed_policy(env, tmp_path, shared_store):
    store, url = shared_store
    queue = f"policy-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    workers = [_worker(address, url, queue, tmp_path, name) for name in ("a", "b")]
    agent = "payer"
    book = policy_book_for(store)
    scope = PolicyScope.of_agent(agent)
    try:
        for worker in workers:
            await worker.start_ready(env.client)
        client = AgentClient(env.client, store, queue)
        sessions = [session_id() for _ in range(10)]
        frozen = book.set_policy(scope, DENY_ALL, by="ops", now=datetime.now(UTC))
        first = await asyncio.gather(*(client.send(agent, "100", session_id=sid) for sid in sessions))
        assert all(r.finish_reason == FinishReason.STOP for r in first)
        allowed = book.set_policy(scope, ALLOW_SMALL, by="ops", now=datetime.now(UTC))
        second = await asyncio.gather(*(client.send(agent, "200", session_id=sid) for sid in sessions))
        assert all(r.finish_reason == FinishReason.STOP for r in second)
        for sid in sessions:
            decisions = store.load(sid).decisions
            assert [(d.source, d.approved, d.policy_version) for d in decisions] == [
                ("deny-rule", False, frozen.version),
                ("allow-rule", True, allowed.version),
            ], sid
        paid = [p for p in _paid(tmp_path) if p["session"] in sessions]
        assert sorted(p["session"] for p in paid) == sorted(sessions)  # each approved call ran once
        assert all(p["amount_cents"] == 200 for p in paid)
        assert {p["pid"] for p in paid} == {w.pid for w in workers}  # both workers took part
    finally:
        for worker in workers:
            worker.stop()


async def test_a_grants_expiry_holds_across_a_worker_sigkill_and_a_server_restart(tmp_path):
    server = DevServer(port=free_port(), ui=False, db_file=tmp_path / "temporal.db", log_file=tmp_path / "temporal.log")
    await server.start_async()
    queue = f"policy-expiry-{uuid.uuid4().hex[:8]}"
    store = SqliteStore(tmp_path / "store.db")
    worker = _worker(server.address, f"sqlite:///{tmp_path / 'store.db'}", queue, tmp_path, "w")
    try:
        temporal = await connect(server.address)
        await worker.start_ready(temporal)
        client = AgentClient(temporal, store, queue)
        sid = session_id()
        paused = await client.send("payer", "100 200", session_id=sid)
        grant = {"scope": "agent", "expiresInSeconds": 6}
        await temporal.get_workflow_handle(sid).execute_update(
            "decide", {"approvalId": paused.approval_id, "approved": True, "decidedBy": "gina", "grant": grant}
        )
        done = await client.result(sid)  # 200: approved by the grant while it was live
        assert done.finish_reason == FinishReason.STOP
        made = policy_book_for(store).get_grant(f"grant-{paused.approval_id}")
        assert made is not None and made.expires_at is not None
        assert [d.source for d in store.load(sid).decisions] == ["person", "grant"]

        worker.kill()
        assert await worker.wait_exit(timeout=30) == -signal.SIGKILL
        await asyncio.to_thread(server.stop)  # its SQLite file is kept
        while datetime.now(UTC) <= made.expires_at:  # the stored expiry passes while nothing runs
            await asyncio.sleep(0.2)
        await server.start_async()
        temporal = await connect(server.address)
        await worker.start_ready(temporal)
        client = AgentClient(temporal, store, queue)

        other = session_id()
        again = await client.send("payer", "300", session_id=other)
        assert again.finish_reason == FinishReason.AWAITING_APPROVAL  # expired: a person decides
        await client.reject(other, again.approval_id, decided_by="gina")
        assert [d.source for d in store.load(other).decisions] == ["person"]
        assert sorted(p["amount_cents"] for p in _paid(tmp_path)) == [100, 200]
    finally:
        worker.stop()
        await asyncio.to_thread(server.stop)
        store.close()


@pytest.mark.parametrize("agent", ["payer", "payer-local"])
async def test_a_call_approved_in_its_model_turn_survives_a_worker_sigkill_with_one_decision_and_one_use(
    env, tmp_path, agent
):
    """The policy approves a gated call in the model activity that stored the turn (its grant
    used, its decision recorded, no activity of its own); the worker is SIGKILLed right after
    the payment, before its result is recorded. A fresh worker finishes the run: the decision
    is the one recorded (not made again), the grant was used once, and the payment is not
    made a second time."""
    queue = f"policy-in-turn-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    store = SqliteStore(tmp_path / "store.db")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    book = policy_book_for(store)
    book.add_grant(
        Grant(id="twice", scope=GrantScope(kind="tool", tool="pay"), created_by="ops", created_at=datetime.now(UTC),
              max_uses=2)
    )  # fmt: skip
    armed = _worker(address, url, queue, tmp_path, "armed", CrashWindow.AFTER_TOOL_BEFORE_RECORD)
    fresh = _worker(address, url, queue, tmp_path, "fresh")
    try:
        await armed.start_ready(env.client)
        client = AgentClient(env.client, store, queue)
        sid = session_id()
        handle = await client.start(agent, "100", session_id=sid)
        assert await armed.wait_exit(timeout=60) == -signal.SIGKILL, armed.log()[-2000:]
        assert [p["amount_cents"] for p in _paid(tmp_path)] == [100]  # paid, its result not recorded
        [decided] = store.load(sid).decisions  # recorded before the payment
        assert (decided.source, decided.grant_id, decided.approved) == ("grant", "twice", True)
        await fresh.start_ready(env.client)
        done = await asyncio.wait_for(handle.result(), timeout=120)
        assert done.finish_reason == FinishReason.STOP
        [again] = store.load(sid).decisions
        assert again == decided  # the decision recorded, not a second one
        grant = book.get_grant("twice")
        assert grant is not None and grant.uses == 1  # one use, whatever the retries
        assert [p["amount_cents"] for p in _paid(tmp_path)] == [100]  # not paid twice
        assert DECIDE_BY_POLICY not in await _activity_types(env.client, sid)  # decided in the model turn
    finally:
        armed.stop()
        fresh.stop()
        store.close()


async def _activity_types(client, workflow_id: str) -> set[str]:
    """The activity types a run scheduled, regular and local (a local one's marker names it)."""
    found: set[str] = set()
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            found.add(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.marker_recorded_event_attributes.marker_name == "core_local_activity":
            data = event.marker_recorded_event_attributes.details["data"].payloads[0].data
            found.add(json.loads(data)["activity_type"])
    return found
