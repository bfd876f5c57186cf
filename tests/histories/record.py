"""Record workflow histories for the replay tests.

    .venv/bin/python -m tests.histories.record

Re-record only on purpose: a replay failure after a change to ``workflows/``
means in-flight runs would break on deploy; guard the change with
``workflow.patched()`` instead, and add a new history next to the old ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.client import Client

from durable_agents import AgentClient, build_worker
from durable_agents.activities.policies import PolicyTarget, policies_workflow_id
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from tests import agents, policy_agents, subagent_agents

HERE = Path(__file__).parent
RUNS = {
    "weather_then_book_v1": (agents.weather_agent, "Book a table for 2 tonight"),
    "bad_calls_v1": (agents.bad_agent, "go"),
    "max_steps_v1": (agents.looping_agent, "loop"),
}
# Recorded after approvals existed (v2 of the workflow): pause, approve, pause, reject;
# an interrupted run; a fork.
EXTRA = ("approvals_v2", "interrupt_v2", "fork_v2", "subagents_v3", "streamed_v4", "subagents_store_v5")
# v3: a parent with two sub-agents (child workflows), one gated: its pause relayed, approved
# on the parent; the gated child's own history next to it. v5: the same, the parent passing
# its AgentStore search attribute to its sub-agents' runs (patch "subagent-store-attribute").
LOCAL = dataclasses.replace(agents.weather_agent, name="weather-local", activities="local")
# v8: a local run whose steps run their calls in their model turns (patch "local-step-runs-its-calls");
# local_steps_v7 is the same run recorded before that patch (at b3f5627), each call a local activity.
# v9: a local run begun locally (patch "begin-run-locally": the client saw the agent step locally in an
# earlier run, so it starts this one with beginLocally; begin_run runs in the first workflow task).
# v10: gated calls decided by the approval policy (patch "approval-policy"): one by a grant, one
# denied by a rule, one approved by the auto mode's evaluator racing the open approval.
# v12: the same run, the policy deciding the turn's gated calls in the model activity (patch
# "approval-policy-in-turn"): the grant's approval recorded there (no activity of its own), the
# rule's denial and the evaluator's call left to the workflow as in v10.


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"record-{uuid.uuid4().hex[:6]}"
        all_agents = [agent for agent, _ in RUNS.values()] + [agents.payments_agent, agents.slow_agent]
        all_agents += [subagent_agents.lead, LOCAL, policy_agents.payer]
        async with build_worker(client, agents=all_agents, store=store, task_queue=queue):
            agent_client = AgentClient(client, store, queue)
            only = set(sys.argv[1:])
            for name, (agent, text) in RUNS.items():
                if only and name not in only:
                    continue
                await agent_client.send(agent.name, text, session_id=name)
                await _save(client, name, name)
            if not only or "approvals_v2" in only:
                paused = await agent_client.send("payments", "Charge me twice", session_id="approvals_v2")
                again = await agent_client.approve("approvals_v2", paused.approval_id)
                await agent_client.reject("approvals_v2", again.approval_id, note="once is enough")
                await _save(client, "approvals_v2", "approvals_v2")
            if not only or "interrupt_v2" in only:
                first = await agent_client.start("slow", "Do the slow thing", session_id="interrupt_v2")
                while not any(n == "slow_tool" for n, _, _ in agents.CALL_LOG):
                    await asyncio.sleep(0.05)
                await agent_client.send("slow", "Stop.", session_id="interrupt_v2", interrupt=True)
                await _save(client, "interrupt_v2", "interrupt_v2", run_id=first.first_execution_run_id)
            if not only or "fork_v2" in only:
                made = await agent_client.fork("weather_then_book_v1", 1)
                runs = [w async for w in client.list_workflows('WorkflowType = "ForkSession"')]
                await _save(client, "fork_v2", runs[0].id)
                await agent_client.resume(made.session_id)
            if not only or "subagents_v3" in only:
                paused = await agent_client.send("lead", "Rome", session_id="subagents_v3")
                await agent_client.approve("subagents_v3", paused.approval_id)
                await _save(client, "subagents_v3", "subagents_v3")
                await _save(client, "subagents_child_v3", "subagents_v3/4")
            if not only or "streamed_v4" in only:  # v4: a streamed run (its outcomes in its event log)
                streamed = [
                    e async for e in agent_client.stream("payments", "Charge me twice", session_id="streamed_v4")
                ]
                again = await agent_client.approve("streamed_v4", streamed[-1].result.approval_id)
                await agent_client.reject("streamed_v4", again.approval_id, note="once is enough")
                await _save(client, "streamed_v4", "streamed_v4")
            if not only or "subagents_store_v5" in only:
                paused = await agent_client.send("lead", "Rome", session_id="subagents_store_v5")
                await agent_client.approve("subagents_store_v5", paused.approval_id)
                await _save(client, "subagents_store_v5", "subagents_store_v5")
            if not only or "local_steps_v8" in only:
                await agent_client.send(LOCAL.name, "Book a table for 2 tonight", session_id="local_steps_v8")
                await _save(client, "local_steps_v8", "local_steps_v8")
            if not only or "local_begin_v9" in only:
                await agent_client.send(LOCAL.name, "Book a table for 2 tonight", session_id="local_begin_first")
                await agent_client.send(LOCAL.name, "Book a table for 2 tonight", session_id="local_begin_v9")
                await _save(client, "local_begin_v9", "local_begin_v9")
            if not only or "approval_policy_v10" in only:
                await _policy_run(agent_client, store)
                await _save(client, "approval_policy_v10", "approval_policy_v10")
            if not only or "approval_policy_in_turn_v12" in only:
                await _policy_run(agent_client, store, "approval_policy_in_turn_v12")
                await _save(client, "approval_policy_in_turn_v12", "approval_policy_in_turn_v12")
            if not only or "approval_policies_v11" in only:  # the ApprovalPolicies workflow: a set, refused, then set
                await _policy_changes(agent_client)
                await _save(
                    client, "approval_policies_v11", policies_workflow_id(PolicyTarget(agent="payments"), queue)
                )


async def _policy_run(agent_client: AgentClient, store: SqliteStore, session_id: str = "approval_policy_v10") -> None:
    from datetime import UTC, datetime, timedelta

    from durable_agents.checkpoint.approval_grants import Grant, GrantScope
    from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for

    book, now = policy_book_for(store), datetime.now(UTC)
    policy = {
        "deny": [{"name": "no big", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": ">", "value": 5000}]}],
        "auto": {
            "evaluator": {"python": "tests.policy_agents:judge_sure"},
            "criteria": [{"name": "payments", "tools": ["pay"], "approveWhen": ["small amounts"]}],
        },
    }
    book.set_policy(PolicyScope.of_agent("payer"), policy, by="recorder", now=now)
    scope = GrantScope(kind="tool", tool="pay")
    book.add_grant(
        Grant(
            id=f"one-use-{session_id}",
            scope=scope,
            created_by="recorder",
            created_at=now - timedelta(seconds=1),
            max_uses=1,
        )
    )
    await agent_client.send("payer", "100 9000 300", session_id=session_id)
    await agent_client.result(session_id)


async def _policy_changes(agent_client: AgentClient) -> None:
    from durable_agents.errors import ConfigurationError

    small = {
        "allow": [{"name": "small", "tools": ["charge_card"], "when": [{"arg": "amount", "op": "<=", "value": 15}]}]
    }
    wrong = {"allow": [{"name": "w", "tools": ["charge_card"], "when": [{"arg": "cents", "op": "<=", "value": 1}]}]}
    first = agent_client.set_policy(small, agent="payments", by="recorder", expected_version=0)
    refused = agent_client.set_policy(wrong, agent="payments", by="recorder")
    results = await asyncio.gather(first, refused, return_exceptions=True)
    assert not isinstance(results[0], BaseException) and isinstance(results[1], ConfigurationError), results
    wid = policies_workflow_id(PolicyTarget(agent="payments"), agent_client.task_queue)
    await agent_client.temporal.get_workflow_handle(wid).result()


async def _save(client: Client, name: str, workflow_id: str, run_id: str | None = None) -> None:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    (HERE / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
