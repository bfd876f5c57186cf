"""The wire contract (``durable_agents/contract``): its schema files are the models', its page
names every workflow, handler, error type and search attribute, and what it promises holds
for a client that is not ours (a plain ``temporalio`` client: default converter, no plugin).

The other outside clients (the ``temporal`` CLI, Node's ``@temporalio/client``, the UI in
Chromium) are in ``tests/outside_clients/``."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from datetime import timedelta
from typing import Any

import jsonschema
import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from durable_agents import (
    Agent,
    InvalidDecisionError,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    build_worker,
    register_script,
    tool,
)
from durable_agents.activities.contracts import TRUNCATED, VIEW_BYTES, bounded, bounded_text
from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.errors import FailureType
from durable_agents.client.connection import data_converter
from durable_agents.contract import (
    AGENT_RUN_HANDLERS,
    PAGE,
    SCHEMAS_DIR,
    SEARCH_ATTRIBUTES,
    SHAPES,
    WORKFLOWS,
    stale_schemas,
    write_schemas,
)
from durable_agents.workflows.contracts import MAX_INLINE_INPUT_BYTES, InvalidRunInput, run_input
from tests.conftest import session_id
from tests.outside_clients import agents as outside

WAIT = 30.0


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS_DIR / f"{name}.schema.json").read_text())


def conforms(value: Any, name: str) -> None:
    jsonschema.validate(value, schema(name))


# -- the contract's files -------------------------------------------------------------------
def test_the_schema_files_are_the_current_models():
    assert stale_schemas() == [], "a model changed: run `python -m durable_agents.contract` and commit the files"


def test_a_model_change_without_its_schema_file_is_caught(tmp_path):
    write_schemas(tmp_path)
    assert stale_schemas(tmp_path) == []
    summary = json.loads((tmp_path / "RunSummary.schema.json").read_text())
    del summary["properties"]["text"]  # as a schema written before the field was added
    (tmp_path / "RunSummary.schema.json").write_text(json.dumps(summary))
    (tmp_path / "Gone.schema.json").write_text("{}")
    assert stale_schemas(tmp_path) == ["Gone.schema.json", "RunSummary.schema.json"]


def test_every_wire_key_is_camel_case_and_snake_case_input_is_still_accepted():
    for shape in SHAPES:
        names = _property_names(shape.schema())
        assert names and not [n for n in names if "_" in n], shape.name
    old = run_input({"session_id": "s1", "agent": "a", "input": [{"role": "user", "content": "hi"}]}, "s1")
    new = run_input({"sessionId": "s1", "agent": "a", "input": [{"role": "user", "content": "hi"}]}, "s1")
    assert old == new


def _property_names(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                found |= set(value)
            found |= _property_names(value)
    elif isinstance(node, list):
        for item in node:
            found |= _property_names(item)
    return found


def test_the_page_names_every_workflow_handler_error_type_and_bound():
    page = PAGE.read_text()
    for name in [*WORKFLOWS, *(h.name for h in AGENT_RUN_HANDLERS), *(t.value for t in FailureType)]:
        assert f"`{name}`" in page, name
    for attribute in SEARCH_ATTRIBUTES:
        assert attribute in page, attribute
    assert f"{VIEW_BYTES // 1024} KiB" in page and f"{MAX_INLINE_INPUT_BYTES // 1024} KiB" in page
    assert "$truncated" in page


def test_the_pages_start_input_is_valid_input():
    start = re.search(r"```json\n(.*?)\n```", PAGE.read_text(), re.S)
    assert start is not None
    conforms(json.loads(start.group(1)), "AgentRunInput")
    assert run_input(json.loads(start.group(1)), "chat-42").agent == "booker"


# -- bad input fails the run at once, with one readable error ---------------------------------
@pytest.mark.parametrize(
    ("raw", "workflow_id", "said"),
    [
        ({"sessionId": "s1", "agent": "a", "input": "hi"}, "s1", "input: Input should be a valid list"),
        ({"session": "s1", "agent": "a"}, "s1", "sessionId: Field required"),
        ("hi", "s1", "the input: Input should be a valid dictionary"),
        ({"sessionId": "cli-b", "agent": "a"}, "wf-x", "workflow id 'wf-x' carries sessionId 'cli-b'"),
        (
            {"sessionId": "s1", "agent": "a", "input": [{"role": "user", "content": "x" * MAX_INLINE_INPUT_BYTES}]},
            "s1",
            "over the limit of 262,144",
        ),
    ],
)
def test_bad_run_input_is_one_error_that_names_the_field(raw: Any, workflow_id: str, said: str):
    with pytest.raises(InvalidRunInput) as caught:
        run_input(raw, workflow_id)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_value_over_its_bound_becomes_a_marker_with_its_start():
    small = {"amount_cents": 4200}
    assert bounded(small) is small
    big = {"body": "é" * VIEW_BYTES}
    marker = bounded(big)
    assert set(marker) == {TRUNCATED}
    assert marker[TRUNCATED]["bytes"] == len(json.dumps(big, ensure_ascii=False, separators=(",", ":")).encode())
    assert (
        marker[TRUNCATED]["preview"].startswith('{"body":"éé')
        and len(marker[TRUNCATED]["preview"].encode()) <= VIEW_BYTES
    )
    text, cut = bounded_text("ü" * VIEW_BYTES)
    assert cut and len(text.encode()) <= VIEW_BYTES and text == "ü" * (VIEW_BYTES // 2)
    assert bounded_text("short") == ("short", False)


# -- through a real run, from a client that is not ours -------------------------------------
async def plain_client(env: WorkflowEnvironment, namespace: str = "default") -> Client:
    """A Temporal client as an outside team has it: default data converter, no plugin."""
    return await Client.connect(env.client.service_client.config.target_host, namespace=namespace)


async def until(ask, what: str, timeout: float = WAIT):
    async def poll():
        while True:
            value = await ask()
            if value:
                return value
            await asyncio.sleep(0.1)

    try:
        return await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        pytest.fail(f"waited {timeout:.0f} s for {what}")


async def details(handle) -> str:
    meta = await handle.query("__temporal_workflow_metadata")
    return meta.get("currentDetails", "") if isinstance(meta, dict) else meta.current_details


def start_input(sid: str, agent: str = outside.AGENT_NAME, text: str = "charge it") -> dict[str, Any]:
    return {"sessionId": sid, "agent": agent, "input": [{"role": "user", "content": text}]}


async def test_what_a_run_waits_for_and_says_conforms_to_the_schemas(run_worker, env, task_queue):
    """The answers of every query, the update and the result, read as plain JSON, are what
    the shipped schemas describe; the UI's Current Details show the pending arguments and the
    signals the run ignored."""
    plain = await plain_client(env)
    sid = session_id()
    async with run_worker([outside.payer]):
        handle = await plain.start_workflow("AgentRun", start_input(sid), id=sid, task_queue=task_queue)
        pending = await until(lambda: handle.query("pending_approval"), "the pending approval")
        conforms(pending, "PendingApproval")
        assert pending["arguments"] == {"amount_cents": outside.AMOUNT_CENTS, "recipient": outside.RECIPIENT}
        state = await handle.query("run_state")
        conforms(state, "RunState")
        assert [c["arguments"] for c in state["pendingToolCalls"]] == [pending["arguments"]]
        shown = await details(handle)
        assert "charge_card" in shown and '"amount_cents": 4200' in shown and '"recipient": "ACME Ltd"' in shown

        await handle.signal("approve")  # no payload: dropped, and said
        await handle.signal("approve", {"approvalId": "nope", "approved": True})  # not pending: dropped
        said = await until(lambda: _has(details(handle), "ignored a signal: approval nope"), "the drops in details")
        assert "got no payload" in said
        assert await handle.query("pending_approval") == pending  # nothing was decided

        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(
                "decide",
                {
                    "approvalId": pending["approvalId"],
                    "approved": True,
                    "arguments": {"amount_cents": "lots", "recipient": "x"},
                },
            )
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidDecisionError"
        assert "amount_cents: 'lots' is not of type 'integer'" in cause.message
        assert cause.details == (pending["approvalId"], cause.message)
        assert cause.failure is not None and cause.failure.stack_trace == ""  # no Python trace in the UI

        outcome = await handle.execute_update("decide", {"approvalId": pending["approvalId"], "approved": True})
        conforms(outcome, "Outcome")
        result = await handle.result()
    conforms(result, "RunSummary")
    assert outcome["summary"]["finishReason"] == "stop" and outcome["handoff"] is None
    assert (result["finishReason"], result["text"], result["textTruncated"]) == ("stop", outside.FINAL_TEXT, False)
    assert outside.charges_of(sid) == [{"amount_cents": outside.AMOUNT_CENTS, "recipient": outside.RECIPIENT}]


async def _has(text, part: str) -> str | None:
    value = await text
    return value if part in value else None


async def test_our_client_is_told_an_edited_argument_is_invalid_and_may_decide_again(run_worker):
    sid = session_id()
    async with run_worker([outside.payer]) as client:
        paused = await client.send(outside.AGENT_NAME, "charge it", session_id=sid)
        with pytest.raises(InvalidDecisionError) as refused:
            await client.approve(sid, paused.approval_id, arguments={"amount_cents": 100})  # recipient missing
        assert refused.value.approval_id == paused.approval_id
        assert "'recipient' is a required property" in str(refused.value)
        done = await client.approve(sid, paused.approval_id, arguments={"amount_cents": 100, "recipient": "Bob"})
    assert done.finish_reason == "stop"
    assert outside.charges_of(sid) == [{"amount_cents": 100, "recipient": "Bob"}]


class Letter(outside.BaseModel):
    body: str


@tool(needs_approval=True)
async def send_letter(args: Letter, ctx: ToolContext) -> dict:
    """Send a long letter (a human approves it first)."""
    return {"sent": len(args.body)}


LONG = "Dear customer, " + "é" * (2 * VIEW_BYTES)
register_script(
    "long-letter",
    [
        ScriptedTurn(tool_calls=[ScriptedToolCall(name="send_letter", arguments={"body": LONG})]),
        ScriptedTurn(text=LONG),
    ],
)
letter_agent = Agent(name="letters", model="scripted:long-letter", tools=[send_letter])


async def test_long_arguments_and_a_long_answer_travel_bounded_and_marked(run_worker, env, task_queue, store):
    plain = await plain_client(env)
    sid = session_id()
    async with run_worker([letter_agent]):
        handle = await plain.start_workflow("AgentRun", start_input(sid, "letters"), id=sid, task_queue=task_queue)
        pending = await until(lambda: handle.query("pending_approval"), "the pending approval")
        marker = pending["arguments"][TRUNCATED]
        assert marker["bytes"] > 2 * VIEW_BYTES and marker["preview"].startswith('{"body":"Dear customer, éé')
        assert len(marker["preview"].encode()) <= VIEW_BYTES
        await handle.signal("approve", {"approvalId": pending["approvalId"], "approved": True})
        result = await handle.result()
    assert result["textTruncated"] is True and LONG.startswith(result["text"])
    assert VIEW_BYTES - 2 <= len(result["text"].encode()) <= VIEW_BYTES
    assert store.load(sid).messages[-1].content == LONG  # the whole answer is in the store


async def test_a_run_started_without_saying_sets_its_search_attributes_where_the_namespace_has_them(
    run_worker, env, task_queue, tmp_path, caplog
):
    """The README's `AgentStatus = "awaiting-approval"` search finds runs started by any client;
    a namespace without the attributes gets runs without them and a warning, never a wedged run."""
    plain = await plain_client(env)
    sid = session_id()
    async with run_worker([outside.payer]):
        handle = await plain.start_workflow("AgentRun", start_input(sid), id=sid, task_queue=task_queue)
        await until(lambda: handle.query("pending_approval"), "the pending approval")
        found = await until(
            lambda: _listed(plain, f'AgentStatus = "awaiting-approval" AND WorkflowId = "{sid}"'),
            "the visibility search",
        )
        assert [w.id for w in found] == [sid]
        await handle.terminate("done")

    namespace = f"bare-{uuid.uuid4().hex[:8]}"
    await env.client.workflow_service.register_namespace(
        RegisterNamespaceRequest(namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400))
    )
    bare = await Client.connect(
        env.client.service_client.config.target_host, namespace=namespace, data_converter=data_converter()
    )
    store = SqliteStore(tmp_path / "bare.db")
    sid = session_id()
    caplog.set_level(logging.WARNING)
    async with build_worker(bare, agents=[outside.payer], store=store, task_queue=task_queue):
        outsider = await plain_client(env, namespace)
        handle = await until(lambda: _start(outsider, sid, task_queue), f"namespace {namespace} to take starts")
        pending = await until(lambda: handle.query("pending_approval"), "the pending approval")
        await handle.signal("approve", {"approvalId": pending["approvalId"], "approved": True})
        result = await asyncio.wait_for(handle.result(), WAIT)
        described = await handle.describe()
    assert result["finishReason"] == "stop"
    assert not [k for k in described.typed_search_attributes if k.key.name.startswith("Agent")]
    assert f"namespace {namespace} lacks search attributes" in caplog.text
    store.close()


async def _listed(client: Client, query: str) -> list:
    return [w async for w in client.list_workflows(query)]


async def _start(client: Client, sid: str, task_queue: str):
    try:
        return await client.start_workflow(
            "AgentRun", start_input(sid), id=sid, task_queue=task_queue, task_timeout=timedelta(seconds=10)
        )
    except Exception:
        return None


async def test_a_start_with_bad_input_fails_the_run_at_once_naming_the_field(run_worker, env, task_queue):
    plain = await plain_client(env)
    async with run_worker([outside.payer]):
        for raw, said in (
            ({"sessionId": "{sid}", "agent": outside.AGENT_NAME, "input": "hi"}, "input: Input should be a valid list"),
            ({"sessionId": "someone-else", "agent": outside.AGENT_NAME}, "carries sessionId 'someone-else'"),
        ):
            sid = session_id()
            raw = {k: (v.format(sid=sid) if isinstance(v, str) else v) for k, v in raw.items()}
            handle = await plain.start_workflow("AgentRun", raw, id=sid, task_queue=task_queue)
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(handle.result(), WAIT)
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "InvalidRunInputError", cause
            assert said in cause.message
