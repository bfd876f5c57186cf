"""A gated call decided by the approval policy (an allow rule, a grant) against an ungated
call: the cost of one agent step (model turn + tool call), side by side on one warm worker.

    .venv/bin/python bench/approval_policy.py [--steps 30] [--runs 5] [--local]

Three agents, the same no-op tool: ``free`` (not gated), ``ruled`` (gated; an allow rule
approves every call) and ``granted`` (gated; a tool grant approves every call). Runs
alternate between them, each round in another order, so drift on the machine hits all three
alike. Issue 42's target: a rule- or grant-decided step costs at most 1.1x an ungated one.
Besides each agent's median, the median of the paired ratios (each run ÷ the ungated run of
its round, which cancels the host's drift between rounds) with its 95% interval.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel
from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import Message, SqliteStore
from durable_agents.checkpoint.approval_grants import Grant, GrantScope
from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.worker import build_worker


class Args(BaseModel):
    n: int


@tool
async def free_noop(args: Args, ctx: ToolContext) -> dict:
    return {"n": args.n}


@tool(needs_approval=True)
async def gated_noop(args: Args, ctx: ToolContext) -> dict:
    return {"n": args.n}


def script_for(steps: int, name: str):
    def play(messages: list[Message]) -> ScriptedTurn:
        turns = sum(1 for m in messages if m.role == "assistant")
        if turns >= steps - 1:
            return ScriptedTurn(text="done")
        return ScriptedTurn(text="t", tool_calls=[ScriptedToolCall(name=name, arguments={"n": turns})])

    return play


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--local", action="store_true", help="Agent(local_activities=True)")
    opts = parser.parse_args()
    register_script("bench-free", script_for(opts.steps, "free_noop"))
    register_script("bench-gated", script_for(opts.steps, "gated_noop"))
    made = dict(max_steps=opts.steps + 1, local_activities=opts.local)
    agents = [
        Agent(name="free", model="scripted:bench-free", tools=[free_noop], **made),
        Agent(name="ruled", model="scripted:bench-gated", tools=[gated_noop], **made),
        Agent(name="granted", model="scripted:bench-gated", tools=[gated_noop], **made),
    ]
    with tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        book, now = policy_book_for(store), datetime.now(UTC)
        allow = {"allow": [{"name": "all noops", "tools": ["gated_noop"]}]}
        book.set_policy(PolicyScope.of_agent("ruled"), allow, by="bench", now=now)
        scope = GrantScope(kind="agent", tool="gated_noop", agent="granted")
        book.add_grant(Grant(id="bench", scope=scope, created_by="bench", created_at=now - timedelta(seconds=1)))
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with build_worker(client, agents=agents, store=store, task_queue=queue):
            agent_client = AgentClient(client, store, queue)
            per_step: dict[str, list[float]] = {a.name: [] for a in agents}
            paired: dict[str, list[float]] = {a.name: [] for a in agents}  # ÷ the same round's ungated step
            cpu: dict[str, list[float]] = {a.name: [] for a in agents}
            for name in per_step:  # warm up
                await agent_client.send(name, "warm up", session_id=f"warm-{name}-{uuid.uuid4().hex[:6]}")
            names, last = list(per_step), {}
            for run in range(opts.runs):  # each round in another order: each agent takes each place alike
                for name in names[run % len(names) :] + names[: run % len(names)]:
                    last[name] = sid = f"{name}-{uuid.uuid4().hex[:8]}"
                    started, used = time.perf_counter(), time.process_time()
                    result = await agent_client.send(name, "go", session_id=sid)
                    assert result.finish_reason == "stop", result
                    per_step[name].append((time.perf_counter() - started) * 1000 / result.steps)
                    cpu[name].append((time.process_time() - used) * 1000 / result.steps)
                for name in names:
                    paired[name].append(per_step[name][-1] / per_step["free"][-1])
            for name, source in (("ruled", "allow-rule"), ("granted", "grant")):
                decided = store.load(last[name]).decisions or []
                assert len(decided) == opts.steps - 1 and {d.source for d in decided} == {source}, decided[:1]
    mode = "local" if opts.local else "regular"
    print(
        f"steps per run: {opts.steps}, runs: {opts.runs}, {mode} activities; ms per step (median, min, max),"
        " and the process's CPU ms per step (worker, client and this script; median)"
    )
    base, cpu_base = statistics.median(per_step["free"]), statistics.median(cpu["free"])
    for name, values in per_step.items():
        median, cpu_median = statistics.median(values), statistics.median(cpu[name])
        print(
            f"  {name:8} {median:6.1f} {min(values):6.1f} {max(values):6.1f}   {median / base:.2f}x ungated"
            f"   CPU {cpu_median:5.2f} ms ({cpu_median / cpu_base:.2f}x)"
        )
    low, high = median_interval(paired["ruled"]), median_interval(paired["granted"])
    print(
        "  paired (each run ÷ its round's ungated run), median and its 95% interval:"
        f" ruled {statistics.median(paired['ruled']):.2f}x ({low[0]:.2f}-{low[1]:.2f}),"
        f" granted {statistics.median(paired['granted']):.2f}x ({high[0]:.2f}-{high[1]:.2f})"
    )


def median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free 95% confidence interval of the median: the order statistics of
    ranks (n - 1.96 sqrt(n)) / 2 and 1 + (n + 1.96 sqrt(n)) / 2, the first rounded down and
    the second up (the binomial's normal approximation; n of a dozen or more)."""
    ordered, n = sorted(values), len(values)
    low, high = math.floor((n - 1.96 * n**0.5) / 2), math.ceil(1 + (n + 1.96 * n**0.5) / 2)
    return ordered[max(low - 1, 0)], ordered[min(high - 1, n - 1)]


if __name__ == "__main__":
    asyncio.run(main())
