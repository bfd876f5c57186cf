"""The raw Temporal loop the benches compare against: the least a Temporal agent loop does.

Per step one model-like activity (in: the last tool result, ~1 KB; out: a ~1 KB
turn with a tool call) and one tool-like activity (out: a ~1 KB result), as
regular or local activities. No store, no checkpoint, no guarantees beyond
Temporal's own. A module of its own so the workflow sandbox can import it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow

PAD = "x" * 1000


@dataclass
class RawRun:
    steps: int
    local: bool
    model_seconds: float = 0.0
    """The model-like activity's latency (``capacity.py``); 0: instant."""


@dataclass
class RawTurn:
    text: str
    tool_call: int | None


@activity.defn(name="raw-model-turn")
async def raw_model_turn(last_result: str) -> RawTurn:
    n = json.loads(last_result)["n"] + 1 if last_result.startswith("{") else 0
    return RawTurn(text=f"step {n} {PAD}", tool_call=n)


SLOW_MODEL_CALLS: list[tuple[str, float]] = []
"""(workflow id, ``time.time()``) of each ``raw_slow_model_turn`` in this process (``capacity.py``'s timeline)."""


@activity.defn(name="raw-slow-model-turn")
async def raw_slow_model_turn(last_result: str, seconds: float) -> RawTurn:
    """``raw_model_turn`` after ``seconds`` of waiting (a provider's latency)."""
    SLOW_MODEL_CALLS.append((activity.info().workflow_id, time.time()))
    await asyncio.sleep(seconds)
    return await raw_model_turn(last_result)


@activity.defn(name="raw-tool-call")
async def raw_tool_call(n: int) -> str:
    return json.dumps({"n": n, "pad": PAD})


@workflow.defn(name="RawAgentLoop")
class RawAgentLoop:
    @workflow.run
    async def run(self, run: RawRun) -> int:
        """``run.steps`` tool steps, then a last model turn; returns the model turns (steps + 1)."""
        last = "go"
        for step in range(run.steps + 1):
            if run.model_seconds:
                turn = await self._call(raw_slow_model_turn, [last, run.model_seconds], run.local)
            else:
                turn = await self._call(raw_model_turn, [last], run.local)
            if step == run.steps:
                return step + 1
            last = await self._call(raw_tool_call, [turn.tool_call], run.local)
        return run.steps + 1

    @staticmethod
    async def _call(fn, args: list, local: bool):  # type: ignore[no-untyped-def]
        timeout = timedelta(seconds=60)
        if local:
            return await workflow.execute_local_activity(fn, args=args, start_to_close_timeout=timeout)
        return await workflow.execute_activity(fn, args=args, start_to_close_timeout=timeout)
