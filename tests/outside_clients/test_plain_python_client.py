"""An agent run driven by a plain ``temporalio`` client: Temporal's DEFAULT data converter,
no plugin, nothing of this project's. It starts ``AgentRun`` by name with a dict, reads
``pending_approval`` as a dict, signals ``approve`` with a dict, and reads the result dict."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.converter import DataConverter

from tests.outside_clients.agents import AGENT_NAME, AMOUNT_CENTS, FINAL_TEXT, RECIPIENT, charges_of
from tests.outside_clients.conftest import Outside, run_input

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def plain_client(outside: Outside) -> Client:
    client = await Client.connect(outside.address, namespace="default")
    assert client.data_converter is DataConverter.default  # Temporal's own JSON converter
    return client


async def wait_pending(o: Outside, client: Client, sid: str, timeout: float = 15.0) -> dict:
    handle = client.get_workflow_handle(sid)
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = await asyncio.wait_for(handle.query("pending_approval"), 8)
        except Exception as e:  # a wedged run does not answer: said below
            last = e
        if last is not None and not isinstance(last, Exception):
            return last
        await asyncio.sleep(0.2)
    pytest.fail(
        f"pending_approval gave no pending approval within {timeout:g} s (last: {last!r}); {await o.diagnose(sid)}",
        pytrace=False,
    )


def check_pending(pending: object, sid: str) -> dict:
    assert isinstance(pending, dict), f"pending_approval is not a JSON object: {pending!r}"
    assert pending.get("toolName") == "charge_card", pending
    assert isinstance(pending.get("approvalId"), str) and pending["approvalId"], pending
    assert pending.get("sessionId") == sid and pending.get("agent") == AGENT_NAME, pending
    assert pending.get("arguments") == {"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}, (
        f"the pending approval does not carry the call's arguments: {pending.get('arguments')!r}"
    )
    return pending


def check_finished(summary: object, sid: str) -> None:
    assert isinstance(summary, dict), f"the result is not a JSON object: {summary!r}"
    assert summary.get("sessionId") == sid, summary
    assert summary.get("finishReason") == "stop", summary
    assert summary.get("text") == FINAL_TEXT, f"the result carries no final text: {summary}"
    assert charges_of(sid) == [{"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}], charges_of(sid)


async def test_a_plain_temporalio_client_runs_an_agent_to_its_approval_and_end(outside: Outside, plain_client: Client):
    sid = outside.session("py")
    handle = await plain_client.start_workflow("AgentRun", run_input(sid), id=sid, task_queue=outside.task_queue)

    pending = check_pending(await wait_pending(outside, plain_client, sid), sid)

    await handle.signal("approve", {"approvalId": pending["approvalId"], "approved": True, "decidedBy": "plain-python"})
    try:
        summary = await asyncio.wait_for(handle.result(), 15)
    except TimeoutError:
        pytest.fail(f"no result within 15 s of the approve signal; {await outside.diagnose(sid)}", pytrace=False)
    check_finished(summary, sid)


async def test_a_plain_temporalio_client_decides_with_the_update(outside: Outside, plain_client: Client):
    sid = outside.session("py")
    handle = await plain_client.start_workflow("AgentRun", run_input(sid), id=sid, task_queue=outside.task_queue)
    pending = check_pending(await wait_pending(outside, plain_client, sid), sid)

    # arguments that fail charge_card's schema: refused, nothing decided
    refused = {
        "approvalId": pending["approvalId"],
        "approved": True,
        "arguments": {"amount_cents": "lots", "recipient": RECIPIENT},
    }
    try:
        accepted = await asyncio.wait_for(handle.execute_update("decide", refused), 15)
    except WorkflowUpdateFailedError as e:
        cause = e.cause
    except TimeoutError:
        pytest.fail(f"the decide update did not answer within 15 s; {await outside.diagnose(sid)}", pytrace=False)
    else:
        pytest.fail(f"decide with arguments failing charge_card's schema ({refused}) was accepted: {accepted}")
    assert "amount_cents" in str(getattr(cause, "message", cause)), f"the refusal does not name the field: {cause!r}"
    assert charges_of(sid) == []

    decision = {"approvalId": pending["approvalId"], "approved": True, "decidedBy": "plain-python"}
    try:
        outcome = await asyncio.wait_for(handle.execute_update("decide", decision), 15)
    except TimeoutError:
        pytest.fail(f"the decide update did not answer within 15 s; {await outside.diagnose(sid)}", pytrace=False)
    assert isinstance(outcome, dict) and outcome.get("handoff") is None, outcome
    check_finished(outcome.get("summary"), sid)
    check_finished(await asyncio.wait_for(handle.result(), 15), sid)
