"""A worker without the run's key, replaying a paused run, says so and loses nothing (real dev server).

A run pauses for an approval on a worker that has key k1, and that worker stops.
Another worker on the same task queue then gets the run's workflow tasks (a query,
the approval's signal): with no keys at all, with only another key (k2), or with other
key material under the id k1. It cannot read the run's history; it must say so, naming
key id k1, as its workflow task's failure (history, the UI, ``temporal workflow
describe``, the worker log) and to the client that asked, and never fail the run:
replaying, failing the run would be a command the history does not hold (Temporal's
``Nondeterminism error``), and the run must go on once a worker with k1 takes it.
(A keyless worker given a fresh run fails that run at once: test_history_encrypted.)
"""

from __future__ import annotations

import asyncio
import re

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError

from durable_agents import AgentClient, ApprovalDecision, build_worker, connect
from durable_agents.checkpoint.encryption import new_key
from durable_agents.encryption import EncryptionCodec
from tests import agents
from tests.conftest import session_id

K1 = new_key("k1")
OTHER_KEYS = {
    "no-keys": None,
    "another-key": new_key("k2"),
    "other-material-under-k1": new_key("k1"),
}
SAYS = {
    "no-keys": r"this worker cannot decrypt the run's history: .*key id 'k1'.*this worker has no encryption keys",
    "another-key": r"key id 'k1', which is not among the keys of .* \(k2\)",
    "other-material-under-k1": r"key id 'k1' does not decrypt with the key of that id",
}


async def _client(env, keys: str | None) -> Client:
    if keys is None:
        return env.client  # the suite's client: our converter, no codec
    return await connect(env.client.service_client.config.target_host, codec=EncryptionCodec(keys))


async def _task_failure(handle: WorkflowHandle) -> HistoryEvent:
    """The run's first WorkflowTaskFailed event, once there is one."""
    while True:
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return event
        await asyncio.sleep(0.2)


async def _next_approval(client: AgentClient, sid: str, after: str) -> str:
    while True:
        pending = await client.pending_approval(sid)
        if pending is not None and pending.approval_id != after:
            return pending.approval_id
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("other", list(OTHER_KEYS))
async def test_a_worker_without_the_key_says_so_replaying_a_paused_run_and_loses_nothing(env, store, task_queue, other):
    keyed = await _client(env, K1)
    sid = session_id()
    calls_before = len(agents.CALL_LOG)
    async with build_worker(keyed, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        paused = await AgentClient(keyed, store, task_queue).send("payments", "Charge it", session_id=sid)
    assert paused.finish_reason == "awaiting-approval"
    handle = keyed.get_workflow_handle(sid)

    wrong = await _client(env, OTHER_KEYS[other])
    async with build_worker(wrong, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        # the client that asks hears why, the key id named (not "Nondeterminism error", not "Encoded failure")
        with pytest.raises(WorkflowQueryFailedError, match=SAYS[other]):
            await asyncio.wait_for(handle.query("pending_approval"), 60)
        # the approval arrives as a signal (the UI's way): the worker's task failure says why, unencoded
        await handle.signal("approve", ApprovalDecision(approval_id=paused.approval_id, approved=True))
        failed = (await asyncio.wait_for(_task_failure(handle), 60)).workflow_task_failed_event_attributes
    assert failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE
    assert failed.failure.application_failure_info.type == "EncryptionKeyError"
    assert not failed.failure.HasField("encoded_attributes")
    assert re.search(SAYS[other], failed.failure.message), failed.failure.message
    assert (await handle.describe()).status.name == "RUNNING"  # the run itself is untouched

    # a worker with k1 takes over: the approved call runs (once), the run pauses again, then finishes
    async with build_worker(keyed, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        client = AgentClient(keyed, store, task_queue)
        second = await asyncio.wait_for(_next_approval(client, sid, paused.approval_id), 60)
        done = await client.approve(sid, second)
    assert done.finish_reason == "stop" and done.text == "All calls have results."
    charged = [(name, args) for name, _, args in agents.CALL_LOG[calls_before:] if name == "charge_card"]
    assert charged == [("charge_card", {"amount": 10}), ("charge_card", {"amount": 20})]
