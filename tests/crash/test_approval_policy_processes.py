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
from durable_agents.checkpoint import FinishReason, SqliteStore
from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for
from durable_agents.checkpoint.stores.postgres import PostgresStore
from durable_agents.devserver import DevServer, free_port
from durable_agents.testing import WorkerProcess
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


def _worker(address: str, store_url: str, queue: str, folder: Path, name: str) -> WorkerProcess:
    return WorkerProcess(
        [AGENTS],
        address=address,
        store_url=store_url,
        task_queue=queue,
        log_dir=folder / name,
        cwd=ROOT,
        env={"POLICY_TOOL_LOG": str(folder / "paid.jsonl")},
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
