"""Client and worker on different stores: one clear error naming both, nothing silently lost."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents import AgentClient, ConfigurationError, build_worker
from durable_agents.checkpoint import SqliteStore
from tests import agents
from tests.conftest import session_id


async def test_a_client_on_another_store_gets_one_error_naming_both(env, store, task_queue, tmp_path):
    elsewhere = SqliteStore(tmp_path / "elsewhere" / "store.db")  # e.g. started from another directory
    async with build_worker(env.client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        client = AgentClient(env.client, elsewhere, task_queue)
        with pytest.raises(ConfigurationError) as raised:
            await asyncio.wait_for(client.send("booker", "Book a table for 2", session_id=session_id()), 30)
    message = str(raised.value)
    assert str(tmp_path / "elsewhere" / "store.db") in message and str(store.location) in message
    assert store.list_sessions() == []  # the worker wrote nothing
    elsewhere.close()


async def test_waiting_approvals_come_from_temporal_so_another_store_cannot_hide_them(env, store, task_queue, tmp_path):
    elsewhere = SqliteStore(tmp_path / "elsewhere.db")
    sid = session_id()
    async with build_worker(env.client, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        paused = await AgentClient(env.client, store, task_queue).send("payments", "Charge me", session_id=sid)
        other = AgentClient(env.client, elsewhere, task_queue)
        assert [p for p in other.pending_approvals() if p.session_id == sid] == []  # the store alone misses it
        for _ in range(50):  # visibility is eventually consistent
            listed = [p for p in await other.waiting_approvals() if p.session_id == sid]
            if listed:
                break
            await asyncio.sleep(0.1)
        assert [p.approval_id for p in listed] == [paused.approval_id]
        assert listed[0].tool_name == "charge_card"
        await AgentClient(env.client, store, task_queue).cancel(sid)
    elsewhere.close()


async def test_waiting_approvals_are_the_ones_on_this_clients_task_queue(env, store, task_queue, tmp_path):
    """A run paused on another task queue (whose worker is gone) is not this client's to list,
    nor to wait for: before, every such run was asked in turn and cost its 5 s timeout."""
    theirs_store, theirs_queue, sid = SqliteStore(tmp_path / "theirs.db"), f"{task_queue}-theirs", session_id()
    async with build_worker(env.client, agents=[agents.payments_agent], store=theirs_store, task_queue=theirs_queue):
        await AgentClient(env.client, theirs_store, theirs_queue).send("payments", "Charge me", session_id=sid)
    query = f'WorkflowId = "{sid}" AND PendingApprovalId IS NOT NULL AND ExecutionStatus = "Running"'
    for _ in range(100):  # visibility is eventually consistent
        if [e async for e in env.client.list_workflows(query)]:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("visibility never listed the paused run")
    ours = AgentClient(env.client, store, task_queue)
    assert [p for p in await ours.waiting_approvals() if p.session_id == sid] == []
    theirs = AgentClient(env.client, SqliteStore(tmp_path / "blank.db"), theirs_queue)
    listed = [p for p in await theirs.waiting_approvals() if p.session_id == sid]  # no worker: from visibility
    assert [p.session_id for p in listed] == [sid]
    await env.client.get_workflow_handle(sid).terminate("test over")
    theirs_store.close()


def count_visibility_rows(monkeypatch, temporal) -> list[str]:
    """The ids of the executions ``temporal.list_workflows`` returns from now on (until undone)."""
    paged: list[str] = []
    listing = temporal.list_workflows

    def counted(query: str, **kwargs):
        async def rows():
            async for execution in listing(query, **kwargs):
                paged.append(execution.id)
                yield execution

        return rows()

    monkeypatch.setattr(temporal, "list_workflows", counted)
    return paged


async def test_listing_asks_visibility_only_for_runs_the_store_does_not_hold(
    env, store, task_queue, tmp_path, monkeypatch
):
    """Each run carries its store's id (``AgentStore``): a client lists its own store's waiting
    sessions from the store and pages through none of them in visibility again (10,000
    waiting sessions were 10,000 visibility rows before); runs of another store still show."""
    from durable_agents.workflows.search import AGENT_STORE

    elsewhere, sids = SqliteStore(tmp_path / "elsewhere.db"), [session_id() for _ in range(3)]
    async with build_worker(env.client, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        ours, other = AgentClient(env.client, store, task_queue), AgentClient(env.client, elsewhere, task_queue)
        for sid in sids:
            await ours.send("payments", "Charge me", session_id=sid)
        described = await env.client.get_workflow_handle(sids[0]).describe()
        assert described.typed_search_attributes.get(AGENT_STORE) == store.store_id
        for _ in range(100):  # visibility is eventually consistent: wait until it lists all three
            if {p.session_id for p in await other.waiting_approvals()} >= set(sids):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("visibility never listed the paused runs")
        paged = count_visibility_rows(monkeypatch, env.client)
        listed = [p.session_id for p in await ours.waiting_approvals()]
        assert set(sids) <= set(listed)
        assert not set(sids) & set(paged), "the store's own waiting runs were paged through in visibility"
        paged.clear()
        assert set(sids) <= {p.session_id for p in await other.waiting_approvals()}
        assert set(sids) <= set(paged)  # another store's client still finds them in visibility
        monkeypatch.undo()
        for sid in sids:
            await ours.cancel(sid)
    elsewhere.close()


async def test_a_subagent_run_carries_its_parents_store_so_listing_pages_through_neither(
    run_worker, store, tmp_path, monkeypatch
):
    """A child workflow inherits none of its parent's search attributes: the parent passes
    its ``AgentStore`` on when it starts a sub-agent's run, so a waiting sub-agent of this
    store is not paged through in visibility either (before: every waiting sub-agent was)."""
    from durable_agents.testing import configured
    from durable_agents.workflows.search import AGENT_STORE
    from tests import subagent_agents as sa

    sid = session_id()
    write = f"{sid}/4"  # the writer's session: it waits on its publish approval
    with configured(log_dir=tmp_path):
        async with run_worker([sa.lead]) as client:
            paused = await asyncio.wait_for(client.send("lead", "Rome", session_id=sid), 60)
            described = await client.temporal.get_workflow_handle(write).describe()
            assert described.typed_search_attributes.get(AGENT_STORE) == store.store_id
            query = f'WorkflowId = "{write}" AND {AGENT_STORE.name} = "{store.store_id}"'
            for _ in range(100):  # visibility is eventually consistent
                if [e async for e in client.temporal.list_workflows(query)]:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("visibility never found the sub-agent's run by its store")
            paged = count_visibility_rows(monkeypatch, client.temporal)
            listed = [p for p in await client.waiting_approvals() if p.approval_id == paused.approval_id]
            assert [(p.session_id, p.subagent_session_id) for p in listed] == [(sid, write)]
            assert not {sid, write} & set(paged), "this store's waiting runs were paged through in visibility"
            monkeypatch.undo()
            await client.cancel(sid)


async def test_an_agent_filter_is_not_read_as_part_of_the_visibility_query(env, store, task_queue, tmp_path):
    """``waiting_approvals(agent=…)`` with quotes in the name: refused, never run as query text
    (before, ``payments" OR AgentName != "x`` listed every agent's approvals)."""
    elsewhere = SqliteStore(tmp_path / "elsewhere.db")
    sid = session_id()
    async with build_worker(env.client, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        await AgentClient(env.client, store, task_queue).send("payments", "Charge me", session_id=sid)
        other = AgentClient(env.client, elsewhere, task_queue)  # lists the run from visibility only
        for _ in range(50):  # visibility is eventually consistent
            if [p for p in await other.waiting_approvals("payments") if p.session_id == sid]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("visibility never listed the paused run")
        assert [p for p in await other.waiting_approvals("booker") if p.session_id == sid] == []
        with pytest.raises(ConfigurationError, match="no agent can be named"):
            await other.waiting_approvals('booker" OR AgentName != "x')
        await AgentClient(env.client, store, task_queue).cancel(sid)
    elsewhere.close()
