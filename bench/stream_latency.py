"""How fast a streamed run's text deltas reach the caller: from the moment the (fake)
provider sends a delta to the moment ``AgentClient.stream`` yields it, on the embedded
dev server with a warm in-process worker and the SQLite store.

    .venv/bin/python bench/stream_latency.py [--runs 5] [--deltas 60] [--gap-ms 20] [--provider anthropic] [--steps 30]

The provider is the wire-format fake (tests/fakes/llm_server.py) the official SDK talks
to, streaming ``--deltas`` pieces ``--gap-ms`` apart; the SDK, the model activity's
delta writes (every 30 ms, the first at once), the store and the client's polling
(every 20 ms while events flow) are all real. Client and server share one clock.
Then what streaming costs a step: ms per step (scripted model turn + a no-op tool) of
``--steps``-step runs, sent plainly and streamed.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client

from bench.step_overhead import noop, script_for
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.events import RunFinished, TextDelta
from durable_agents.providers.scripted import register_script
from durable_agents.worker import build_worker
from tests.fakes.llm_server import FakeLLMServer


def latencies(sent: list[tuple[float, str]], received: list[tuple[float, int]]) -> list[float]:
    """Per delta the provider sent: seconds until the caller held all text up to its end."""
    ends = [count for _, count in received]
    out, total = [], 0
    for at, text in sent:
        total += len(text)
        i = bisect.bisect_left(ends, total)
        if i < len(received):
            out.append(received[i][0] - at)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--deltas", type=int, default=60)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--provider", choices=["anthropic", "openai"], default="anthropic")
    parser.add_argument("--steps", type=int, default=30)
    opts = parser.parse_args()
    with FakeLLMServer() as llm, tempfile.TemporaryDirectory() as tmp, DevServer(ui=False, db_file=None) as server:
        os.environ.update(
            ANTHROPIC_BASE_URL=llm.anthropic_base_url,
            ANTHROPIC_API_KEY="bench",
            OPENAI_BASE_URL=llm.openai_base_url,
            OPENAI_API_KEY="bench",
        )
        llm.stream_chunk, llm.stream_delay = 5, opts.gap_ms / 1000
        text = "".join(f"tok{i:02d} " for i in range(opts.deltas))[: opts.deltas * 5]
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        agent = Agent(name="bench", model=f"{opts.provider}:bench-model")
        register_script("bench-steps", script_for(opts.steps))
        steps = Agent(name="bench-steps", model="scripted:bench-steps", tools=[noop], max_steps=opts.steps + 1)
        async with build_worker(client, agents=[agent, steps], store=store, task_queue=queue):
            agents = AgentClient(client, store, queue)
            script = getattr(llm, opts.provider)
            script.reply_text("warm")
            await agents.send("bench", "warm up", session_id=f"warm-{uuid.uuid4().hex[:6]}")
            overhead = await step_costs(agents, opts.steps, opts.runs)
            all_lat, firsts, per_run = [], [], []
            for _ in range(opts.runs):
                script.reply_text(text)
                received: list[tuple[float, int]] = []
                count, started = 0, time.monotonic()
                async for event in agents.stream("bench", "go", session_id=f"bench-{uuid.uuid4().hex[:8]}"):
                    if isinstance(event, TextDelta):
                        count += len(event.text)
                        received.append((time.monotonic(), count))
                    elif isinstance(event, RunFinished):
                        assert event.result.text == text, "the deltas did not add up to the stored turn"
                sent = llm.streamed[-1]
                lat = latencies(sent, received)
                all_lat += lat
                per_run.append(statistics.median(lat))
                firsts.append(received[0][0] - started)
    all_ms = sorted(x * 1000 for x in all_lat)
    print(
        f"provider {opts.provider} (fake, SSE), {opts.runs} runs x {opts.deltas} deltas {opts.gap_ms:g} ms apart, "
        "embedded Temporal, SQLite store"
    )
    print(
        f"delta latency provider -> caller: p50 {statistics.median(all_ms):.0f} ms, "
        f"p95 {all_ms[int(len(all_ms) * 0.95) - 1]:.0f} ms, max {all_ms[-1]:.0f} ms "
        f"(per-run p50: {', '.join(f'{x * 1000:.0f}' for x in per_run)} ms)"
    )
    print(f"first delta after stream() was called: median {statistics.median(firsts) * 1000:.0f} ms")
    plain, streamed = overhead
    print(
        f"ms per step ({opts.steps}-step runs, scripted model + no-op tool): send() {plain:.1f}, "
        f"stream() {streamed:.1f} ({streamed / plain:.2f}x)"
    )


async def step_costs(agents: AgentClient, steps: int, runs: int) -> tuple[float, float]:
    """Median ms per step of ``runs`` runs of the ``bench-steps`` agent, without and with streaming."""
    plain, streamed = [], []
    for _ in range(runs):
        started = time.perf_counter()
        result = await agents.send("bench-steps", "go", session_id=f"plain-{uuid.uuid4().hex[:8]}")
        plain.append((time.perf_counter() - started) * 1000 / result.steps)
        started = time.perf_counter()
        async for event in agents.stream("bench-steps", "go", session_id=f"streamed-{uuid.uuid4().hex[:8]}"):
            if isinstance(event, RunFinished):
                streamed.append((time.perf_counter() - started) * 1000 / event.result.steps)
    return statistics.median(plain), statistics.median(streamed)


if __name__ == "__main__":
    asyncio.run(main())
