"""Results are keyed by their position in the transcript, never by the model's id
(compatible servers number calls call_0, call_1… in every turn), and every call
has an idempotency key of its own."""

from __future__ import annotations

import json

from pydantic import BaseModel

from durable_agents import (
    Agent,
    FinishReason,
    Patch,
    ScriptedToolCall,
    ScriptedTurn,
    ToolContext,
    register_script,
    tool,
)
from tests.conftest import session_id

SEEN: list[tuple[str, str, int]] = []
"""(tool_call_id, idempotency_key, n) of every execution."""


class N(BaseModel):
    n: int


@tool
async def record(args: N, ctx: ToolContext) -> dict:
    SEEN.append((ctx.tool_call_id, ctx.idempotency_key, args.n))
    return {"n": args.n}


def _reused_ids(messages) -> ScriptedTurn:
    """Two calls sharing one id per turn, and the same ids again in the next turn."""
    turns = sum(1 for m in messages if m.role == "assistant")
    if turns >= 2:
        return ScriptedTurn(text="done")
    base = 10 * (turns + 1)
    return ScriptedTurn(
        tool_calls=[ScriptedToolCall(id="call_0", name="record", arguments={"n": base + i}) for i in range(2)]
    )


register_script("reused-ids", _reused_ids)
agent = Agent(name="reuser", model="scripted:reused-ids", tools=[record])


async def test_every_call_runs_and_gets_its_own_result_whatever_its_id(run_worker):
    SEEN.clear()
    async with run_worker([agent]) as client:
        result = await client.send("reuser", "Go", session_id=session_id())
    assert result.finish_reason == FinishReason.STOP
    assert [n for _, _, n in SEEN] == [10, 11, 20, 21]  # none skipped, none given another's result
    results = [json.loads(m.content)["n"] for m in result.messages if m.role == "tool"]
    assert results == [10, 11, 20, 21]
    assert {tool_call_id for tool_call_id, _, _ in SEEN} == {"call_0"}  # the model's id, as given
    assert len({key for _, key, _ in SEEN}) == 4


async def test_idempotency_keys_differ_across_sessions_and_forks(run_worker, store):
    SEEN.clear()
    first, second = session_id(), session_id()
    async with run_worker([agent]) as client:
        await client.send("reuser", "Go", session_id=first)
        await client.send("reuser", "Go", session_id=second)
        fork = await client.fork(first, from_step=1, patch=Patch(messages=None))
        # the fork's turn 2 calls run again in the fork (same positions, same model ids)
        await client.resume(fork.session_id)
    keys = [key for _, key, _ in SEEN]
    assert len(keys) == 4 + 4 + 2 and len(set(keys)) == len(keys)
    assert store.load(fork.session_id).session_uid != store.load(first).session_uid
