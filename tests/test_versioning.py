"""Versioned deploys that respect drift: two real workers of one Worker Deployment (two
builds whose agents differ) on one task queue of the real dev server.

A session paused on the old build and approved after the new build became current runs
its tool on the old build's worker (also when its paused run's workflow had closed); a
session migrated with ``migrate`` runs on the new build with the drift recorded; ``migrate``
refuses an ``on_agent_drift="error"`` agent and leaves it where it was; an auto-upgrade
agent's session moves with the current build."""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from collections.abc import Callable

import pytest
from pydantic import BaseModel
from temporalio.service import RPCError

from durable_agents import (
    Agent,
    AgentClient,
    AgentDriftError,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    build_worker,
    register_script,
    tool,
)
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.fingerprint import AgentDrift
from durable_agents.cli import main as cli_main
from durable_agents.versioning import deployment_config, derive_build_id, set_current_build

SCRIPT = "versioned-charge"
register_script(
    SCRIPT,
    [
        ScriptedTurn(text="Charging.", tool_calls=[ScriptedToolCall(name="charge", arguments={"amount": 5})]),
        ScriptedTurn(text="Charged."),
    ],
)

RAN_ON: dict[str, list[str]] = {}
"""session id -> the builds whose `charge` tool ran for it, in order."""


class Charge(BaseModel):
    amount: int


def charge_tool(build: str):
    @tool(needs_approval=True, name="charge")
    async def charge(args: Charge, ctx: ToolContext) -> dict:
        RAN_ON.setdefault(ctx.session_id, []).append(build)
        return {"charged": args.amount, "build": build}

    return charge


def agents_of(build: str) -> list[Agent]:
    """The build's agents: same names and tools as the other build's, other instructions."""
    common = {"model": f"scripted:{SCRIPT}", "tools": [charge_tool(build)], "instructions": f"You charge ({build})."}
    return [
        Agent(name="vbooker", **common),
        Agent(name="vstrict", on_agent_drift="error", **common),
        Agent(name="vroamer", versioning="auto-upgrade", **common),
    ]


async def make_current(client, deployment: str, build_id: str) -> None:
    """Set the current build once Temporal has seen its worker poll."""
    for _ in range(100):
        try:
            return await set_current_build(client, deployment, build_id)
        except RPCError:
            await asyncio.sleep(0.1)
    await set_current_build(client, deployment, build_id)


def cli_runner(env, store, task_queue: str) -> Callable:
    flags = ["--address", env.client.service_client.config.target_host, "--task-queue", task_queue]
    flags += ["--store", f"sqlite:///{store.path}"]

    async def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()

        def call() -> int:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    return cli_main([*flags, *argv])
                except SystemExit as e:  # argparse's usage errors
                    return int(e.code or 0)

        code = await asyncio.to_thread(call)  # the workers of this event loop keep running
        return code, out.getvalue(), err.getvalue()

    return run


async def test_pinned_sessions_stay_and_migrated_ones_move_with_drift_recorded(env, store, task_queue):
    deployment = f"agents-{uuid.uuid4().hex[:8]}"
    client = AgentClient(env.client, store, task_queue)
    cli = cli_runner(env, store, task_queue)
    old = build_worker(env.client, agents=agents_of("b1"), store=store, task_queue=task_queue,
                       deployment=deployment, build_id="b1")  # fmt: skip
    new = build_worker(env.client, agents=agents_of("b2"), store=store, task_queue=task_queue,
                       deployment=deployment, build_id="b2")  # fmt: skip
    v1 = {a.name: a.fingerprint().digest for a in agents_of("b1")}
    v2 = {a.name: a.fingerprint().digest for a in agents_of("b2")}
    sessions = {k: f"v-{k}-{uuid.uuid4().hex[:8]}" for k in ("live", "closed", "migrated", "strict", "roamer", "after")}
    async with old:
        await make_current(env.client, deployment, "b1")
        for key, agent in (("live", "vbooker"), ("closed", "vbooker"), ("migrated", "vbooker"),
                           ("strict", "vstrict"), ("roamer", "vroamer")):  # fmt: skip
            paused = await client.send(agent, "charge 5", session_id=sessions[key])
            assert paused.finish_reason == "awaiting-approval"
            assert store.load_header(sessions[key]).build.canonical == f"{deployment}.b1"
        # a paused run whose workflow closed (terminated, say): the next run must still start on b1
        await env.client.get_workflow_handle(sessions["closed"]).terminate(reason="test: the paused run closes")

        async with new:  # the deploy: build b2 runs beside b1, then becomes current
            await make_current(env.client, deployment, "b2")

            for key in ("live", "closed"):
                done = await client.approve(sessions[key])
                assert done.finish_reason == "stop"
                assert RAN_ON[sessions[key]] == ["b1"], key  # the old build's worker ran the tool
                assert done.drift is None
                header = store.load_header(sessions[key])
                assert header.fingerprint.digest == v1["vbooker"] and header.build.build_id == "b1"
                assert not header.migrations

            # a new session starts on the current build
            fresh = await client.send("vbooker", "charge 5", session_id=sessions["after"])
            assert store.load_header(sessions["after"]).build.build_id == "b2"
            await client.approve(sessions["after"], fresh.approval_id)
            assert RAN_ON[sessions["after"]] == ["b2"]

            # migrate refuses an on_agent_drift="error" agent: nothing moves, nothing is written
            before = store.load_header(sessions["strict"])
            code, out, err = await cli("migrate", sessions["strict"], "--to", "b2")
            assert code == 1, (out, err)
            assert "on_agent_drift='error'" in err and "instructions changed" in err and "not migrated" in err
            with pytest.raises(AgentDriftError):
                await client.migrate(sessions["strict"], "b2")
            assert store.load_header(sessions["strict"]) == before
            code, _, err = await cli("migrate", sessions["strict"], "--to", "b9")
            assert code == 2 and "has no build 'b9' (builds: " in err and "b1" in err and "b2" in err
            strict = await client.approve(sessions["strict"])  # still paused, on b1
            assert strict.finish_reason == "stop" and RAN_ON[sessions["strict"]] == ["b1"]

            # migrate moves a paused session to b2, with the drift recorded
            code, out, err = await cli("migrate", sessions["migrated"], "--to", "b2")
            assert code == 0, (out, err)
            assert f"to {deployment}.b2" in out and "instructions changed" in out
            header = store.load_header(sessions["migrated"])
            assert header.build.canonical == f"{deployment}.b2"
            assert header.fingerprint.digest == v2["vbooker"]
            (migration,) = header.migrations
            assert (migration.from_build, migration.to_build) == (f"{deployment}.b1", f"{deployment}.b2")
            assert AgentDrift.model_validate(migration.drift).instructions
            code, out, _ = await cli("show", sessions["migrated"])
            assert code == 0 and f"build     {deployment}.b2 (pinned)   migrated from {deployment}.b1" in out
            done = await client.approve(sessions["migrated"])
            assert done.finish_reason == "stop"
            assert RAN_ON[sessions["migrated"]] == ["b2"]  # the new build's worker ran the tool
            assert store.load_header(sessions["migrated"]).build.build_id == "b2"

            # an auto-upgrade agent's session moves with the current build
            roamed = await client.approve(sessions["roamer"])
            assert roamed.finish_reason == "stop" and RAN_ON[sessions["roamer"]] == ["b2"]

            # usage errors: one clear line each
            code, _, err = await cli("migrate", sessions["migrated"])
            assert code == 2 and "--to" in err
            code, _, err = await cli("migrate", "no-such-session", "--to", "b2")
            assert code == 2 and "no session 'no-such-session'" in err
            code, _, err = await cli("migrate", sessions["live"], "--to", "b2")  # finished
            assert code == 2 and "is finished" in err


def test_build_ids_derive_from_the_agents_fingerprints():
    b1, b2 = agents_of("b1"), agents_of("b2")
    derived = derive_build_id(b1)
    assert len(derived) == 12 and int(derived, 16) >= 0
    assert derive_build_id(list(reversed(agents_of("b1")))) == derived  # same agents, any order
    assert derive_build_id(b2) != derived  # other instructions: another build
    assert derive_build_id(b1[:1]) != derived
    config = deployment_config("agents", None, b1)
    assert config.version.build_id == derived and config.use_worker_versioning
    assert deployment_config("agents", "v7", b1).version.build_id == "v7"
    with pytest.raises(ConfigurationError, match="without '.'"):
        deployment_config("my.agents", None, b1)


def teller_of(build: str) -> Agent:
    """An agent on the real Anthropic SDK (against the fake API) whose instructions name its build."""
    return Agent(
        name="vteller", model="anthropic:test-model", instructions=f"You charge ({build}).", tools=[charge_tool(build)]
    )


def system_prompt(body: dict) -> str | None:
    """The system prompt of a Messages API request body (a string, or text blocks)."""
    system = body.get("system")
    if system is None or isinstance(system, str):
        return system
    return "".join(block["text"] for block in system)


async def test_a_migrated_session_is_sent_the_new_builds_instructions_as_its_checkpoint_records(
    env, store, task_queue, monkeypatch
):
    """After `migrate --to b2`, the next request carries b2's instructions (not the session's first
    system prompt); the transcript records the change where it took effect, and `show --as-sent`
    prints what each request carried."""
    from durable_agents.checkpoint import Role
    from durable_agents.checkpoint.context import sent_messages, step_position
    from durable_agents.checkpoint.fork import Patch, fork
    from durable_agents.testing import check_guarantees
    from tests.fakes.llm_server import FakeLLMServer

    deployment = f"agents-{uuid.uuid4().hex[:8]}"
    sid = f"v-teller-{uuid.uuid4().hex[:8]}"
    client = AgentClient(env.client, store, task_queue)
    cli = cli_runner(env, store, task_queue)
    with FakeLLMServer() as llm:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", llm.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        llm.anthropic.reply_tool_calls([("charge", {"amount": 5}, "toolu_1")], text="Charging.")
        llm.anthropic.reply_tool_calls([("charge", {"amount": 7}, "toolu_2")], text="And once more.")
        llm.anthropic.reply_text("Charged twice.")
        old = build_worker(env.client, agents=[teller_of("b1")], store=store, task_queue=task_queue,
                           deployment=deployment, build_id="b1")  # fmt: skip
        new = build_worker(env.client, agents=[teller_of("b2")], store=store, task_queue=task_queue,
                           deployment=deployment, build_id="b2")  # fmt: skip
        async with old:
            await make_current(env.client, deployment, "b1")
            paused = await client.send("vteller", "charge 5", session_id=sid)
            assert paused.finish_reason == "awaiting-approval"
            async with new:
                await make_current(env.client, deployment, "b2")
                code, out, err = await cli("migrate", sid, "--to", "b2")
                assert code == 0 and "instructions changed" in out, (out, err)
                paused = await client.approve(sid)  # the call runs on b2, then turn 2 asks for another
                assert paused.finish_reason == "awaiting-approval"
                done = await client.approve(sid)
                assert done.finish_reason == "stop" and done.text == "Charged twice."
        sent = [system_prompt(body) for body in llm.bodies("/v1/messages")]

    assert sent == ["You charge (b1).", "You charge (b2).", "You charge (b2)."]
    checkpoint = store.load(sid)
    assert checkpoint.run_config.instructions == "You charge (b2)."
    systems = [(i, m.content) for i, m in enumerate(checkpoint.messages) if m.role == Role.SYSTEM]
    turn2 = step_position(checkpoint.messages, 2)
    # the first prompt stays where it was; the change is recorded right before the turn it took effect in
    assert systems == [(0, "You charge (b1)."), (turn2 - 1, "You charge (b2).")]
    assert checkpoint.messages[turn2 - 2].role == Role.TOOL  # after the migrated call's result
    assert checkpoint.instructions_at == turn2 - 1
    for step, prompt in ((1, "You charge (b1)."), (2, "You charge (b2)."), (3, "You charge (b2).")):
        as_sent = sent_messages(checkpoint.messages, step_position(checkpoint.messages, step))
        assert [m.content for m in as_sent if m.role == Role.SYSTEM] == [prompt], step
    code, out, _ = await cli("show", sid, "--as-sent", "2")
    assert code == 0 and "You charge (b2)." in out and "You charge (b1)." not in out
    code, out, _ = await cli("show", sid)
    assert code == 0 and "system     (instructions changed) You charge (b2)." in out
    check_guarantees(checkpoint)  # a valid transcript: the change is no stray system message
    # a fork knows where its own transcript's newest change is (step 1's newest save has it:
    # the change was recorded before turn 2), and has none when its patch drops it
    assert fork(store, sid, 1).checkpoint.instructions_at == turn2 - 1
    assert fork(store, sid, 3).checkpoint.instructions_at == turn2 - 1
    dropped = Patch(messages=lambda ms: [m for m in ms if m.instructions_change is None])
    assert fork(store, sid, 3, dropped).checkpoint.instructions_at is None
