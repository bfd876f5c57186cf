"""Runs whose tools come from real MCP servers (``server.py``, stdio and streamable HTTP)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType

from durable_agents import (
    Agent,
    AgentClient,
    AgentDriftError,
    ConfigurationError,
    FinishReason,
    MCPServerStdio,
    ResumeToolMissingError,
    ToolContext,
    build_worker,
    tool,
)
from durable_agents.activities.keys import idempotency_key
from durable_agents.checkpoint import Role
from tests.conftest import session_id
from tests.mcp.agents import http_server, records, stdio_server


def _results(messages) -> dict[str, object]:
    return {m.tool_name: m for m in messages if m.role == Role.TOOL}


async def _history_bytes(env, sid: str) -> bytes:
    history = await env.client.get_workflow_handle(sid).fetch_history()
    return b"".join(e.SerializeToString() for e in history.events)


def _store_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("store.db*")))


async def test_a_model_calls_stdio_mcp_tools_and_reads_their_results(run_worker, store, record, env, tmp_path):
    secret = "env-SECRET-7d1f"
    server = stdio_server(record, env={"TEST_SECRET_ENV": secret}, safe_to_retry={"search"})
    agent = Agent(name="mcp-stdio", model="scripted:mcp-echo-search", mcp_servers=[server])
    sid = session_id()
    async with run_worker([agent]) as client:
        result = await client.send("mcp-stdio", "Ask the server.", session_id=sid)
    assert result.finish_reason == FinishReason.STOP and result.text == "The server answered."
    results = _results(result.messages)
    assert json.loads(results["echo"].content) == {"result": "echo: hi"} and not results["echo"].is_error
    assert json.loads(results["search"].content) == {"result": ["result for durable"]}

    # the server got the model's call ids and the idempotency keys, in the request's _meta
    saved = store.load(sid)
    turn = next(m for m in saved.messages if m.role == Role.ASSISTANT and m.tool_calls)
    start = saved.messages.index(turn) + 1
    seen = records(record)
    assert [(r["tool"], r["meta"]) for r in seen] == [
        (
            c.name,
            {
                "durable-agents/idempotencyKey": idempotency_key(saved.header(), start + i),
                "durable-agents/toolCallId": c.id,
                "durable-agents/attempt": 1,
            },
        )
        for i, c in enumerate(turn.tool_calls)
    ]
    assert {r["secret_env"] for r in seen} == {secret}  # the definition's env reached the server…
    assert len({r["pid"] for r in seen}) == 1  # …one server process (a session kept by the worker)

    # the run's config records the listed tools by server name, with their options
    specs = {t.name: t for t in saved.run_config.tools}
    assert set(specs) == {"echo", "charge", "delete_file", "fail", "search"}
    assert (specs["search"].mcp_server, specs["search"].mcp_tool, specs["search"].safe_to_retry) == (
        "tools",
        "search",
        True,
    )
    assert not specs["echo"].safe_to_retry and specs["echo"].input_schema["required"] == ["text"]
    assert saved.fingerprint.tools and {t.name for t in saved.fingerprint.tools} == set(specs)
    # …and nothing of the definition but its name: no command, no env
    assert secret.encode() not in await _history_bytes(env, sid)
    assert secret.encode() not in _store_bytes(tmp_path) and str(Path(__file__).parent).encode() not in (
        await _history_bytes(env, sid)
    )


async def test_a_model_calls_an_mcp_tool_over_streamable_http(run_worker, store, http_mcp, env, tmp_path):
    url, record = http_mcp
    token = "Bearer http-SECRET-91ab"
    server = http_server(url, headers={"Authorization": token}, tool_prefix="web_", tools={"echo"})
    agent = Agent(name="mcp-http", model="scripted:mcp-prefixed", mcp_servers=[server])
    sid = session_id()
    async with run_worker([agent]) as client:
        result = await client.send("mcp-http", "Echo over HTTP.", session_id=sid)
    assert result.text == "Done over HTTP."
    assert json.loads(_results(result.messages)["web_echo"].content) == {"result": "echo: over http"}
    [seen] = records(record)
    assert seen["tool"] == "echo" and seen["authorization"] == token
    assert seen["meta"]["durable-agents/toolCallId"] == result.messages[-3].tool_calls[0].id
    saved = store.load(sid)
    assert [(t.name, t.mcp_tool, t.mcp_server) for t in saved.run_config.tools] == [("web_echo", "echo", "web")]
    assert token.encode() not in await _history_bytes(env, sid) and token.encode() not in _store_bytes(tmp_path)


async def test_an_approval_gated_mcp_tool_pauses_and_runs_once_approved(run_worker, record):
    server = stdio_server(record, needs_approval={"delete_file"})
    agent = Agent(name="mcp-gated", model="scripted:mcp-gated", mcp_servers=[server])
    approved, rejected = session_id(), session_id()
    async with run_worker([agent]) as client:
        paused = await client.send("mcp-gated", "Delete it.", session_id=approved)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        pending = await client.pending_approval(approved)
        assert (pending.tool_name, pending.arguments) == ("delete_file", {"path": "/tmp/x"})
        assert records(record, "delete_file") == []  # nothing ran before the decision
        done = await client.approve(approved, paused.approval_id)
        assert done.finish_reason == FinishReason.STOP and done.text == "Deleted."
        assert json.loads(_results(done.messages)["delete_file"].content) == {"deleted": "/tmp/x"}

        paused = await client.send("mcp-gated", "Delete it.", session_id=rejected)
        done = await client.approve(rejected, paused.approval_id, approved=False, note="keep it")
    assert json.loads(_results(done.messages)["delete_file"].content)["note"] == "keep it"
    assert len(records(record, "delete_file")) == 1  # the approved call only


async def test_an_agents_policy_may_rule_on_its_mcp_tools(run_worker, record, store, tmp_path):
    """Issue 42: an agent's MCP tools are not in its definition (a run lists them when it
    starts); the worker lists them when a policy names one, so a rule may, checked against the
    server's input schema like any tool's. A server that cannot list leaves the policy refused."""
    server = stdio_server(record, needs_approval={"delete_file"})
    agent = Agent(name="mcp-ruled", model="scripted:mcp-gated", mcp_servers=[server])
    down = Agent(name="mcp-down", model="scripted:mcp-gated", mcp_servers=[stdio_server(record, fail=True)])
    tmp_files = {
        "name": "tmp files",
        "tools": ["delete_file"],
        "when": [{"arg": "path", "op": "starts-with", "value": "/tmp/"}],
    }
    sid = session_id()
    async with run_worker([agent, down]) as client:
        with pytest.raises(ConfigurationError, match="no argument 'file'"):
            wrong = {**tmp_files, "when": [{"arg": "file", "op": "starts-with", "value": "/tmp/"}]}
            await client.set_policy({"allow": [wrong]}, agent="mcp-ruled")
        with pytest.raises(ConfigurationError, match="no tool 'remove_file'"):
            await client.set_policy({"allow": [{**tmp_files, "tools": ["remove_file"]}]}, agent="mcp-ruled")
        with pytest.raises(ConfigurationError, match="could not be listed"):
            await client.set_policy({"allow": [tmp_files]}, agent="mcp-down")
        stored = await client.set_policy({"allow": [tmp_files]}, agent="mcp-ruled", by="ops")
        assert stored.version == 1
        done = await client.send("mcp-ruled", "Delete it.", session_id=sid)  # no person asked
    assert done.finish_reason == FinishReason.STOP and done.text == "Deleted."
    [decision] = store.load(sid).decisions
    assert (decision.source, decision.rule, decision.tool_name) == ("allow-rule", "tmp files", "delete_file")
    assert len(records(record, "delete_file")) == 1


async def test_mcp_errors_and_invalid_arguments_become_error_results(run_worker, record):
    agent = Agent(name="mcp-errors", model="scripted:mcp-errors", mcp_servers=[stdio_server(record)])
    async with run_worker([agent]) as client:
        result = await client.send("mcp-errors", "Try things.", session_id=session_id())
    assert result.finish_reason == FinishReason.STOP and result.text == "Recovered."
    tool_results = [m for m in result.messages if m.role == Role.TOOL]
    assert [m.is_error for m in tool_results] == [True, True, True]
    failed, echo, charge = (json.loads(m.content) for m in tool_results)
    assert failed == {"error": "Error executing tool fail: cannot do it: no disk"}  # the server's isError text
    assert echo["error"] == "invalid arguments for echo" and "5 is not of type 'string'" in echo["details"][0]["msg"]
    assert "'amount' is a required property" in charge["details"][0]["msg"]
    assert [r["tool"] for r in records(record)] == ["fail"]  # invalid calls never reached the server


async def test_a_changed_server_tool_list_is_drift_on_resume(env, store, task_queue, record):
    """Paused on a gated ``charge`` call, the runs' workflows are gone; the worker that resumes
    them has a server whose ``search`` takes a new argument (drift: reported, or refused), or
    one that no longer has ``charge`` (the pending call's tool is missing)."""
    sid, strict, gone = session_id(), session_id(), session_id()
    servers = {v: stdio_server(record, variant=v, needs_approval={"charge"}) for v in ("v1", "v2")}
    servers["v3"] = stdio_server(record, variant="v3")  # (naming a tool the server lacks is refused)

    def agent(variant: str, name: str, drift: str = "warn") -> Agent:
        # agents with one server definition share one server process per worker
        model = "scripted:mcp-search-then-charge"
        return Agent(name=name, model=model, mcp_servers=[servers[variant]], on_agent_drift=drift)

    client = AgentClient(env.client, store, task_queue)
    names = {sid: "mcp-drift", strict: "mcp-strict", gone: "mcp-gone"}
    before = [agent("v1", name) for name in names.values()]
    async with build_worker(env.client, agents=before, store=store, task_queue=task_queue):
        for s, name in names.items():
            paused = await client.send(name, "Search, then charge.", session_id=s)
            assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
            await env.client.get_workflow_handle(s).terminate("the run is lost; the session stays paused")
    saved = {s: store.load(s) for s in names}
    after = [agent("v2", "mcp-drift"), agent("v2", "mcp-strict", "error"), agent("v3", "mcp-gone", "ignore")]
    async with build_worker(env.client, agents=after, store=store, task_queue=task_queue):
        done = await client.approve(sid)
        with pytest.raises(AgentDriftError, match="tools changed: search"):
            await client.approve(strict)
        with pytest.raises(ResumeToolMissingError, match=r"no longer has: charge \(call_"):
            await client.approve(gone)
    assert done.finish_reason == FinishReason.STOP and done.drift.tools_changed == ["search"]
    assert store.load(sid).fingerprint != saved[sid].fingerprint  # the run's own now: v2's list
    assert store.load(strict) == saved[strict] and store.load(gone) == saved[gone]  # refused before any write
    assert len(records(record, "charge")) == 1  # only the approved call of the drifted session ran


async def test_a_server_that_cannot_start_fails_the_run_at_once_naming_it(env, run_worker, record):
    broken = Agent(name="mcp-broken", model="scripted:mcp-echo-search", mcp_servers=[stdio_server(record, fail=True)])
    missing = Agent(
        name="mcp-missing",
        model="scripted:mcp-echo-search",
        mcp_servers=[MCPServerStdio(name="ghost", command="/no/such/mcp-server")],
    )
    sid, other = session_id(), session_id()
    async with run_worker([broken, missing]) as client:
        started = time.monotonic()
        with pytest.raises(ConfigurationError) as failed:
            await client.send("mcp-broken", "Hi.", session_id=sid)
        elapsed = time.monotonic() - started
        with pytest.raises(
            ConfigurationError, match=r"MCP server 'ghost' \(command '/no/such/mcp-server'\) cannot be started"
        ):
            await client.send("mcp-missing", "Hi.", session_id=other)
    message = str(failed.value)
    assert "MCP server 'tools' (command " in message and "exited or broke off before it answered" in message
    assert "refusing to start (--fail-at-start)" in message  # the server's own last words
    assert elapsed < 20, f"took {elapsed:.1f}s"
    history = await env.client.get_workflow_handle(sid).fetch_history()
    starts = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert len(starts) == 1 and starts[0].activity_task_started_event_attributes.attempt == 1  # not retried


class TextArgs(BaseModel):
    text: str


@tool
async def echo(args: TextArgs, ctx: ToolContext) -> str:
    """A local tool named like one of the server's."""
    return f"local: {args.text}"


async def test_a_tool_name_clash_is_refused_until_the_server_has_a_prefix(run_worker, record):
    clash = Agent(
        name="mcp-clash", model="scripted:mcp-local-and-prefixed", tools=[echo], mcp_servers=[stdio_server(record)]
    )
    prefixed = Agent(
        name="mcp-prefix",
        model="scripted:mcp-local-and-prefixed",
        tools=[echo],
        mcp_servers=[stdio_server(record, tool_prefix="srv_")],
    )
    twice = Agent(
        name="mcp-twice",
        model="scripted:mcp-echo-search",
        mcp_servers=[stdio_server(record, name="a"), stdio_server(record, name="b")],
    )
    typo = Agent(
        name="mcp-typo",
        model="scripted:mcp-echo-search",
        mcp_servers=[stdio_server(record, needs_approval={"delete_flie"})],
    )
    async with run_worker([clash, prefixed, twice, typo]) as client:
        with pytest.raises(
            ConfigurationError, match=r"'echo' belongs to both a local tool and MCP server 'tools'.*tool_prefix"
        ):
            await client.send("mcp-clash", "Hi.", session_id=session_id())
        with pytest.raises(ConfigurationError, match=r"'echo' belongs to both MCP server 'a'.*and MCP server 'b'"):
            await client.send("mcp-twice", "Hi.", session_id=session_id())
        with pytest.raises(ConfigurationError, match=r"has no tool named 'delete_flie' \(given in needs_approval\)"):
            await client.send("mcp-typo", "Hi.", session_id=session_id())
        result = await client.send("mcp-prefix", "Both echoes.", session_id=session_id())
    local_result, remote = (m.content for m in result.messages if m.role == Role.TOOL)
    assert local_result == "local: one" and json.loads(remote) == {"result": "echo: two"}
    assert [r["arguments"] for r in records(record)] == [{"text": "two"}]


@tool(needs_approval=lambda args, ctx: args.text == "risky")
async def note(args: TextArgs, ctx: ToolContext) -> str:
    """A local tool gated by its arguments (decided by the worker, in an activity)."""
    return f"noted: {args.text}"


async def test_an_mcp_gate_holds_in_a_turn_whose_other_gates_the_worker_decides(run_worker, record):
    server = stdio_server(record, needs_approval={"delete_file"})
    agent = Agent(name="mcp-mixed", model="scripted:mcp-mixed-gates", tools=[note], mcp_servers=[server])
    sid = session_id()
    async with run_worker([agent]) as client:
        paused = await client.send("mcp-mixed", "Note, then delete.", session_id=sid)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        assert (await client.pending_approval(sid)).tool_name == "delete_file"
        assert records(record, "delete_file") == []
        done = await client.approve(sid, paused.approval_id)
    assert done.text == "Both done." and len(records(record, "delete_file")) == 1
