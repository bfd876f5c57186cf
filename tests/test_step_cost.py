"""Per-step cost on a real worker does not grow with the session (issue 13, item 1):
store round trips and messages parsed per step are the same at step 10 and step 60,
and the worker's transcript cache never serves a stale transcript (an external
rewrite, a session deleted and forked into its id, another worker's steps)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.worker import Worker

from durable_agents import (
    Agent,
    AgentClient,
    DurableAgentsPlugin,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    register_script,
    tool,
)
from durable_agents.activities.transcript_cache import TranscriptCache
from durable_agents.checkpoint import Message, SqliteStore
from durable_agents.checkpoint.fork import fork
from durable_agents.checkpoint.format import Role
from tests.conftest import session_id
from tests.counting_store import CountingStore

PAD = "x" * 1000  # ~1 KB messages, as in the benches


class Count(BaseModel):
    n: int


@tool(safe_to_retry=True)
async def echo(args: Count, ctx: ToolContext) -> dict:
    return {"n": args.n, "pad": PAD}


SEEN: dict[str, list[list[Message]]] = {}
"""What the model was sent, by session id: one transcript per model turn."""


def counting_script(messages: list[Message]) -> ScriptedTurn:
    """O(1) in the transcript: counts from the last tool result, and says ``WRONG`` when the
    transcript is not the one the store holds (each result follows its call, in order)."""
    last = messages[-1]
    if last.role == Role.TOOL:
        n = json.loads(last.content or "{}")["n"] + 1
        call = messages[-2]
        if call.role != Role.ASSISTANT or not call.tool_calls or call.tool_calls[0].id != last.tool_call_id:
            return ScriptedTurn(text="WRONG: a result without its call")
    else:
        n = 0
    if n >= _limit(messages):
        return ScriptedTurn(text=f"done after {n}")
    return ScriptedTurn(text=f"step {n} {PAD}", tool_calls=[ScriptedToolCall(name="echo", arguments={"n": n})])


def _limit(messages: list[Message]) -> int:
    """The run's input says how many steps it takes (``steps=N``; runs here are under 100 steps)."""
    for m in reversed(messages[-200:]):
        if m.role == Role.USER and (m.content or "").startswith("steps="):
            return int((m.content or "").split("=")[1].split()[0])
    return 0


def recording_script(messages: list[Message]) -> ScriptedTurn:
    SEEN.setdefault("last", []).append(list(messages))
    return ScriptedTurn(text="noted")


register_script("step-cost", counting_script)
register_script("step-cost-recorder", recording_script)


def counting_agent(local: bool) -> Agent:
    return Agent(name="step-cost", model="scripted:step-cost", tools=[echo], max_steps=10_000, local_activities=local)


recorder = Agent(name="recorder", model="scripted:step-cost-recorder", instructions="be brief")


@contextlib.asynccontextmanager
async def worker(
    env, store, agents: list[Agent], queue: str, cache: TranscriptCache | None = None
) -> AsyncIterator[None]:  # type: ignore[no-untyped-def]
    plugin = DurableAgentsPlugin(agents=agents, store=store, transcript_cache=cache or TranscriptCache())
    async with Worker(env.client, task_queue=queue, plugins=[plugin]):
        yield


@pytest.mark.parametrize("local", [False, True], ids=["regular", "local"])
async def test_store_work_per_step_does_not_grow_with_the_session(env, tmp_path: Path, local: bool) -> None:
    workers_store = CountingStore(tmp_path / "s.db")
    clients_store = SqliteStore(tmp_path / "s.db")  # the client's reads are not the worker's
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    counts = {}
    async with worker(env, workers_store, [counting_agent(local)], queue):
        client = AgentClient(env.client, clients_store, queue)
        for steps in (10, 35, 60):
            workers_store.reset()
            result = await client.send("step-cost", f"steps={steps}", session_id=session_id())
            assert result.text == f"done after {steps}" and result.steps == steps + 1
            counts[steps] = (workers_store.round_trips(), workers_store.parsed, workers_store.transactions())
    (t10, p10, x10), (t35, p35, x35), (t60, p60, x60) = counts[10], counts[35], counts[60]
    # linear in the steps: the 25 steps from 35 to 60 cost what the 25 from 10 to 35 did
    assert t60 - t35 == t35 - t10, counts
    assert p60 - p35 == p35 - p10, counts
    assert x60 - x35 == x35 - x10, counts
    round_trips, parsed, transactions = (t60 - t35) / 25, (p60 - p35) / 25, (x60 - x35) / 25
    # a step: the transcript's new messages read, the turn stored; the call read with its start
    # recorded (one write), its result recorded. Before: 7 calls in 5 transactions, and earlier
    # 8 calls and the whole transcript parsed
    assert round_trips <= 4 and transactions <= 4 and parsed <= 3, (round_trips, transactions, parsed)


@pytest.mark.parametrize("rewrite", ["external-save", "delete-then-fork-into-the-id"])
async def test_the_next_turn_sees_a_transcript_rewritten_outside_the_worker(env, tmp_path: Path, rewrite: str) -> None:
    store, outside = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    queue, sid, other = f"tq-{uuid.uuid4().hex[:8]}", session_id(), session_id()
    cache = TranscriptCache()
    async with worker(env, store, [recorder], queue, cache):
        client = AgentClient(env.client, outside, queue)
        await client.send("recorder", "first question", session_id=sid)
        await client.send("recorder", "the other session's question", session_id=other)
        assert cache.sessions == 2  # both transcripts are cached by the worker
        if rewrite == "external-save":  # e.g. `durable-agents import` of an edited export
            cp = outside.load(sid)
            assert cp is not None
            edited = [Message.user("rewritten question") if m.content == "first question" else m for m in cp.messages]
            outside.save(cp.model_copy(update={"messages": edited, "updated_at": None}))
            expected = "rewritten question"
        else:
            outside.delete(sid)
            fork(outside, other, 1, new_session_id=sid)
            expected = "the other session's question"
        SEEN.clear()
        await client.send("recorder", "next question", session_id=sid)
    [sent] = SEEN["last"]
    assert [m.content for m in sent if m.role == Role.USER] == [expected, "next question"]
    assert sent == outside.load_messages(sid)[: len(sent)]


async def test_a_worker_reads_the_steps_another_worker_added_to_its_cached_session(env, tmp_path: Path) -> None:
    first, second = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    client_store = SqliteStore(tmp_path / "s.db")
    queue, sid = f"tq-{uuid.uuid4().hex[:8]}", session_id()
    agent, cache = counting_agent(local=True), TranscriptCache()
    client = AgentClient(env.client, client_store, queue)
    async with worker(env, first, [agent], queue, cache):
        await client.send("step-cost", "steps=3", session_id=sid)
    async with worker(env, second, [agent], queue):  # the other worker, on the same store
        await client.send("step-cost", "steps=4", session_id=sid)
    held, misses = len(cache._entries[sid].messages), cache.misses
    async with worker(env, first, [agent], queue, cache):  # back on the first: its cache is 11 messages behind
        result = await client.send("step-cost", "steps=2", session_id=sid)
    assert result.text == "done after 2" and not any("WRONG" in (m.content or "") for m in result.messages)
    transcript = client_store.load_messages(sid)
    assert (held, len(transcript)) == (7, 24)  # it last read the transcript before its final turn
    assert cache.misses == misses  # every read of the run was of the new messages only
    assert cache._entries[sid].messages == transcript[:-1]  # what it holds is the store's (but the final turn)
