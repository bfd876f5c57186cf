"""Bounded model context (issue 13, item 2), end to end on the dev server: the official
OpenAI SDK against a wire fake records what the provider received, a worker subprocess
is SIGKILLed after a summary is stored. The store keeps every message; requests carry
what the agent's context policy keeps, and `show --as-sent` prints exactly that."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from durable_agents import Agent, AgentClient, Hooks, KeepLastTurns, SummarizeOlder, TokenBudget
from durable_agents.checkpoint import FinishReason, Role, SqliteStore
from durable_agents.checkpoint.context import SUMMARY_HEADING, estimate_tokens, sent_messages, step_position
from durable_agents.checkpoint.format import Message
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.openai_chat import to_openai_params
from durable_agents.testing import CrashWindow, WorkerProcess, check_guarantees, read_records
from tests.conftest import session_id
from tests.context_agents import step_tool
from tests.fakes.llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parents[1]
CHAT = "/v1/chat/completions"
INSTRUCTIONS = "You work in steps."
TASK = "steps=12"


@pytest.fixture
def llm(monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        yield server


def working_model(llm: FakeLLMServer, turns: int) -> list[int]:
    """The fake model calls ``step_tool`` twice a turn (ids reused every turn, as compatible
    servers do) for ``turns`` turns, then answers; a summary request (no tools offered) gets
    a summary. Returns the list of summary requests' indexes, filled as they come."""
    lock, made, summaries = threading.Lock(), [0], []

    def respond(request: dict[str, Any]):
        with lock:
            if "tools" not in request:
                summaries.append(made[0])
                return llm.openai.text(f"SUMMARY #{len(summaries)}: steps were done")
            made[0] += 1
            n = made[0]
        if n > turns:
            return llm.openai.text("all done")
        calls = [("step_tool", {"n": n}, "call_0"), ("step_tool", {"n": n + 100}, "call_1")]
        return llm.openai.tool_calls(calls, text=f"turn {n}")

    llm.openai.responder = respond
    return summaries


def _agent(name: str, policy) -> Agent:  # type: ignore[no-untyped-def]
    return Agent(
        name=name, model="openai:test-model", instructions=INSTRUCTIONS, tools=[step_tool], max_steps=50, context=policy
    )


def as_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """``messages`` as the OpenAI provider puts them on the wire."""
    return to_openai_params(ModelRequest(model="test-model", messages=messages))["messages"]


def assert_valid_request(wire: list[dict[str, Any]]) -> None:
    """The system prompt and the task always lead; every tool message answers the call of the
    assistant message before it, in order, and every call is answered."""
    assert wire[0] == {"role": "system", "content": INSTRUCTIONS}
    assert next(m for m in wire if m["role"] != "system") == {"role": "user", "content": TASK}
    pending: list[str] = []
    for m in wire:
        if m["role"] == "tool":
            assert pending and m["tool_call_id"] == pending.pop(0), wire
            continue
        assert not pending, f"calls {pending} were sent without their results"
        pending = [c["id"] for c in m.get("tool_calls") or []]
    assert not pending


def cli(store_path: Path, *args: str) -> tuple[int, str, str]:
    """``durable-agents --store … ARGS`` in this process (its own thread): exit code, stdout, stderr."""
    from durable_agents.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), ThreadPoolExecutor(1) as pool:
        code = pool.submit(main, ["--store", f"sqlite:///{store_path}", *args]).result()
    return code, out.getvalue(), err.getvalue()


def show_as_sent(store_path: Path, sid: str, step: int) -> dict[str, Any]:
    """``durable-agents show SID --as-sent STEP --json``."""
    code, out, err = cli(store_path, "show", sid, "--as-sent", str(step), "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "policy",
    [KeepLastTurns(3), TokenBudget(700)],
    ids=["keep-last-turns", "token-budget"],
)
async def test_a_long_session_sends_bounded_requests_and_the_store_keeps_everything(
    policy, llm, run_worker, store, tmp_path
):  # type: ignore[no-untyped-def]
    turns = 14
    working_model(llm, turns)
    sid = session_id()
    async with run_worker([_agent("ctx-bounded", policy)]) as client:
        result = await client.send("ctx-bounded", TASK, session_id=sid)
    assert result.finish_reason == FinishReason.STOP and result.text == "all done"

    stored = store.load(sid).messages
    assert len(stored) == 2 + turns * 3 + 1  # everything: system, task, each turn with its two results, the answer
    bodies = llm.bodies(CHAT)
    assert len(bodies) == turns + 1
    for step, body in enumerate(bodies, 1):
        wire = body["messages"]
        assert_valid_request(wire)
        if isinstance(policy, KeepLastTurns):
            assert sum(1 for m in wire if m["role"] == "assistant") == min(step - 1, 3)
        else:
            sent = sent_messages(stored, step_position(stored, step))
            assert sum(estimate_tokens(m) for m in sent) <= 700
        # what `show --as-sent` rebuilds from the checkpoint is what the provider received
        assert as_wire(sent_messages(stored, step_position(stored, step))) == wire
    assert len(bodies[-1]["messages"]) < len(stored) / 3  # bounded, while the session grew
    if isinstance(policy, KeepLastTurns):
        assert len(bodies[-1]["messages"]) == len(bodies[-4]["messages"]) == 2 + 3 * 3  # flat past the policy

    shown = show_as_sent(tmp_path / "store.db", sid, turns + 1)
    assert shown["step"] == turns + 1 and shown["window"]["ranges"][0] == [0, 2]
    assert as_wire([Message.model_validate(m) for m in shown["messages"]]) == bodies[-1]["messages"]
    code, out, _ = cli(tmp_path / "store.db", "show", sid, "--as-sent", "2")
    assert (
        code == 0 and out.splitlines()[0] == "step 2 (message 5) was sent 5 messages, cut by the run's context policy:"
    )
    assert "user       steps=12" in out
    code, _, err = cli(tmp_path / "store.db", "show", sid, "--as-sent", "99")
    assert code == 2 and f"has {turns + 1} steps, no step 99" in err  # as for an unknown session


async def test_summarize_older_stores_each_summary_once_and_sends_it_in_place_of_older_turns(
    llm, run_worker, store, tmp_path
):  # type: ignore[no-untyped-def]
    turns = 14
    summaries = working_model(llm, turns)
    sid = session_id()
    async with run_worker([_agent("ctx-summary", SummarizeOlder(max_turns=4, keep_turns=2))]) as client:
        result = await client.send("ctx-summary", TASK, session_id=sid)
    assert result.finish_reason == FinishReason.STOP and result.text == "all done"

    checkpoint = store.load(sid)
    stored = checkpoint.messages
    kept = [m for m in stored if m.summary is None]
    assert len(kept) == 2 + turns * 3 + 1  # nothing dropped from the store
    stored_summaries = [(i, m) for i, m in enumerate(stored) if m.summary is not None]
    assert len(stored_summaries) == len(summaries) >= 3  # one request per stored summary, none again
    assert [m.content for _, m in stored_summaries] == [
        f"SUMMARY #{n}: steps were done" for n in range(1, len(summaries) + 1)
    ]
    assert checkpoint.context_summary == stored_summaries[-1][0]
    for (at, summary), (before, _) in zip(stored_summaries[1:], stored_summaries, strict=False):
        assert summary.summary.previous == before and summary.summary.start == 1
        assert stored[at + 1].role == Role.ASSISTANT  # stored where the turn went, the turn after it
    assert result.usage.requests == turns + 1 + len(summaries)  # summaries are paid requests too

    bodies = [b for b in llm.bodies(CHAT) if "tools" in b]
    assert len(bodies) == turns + 1
    for step, body in enumerate(bodies, 1):
        wire = body["messages"]
        assert_valid_request(wire)
        assert sum(1 for m in wire if m["role"] == "assistant") <= 4
        assert as_wire(sent_messages(stored, step_position(stored, step))) == wire
    last = bodies[-1]["messages"]
    assert last[1]["role"] == "system" and last[1]["content"].startswith(SUMMARY_HEADING)
    assert last[1]["content"].endswith(stored_summaries[-1][1].content)
    shown = show_as_sent(tmp_path / "store.db", sid, turns + 1)
    assert as_wire([Message.model_validate(m) for m in shown["messages"]]) == last
    # the summary request read the previous summary and the turns it replaces, as text
    summary_bodies = [b for b in llm.bodies(CHAT) if "tools" not in b]
    assert "<previous-summary>\nSUMMARY #1" in summary_bodies[1]["messages"][1]["content"]


NEW_INSTRUCTIONS = "You work in steps, and say so."


@pytest.mark.parametrize(
    "policy",
    [None, KeepLastTurns(3), TokenBudget(700), SummarizeOlder(max_turns=4, keep_turns=2)],
    ids=["no-policy", "keep-last-turns", "token-budget", "summarize-older"],
)
async def test_changed_instructions_are_sent_from_the_next_request_on_in_place_of_the_first(
    policy, llm, run_worker, store
):  # type: ignore[no-untyped-def]
    """A session continued by a redeployed agent whose instructions changed: every request of the
    new run carries the new instructions first and never the old ones, the transcript records the
    change once (before the run's first turn), and `show --as-sent` rebuilds each request."""
    sid = session_id()
    working_model(llm, 6)
    async with run_worker([_agent("ctx-redeploy", policy)]) as client:
        first = await client.send("ctx-redeploy", TASK, session_id=sid)
    assert first.finish_reason == FinishReason.STOP
    runs_first = len([b for b in llm.bodies(CHAT) if "tools" in b])
    working_model(llm, 6)
    redeployed = dataclasses.replace(_agent("ctx-redeploy", policy), instructions=NEW_INSTRUCTIONS)
    async with run_worker([redeployed]) as client:
        second = await client.send("ctx-redeploy", "steps=6 more", session_id=sid)
    assert second.finish_reason == FinishReason.STOP

    checkpoint = store.load(sid)
    stored = checkpoint.messages
    bodies = [b for b in llm.bodies(CHAT) if "tools" in b]
    for step, body in enumerate(bodies, 1):
        wire = body["messages"]
        prompt = INSTRUCTIONS if step <= runs_first else NEW_INSTRUCTIONS
        assert wire[0] == {"role": "system", "content": prompt}, step
        others = [m["content"] for m in wire[1:] if m["role"] == "system"]
        assert all(c.startswith(SUMMARY_HEADING) for c in others), (step, others)  # summaries only
        assert as_wire(sent_messages(stored, step_position(stored, step))) == wire, step
    assert runs_first < len(bodies)
    changes = [i for i, m in enumerate(stored) if m.instructions_change is not None]
    assert changes == [checkpoint.instructions_at] and stored[changes[0]].content == NEW_INSTRUCTIONS
    assert stored[0].content == INSTRUCTIONS  # the first instructions stay where they were
    assert stored[changes[0] - 1].content == "steps=6 more"  # recorded before the run's first turn
    assert stored[changes[0] + (2 if stored[changes[0] + 1].summary else 1)].role == Role.ASSISTANT
    assert checkpoint.run_config.instructions == NEW_INSTRUCTIONS


async def test_hooks_see_summary_requests_so_a_redaction_hook_covers_what_is_summarised(llm, run_worker, store):  # type: ignore[no-untyped-def]
    """A summary request carries older turns to a model (maybe another one): ``before_model``
    sees it (``purpose="summary"``) and ``after_model`` its answer, before it is stored. Before,
    a hook that redacts what is sent did not see summaries, so the secret reached the model."""
    card = "4111111111111111"
    lock, made, purposes = threading.Lock(), [0], []

    def respond(request: dict[str, Any]):
        with lock:
            if "tools" not in request:
                return llm.openai.text("SUMMARY: steps were done")
            made[0] += 1
            n = made[0]
        if n > 8:
            return llm.openai.text("all done")
        return llm.openai.tool_calls([("step_tool", {"n": n}, "call_0")], text=f"turn {n}, card {card}")

    def redact(request: ModelRequest) -> ModelRequest:
        purposes.append(request.purpose)
        messages = [
            m.model_copy(update={"content": (m.content or "").replace(card, "[card]")}) for m in request.messages
        ]
        return request.model_copy(update={"messages": messages})

    def checked(turn: Message) -> Message:
        return turn.model_copy(update={"content": f"{turn.content} (checked)"}) if not turn.tool_calls else turn

    llm.openai.responder = respond
    agent = Agent(
        name="ctx-hooked",
        model="openai:test-model",
        instructions=INSTRUCTIONS,
        tools=[step_tool],
        max_steps=50,
        context=SummarizeOlder(max_turns=4, keep_turns=2),
        hooks=Hooks(before_model=redact, after_model=checked),
    )
    async with run_worker([agent]) as client:
        result = await client.send("ctx-hooked", TASK, session_id=(sid := session_id()))
    assert result.finish_reason == FinishReason.STOP
    summary_bodies = [b for b in llm.bodies(CHAT) if "tools" not in b]
    assert summary_bodies and "summary" in purposes
    assert all(card not in json.dumps(b) for b in llm.bodies(CHAT)), "a request carried the card number"
    stored = [m for m in store.load(sid).messages if m.summary is not None]
    assert stored and all(m.content == "SUMMARY: steps were done (checked)" for m in stored)


async def test_a_worker_killed_after_a_summary_is_stored_does_not_make_it_again(env, tmp_path):  # type: ignore[no-untyped-def]
    folder = tmp_path / "w"
    worker = WorkerProcess(
        ["tests.context_agents:ALL"],
        address=env.client.service_client.config.target_host,
        store_url=f"sqlite:///{folder / 'store.db'}",
        task_queue=f"ctx-crash-{session_id()}",
        log_dir=folder / "logs",
        crash_window=CrashWindow.AFTER_CONTEXT_SUMMARY_STORED,
        cwd=ROOT,
    )
    try:
        await worker.start_ready(env.client)
        store = SqliteStore(folder / "store.db")
        client = AgentClient(env.client, store, worker.task_queue)
        sid = session_id()
        handle = await client.start("ctx-summarizing", "steps=10", session_id=sid)
        assert await worker.wait_exit(timeout=60) == -signal.SIGKILL, worker.log()[-2000:]
        [kill] = worker.kills()
        assert kill["window"] == CrashWindow.AFTER_CONTEXT_SUMMARY_STORED.value and kill["session"] == sid
        await worker.start_ready(env.client)
        result = await asyncio.wait_for(client.result(sid, handle), 90)
        assert result.finish_reason == FinishReason.STOP and result.text == "done after 10"

        checkpoint = store.load(sid)
        at = [i for i, m in enumerate(checkpoint.messages) if m.summary is not None]
        assert kill["position"] in at and len(at) >= 2
        calls = [r for r in read_records(folder / "logs", "provider_calls.jsonl") if r["session"] == sid]
        made = [r["position"] for r in calls if r["model"] == "scripted:ctx-summarizer"]
        assert made == at  # each summary made once, the killed worker's too: the fresh one reused it
        summary = check_guarantees(checkpoint, folder / "logs", folder / "logs")
        assert summary.regenerated_uncommitted == 0 and len({r["pid"] for r in calls}) == 2
        store.close()
    finally:
        worker.stop()
