"""Managing approval policies and grants from Python (issue 42): ``AgentClient.set_policy`` goes
through the ``ApprovalPolicies`` workflow on a real worker, which checks the policy against the
agent's tools; reads, the audit and grants go to the policy book beside the store."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from durable_agents import Agent
from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.policy_book import policy_book_for
from durable_agents.client.policies import PolicyAdmin
from durable_agents.errors import ConfigurationError, PolicyVersionConflictError
from tests.outside_clients.agents import AGENT_NAME, payer

pytestmark = pytest.mark.integration

SMALL = {
    "allow": [{"name": "small", "tools": ["charge_card"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}]
}


async def test_set_read_clear_through_a_worker(run_worker, store: SqliteStore) -> None:
    async with run_worker([payer]) as client:
        stored = await client.set_policy(SMALL, agent=AGENT_NAME, by="alice", expected_version=0)
        assert stored.version == 1 and stored.changed_by == "alice"
        assert stored.policy is not None and stored.policy.allow[0].name == "small"
        # what the book holds is what another process reads
        assert policy_book_for(store).policy(stored.scope).version == 1
        assert client.policy(agent=AGENT_NAME).version == 1

        with pytest.raises(PolicyVersionConflictError) as conflict:
            await client.set_policy(SMALL, agent=AGENT_NAME, by="bob", expected_version=0)
        assert conflict.value.actual_version == 1 and conflict.value.changed_by == "alice"

        again = await client.set_policy(SMALL, agent=AGENT_NAME, by="bob", expected_version=1)
        assert again.version == 2
        cleared = await client.clear_policy(agent=AGENT_NAME, by="carol", expected_version=2)
        assert cleared.version == 3 and cleared.policy is None

        changes = client.policy_changes(agent=AGENT_NAME)
        assert [(c.from_version, c.to_version, c.changed_by) for c in changes] == [
            (2, 3, "carol"),
            (1, 2, "bob"),
            (0, 1, "alice"),
        ]
        assert changes[0].cleared


async def test_a_policy_workflow_left_open_on_another_task_queue_does_not_hold_up_a_change(env, run_worker) -> None:
    """A fleet on another task queue whose workers stopped before its ApprovalPolicies workflow
    ended (a test's worker, a deploy) leaves it open; a change of the same agent's policy on
    this queue still goes through at once (the workflow id names the queue). Seen failing in
    the suite: the change went to the open workflow, no worker answered, TimeoutError at 30 s."""
    from durable_agents.activities.policies import PolicyTarget, policies_workflow_id
    from durable_agents.workflows.policies import POLICIES_WORKFLOW

    dead_queue = f"gone-{uuid.uuid4().hex[:8]}"
    target = PolicyTarget(agent=AGENT_NAME)
    left = await env.client.start_workflow(
        POLICIES_WORKFLOW, target.to_dict(), id=policies_workflow_id(target, dead_queue), task_queue=dead_queue
    )
    try:
        async with run_worker([payer]) as client:
            stored = await client.set_policy(SMALL, agent=AGENT_NAME, by="alice", timeout=10)
            assert stored.version >= 1 and client.policy(agent=AGENT_NAME).version == stored.version
    finally:
        await left.terminate(reason="test over")


async def test_a_rule_on_an_argument_the_tool_lacks_is_refused_when_set(run_worker) -> None:
    async with run_worker([payer]) as client:
        wrong = {"allow": [{"name": "r", "tools": ["charge_card"], "when": [{"arg": "amount", "op": "<", "value": 9}]}]}
        with pytest.raises(ConfigurationError, match="no argument 'amount'"):
            await client.set_policy(wrong, agent=AGENT_NAME, by="alice")
        with pytest.raises(ConfigurationError, match="no tool 'refund'"):
            await client.set_policy({"allow": [{"name": "r", "tools": ["refund"]}]}, agent=AGENT_NAME, by="alice")
        with pytest.raises(ConfigurationError, match="no agent named 'nobody'"):
            await client.set_policy(SMALL, agent="nobody", by="alice")
        with pytest.raises(ConfigurationError, match="Extra inputs are not permitted|extra"):
            await client.set_policy({**SMALL, "allowAll": True}, agent=AGENT_NAME, by="alice")
        assert client.policy(agent=AGENT_NAME).version == 0  # nothing was kept


async def test_a_session_policy_is_checked_against_the_tools_its_runs_recorded(run_worker) -> None:
    async with run_worker([payer]) as client:
        sid = f"pm-{uuid.uuid4().hex[:8]}"
        result = await client.send(AGENT_NAME, "charge it", session_id=sid)
        assert result.finish_reason == "awaiting-approval"
        stored = await client.set_policy(SMALL, session_id=sid, by="alice")
        assert stored.scope.kind == "session" and stored.version == 1
        with pytest.raises(ConfigurationError, match="no argument 'cents'"):
            bad = {"deny": [{"name": "d", "tools": ["charge_card"], "when": [{"arg": "cents", "op": ">", "value": 1}]}]}
            await client.set_policy(bad, session_id=sid, by="alice")
        with pytest.raises(ConfigurationError, match="name its agent"):
            await client.set_policy(SMALL, session_id="never-run", by="alice")
        ahead = await client.set_policy(SMALL, session_id=f"{sid}-next", agent=AGENT_NAME, by="alice")
        assert ahead.scope.kind == "session" and ahead.version == 1  # a session not run yet: its agent's tools
        await client.cancel(sid)


async def test_grants_made_listed_and_revoked(run_worker) -> None:
    async with run_worker([payer]) as client:
        sid = f"pm-{uuid.uuid4().hex[:8]}"
        await client.send(AGENT_NAME, "charge it", session_id=sid)  # records the tool's schema
        grant = client.grant(
            "agent",
            "charge_card",
            agent=AGENT_NAME,
            when=[{"arg": "amount_cents", "op": "<=", "value": 10000}],
            expires_in=timedelta(minutes=10),
            max_uses=3,
            by="alice",
        )
        assert grant.expires_at is not None and grant.max_uses == 3
        assert [g.id for g in client.grants(agent=AGENT_NAME, live=True)] == [grant.id]
        with pytest.raises(ConfigurationError, match="no argument 'amount'"):
            client.grant("agent", "charge_card", agent=AGENT_NAME, when=[{"arg": "amount", "op": "<", "value": 1}])
        with pytest.raises(ConfigurationError, match="no recorded run"):
            client.grant("tool", "refund", when=[{"arg": "amount", "op": "<", "value": 1}])
        revoked = client.revoke_grant(grant.id, by="bob")
        assert revoked.revoked and revoked.grant.revoked_by == "bob"
        assert client.grants(agent=AGENT_NAME, live=True) == []
        assert not client.revoke_grant(grant.id, by="carol").revoked
        await client.cancel(sid)


def test_without_temporal_a_policy_is_checked_against_a_given_agent(store: SqliteStore) -> None:
    admin = PolicyAdmin(store)
    stored = admin.set_policy(SMALL, against=payer, agent=AGENT_NAME, by="alice")
    assert stored.version == 1
    other = Agent(name="other", model="scripted:x", tools=[])
    with pytest.raises(ConfigurationError, match="no tool 'charge_card'"):
        admin.set_policy(SMALL, against=other, agent="other", by="alice")


async def test_no_worker_no_change_and_it_is_not_made_later(
    env, store: SqliteStore, task_queue: str, run_worker
) -> None:
    from durable_agents.client import AgentClient

    lonely = AgentClient(env.client, store, f"{task_queue}-nobody")
    with pytest.raises(TimeoutError, match="no worker on task queue"):
        await lonely.set_policy(SMALL, agent=AGENT_NAME, by="alice", timeout=2)
    async with run_worker([payer]):  # a worker on that queue later does not make it
        pass
    assert lonely.policy(agent=AGENT_NAME).version == 0


async def test_writers_at_once_and_around_the_workflows_end_all_get_their_change(run_worker) -> None:
    """Each change reaches the target's workflow (one starts, later ones join it while it runs,
    or start the next after it ended); every one is a version of its own."""
    import asyncio

    async with run_worker([payer]) as client:
        for pause in (0.0, 0.01, 0.03):
            await asyncio.gather(*[client.set_policy(SMALL, agent=AGENT_NAME, by=f"w{i}") for i in range(5)])
            await asyncio.sleep(pause)
        assert client.policy(agent=AGENT_NAME).version == 15
        assert len({c.changed_by for c in client.policy_changes(agent=AGENT_NAME)}) == 5


async def test_on_a_postgresql_store_the_worker_the_client_and_another_process_share_it(
    env, postgres_url: str, task_queue: str, tmp_path
) -> None:
    """A worker on a PostgreSQL store checks and writes the policy; a client process of the CLI
    on the same database reads it back, with its audit, and a grant made there."""
    import subprocess
    import sys

    from durable_agents import build_worker
    from durable_agents.checkpoint import PostgresStore
    from durable_agents.client import AgentClient

    store = PostgresStore(postgres_url)
    try:
        async with build_worker(env.client, agents=[payer], store=store, task_queue=task_queue):
            client = AgentClient(env.client, store, task_queue)
            before = client.policy(agent=AGENT_NAME).version
            stored = await client.set_policy(SMALL, agent=AGENT_NAME, by="pg-alice", expected_version=before)
            assert stored.version == before + 1
        grant = client.grant("agent", "charge_card", agent=AGENT_NAME, max_uses=1, by="pg-alice")
        cli = [sys.executable, "-m", "durable_agents.cli", "--store", postgres_url]
        shown = subprocess.run(
            [*cli, "policy", "show", "--agent", AGENT_NAME, "--json"], capture_output=True, text=True
        )
        assert shown.returncode == 0 and '"changedBy": "pg-alice"' in shown.stdout, shown.stderr
        listed = subprocess.run(
            [*cli, "grants", "list", "--agent", AGENT_NAME, "--live"], capture_output=True, text=True
        )
        assert grant.id in listed.stdout, (listed.stdout, listed.stderr)
        revoked = subprocess.run([*cli, "grants", "revoke", grant.id, "--by", "pg-bob"], capture_output=True, text=True)
        assert revoked.returncode == 0, revoked.stderr
        assert grant.id not in [g.id for g in client.grants(agent=AGENT_NAME, live=True)]
    finally:
        store.close()
