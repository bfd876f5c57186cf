"""Provider rate limits shared by a fleet of sessions: with and without budgets, in one run.

    .venv/bin/python bench/budgets.py [--sessions 200] [--window 60] [--tokens 50000] [--requests 1000]

The official Anthropic SDK talks to a wire-format fake (tests/fakes/rate_limited.py) that
enforces per-model limits as the API does (token buckets per ``--window`` seconds; real 429s
with ``retry-after`` and rate-limit headers). Each session is one run of two model calls
(a tool call between them). The same fleet runs twice on one in-process worker: first with
``Budget(input_tokens_per_minute=--tokens, requests_per_minute=--requests)``, then without.

Printed for each: wall time; input tokens per window reached while calls waited (admitted
tokens from the first to the last admission, scaled to one window) against the limit; the
429s (each is a refused request that was retried); and the wait of each model call, p50 and
p95: from its first scheduling (Temporal's ActivityTaskScheduled) to its admission by the
provider, so budget waits and 429 back-offs are measured alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.budgets import Budget
from durable_agents.worker import build_worker
from tests.budgets.agents import BUDGETED
from tests.fakes.rate_limited import RateLimitedServer

MODEL = "anthropic:claude-fake"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


async def waits(client: Client, fake: RateLimitedServer, sessions: list[str]) -> list[float]:
    """Per model call: its first scheduling to its admission by the fake (seconds)."""
    admitted: dict[str, list[float]] = {}
    for a in fake.admitted:
        admitted.setdefault(a.tag, []).append(a.at)
    found = []
    for session in sessions:
        history = await client.get_workflow_handle(session).fetch_history()
        first_scheduled: dict[str, float] = {}
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            attributes = event.activity_task_scheduled_event_attributes
            if not attributes.activity_type.name.endswith("model_turn"):
                continue
            summary = json.loads(event.user_metadata.summary.data or b'""')
            step = str(summary).split(" (")[0]  # "model turn 2"
            first_scheduled.setdefault(step, event.event_time.ToDatetime().timestamp() + _utc_offset())
        for scheduled, sent in zip(first_scheduled.values(), admitted.get(session, []), strict=False):
            found.append(max(sent - scheduled, 0.0))
    return found


def _utc_offset() -> float:
    """``ToDatetime()`` is naive UTC; ``.timestamp()`` reads it as local time."""
    return -time.timezone if time.localtime().tm_isdst == 0 else -time.altzone


async def run_fleet(
    server: DevServer, opts: argparse.Namespace, budgets: list[Budget], label: str
) -> dict[str, object]:
    with (
        RateLimitedServer(
            input_tokens_per_window=opts.tokens, requests_per_window=opts.requests, window=opts.window
        ) as fake,
        tempfile.TemporaryDirectory() as tmp,
    ):
        import os

        os.environ["ANTHROPIC_BASE_URL"] = fake.anthropic_base_url
        os.environ["ANTHROPIC_API_KEY"] = "bench"
        client = await Client.connect(server.address, data_converter=data_converter())
        store = SqliteStore(Path(tmp) / "store.db")
        queue = f"budgets-{uuid.uuid4().hex[:6]}"
        sessions = [f"{label}-{uuid.uuid4().hex[:8]}" for _ in range(opts.sessions)]
        async with build_worker(client, agents=[BUDGETED], store=store, task_queue=queue, budgets=budgets):
            agents = AgentClient(client, store, queue)
            began = time.monotonic()
            results = await asyncio.gather(
                *[agents.send("budgeted", s, session_id=s) for s in sessions], return_exceptions=True
            )
            wall = time.monotonic() - began
        failed = sum(1 for r in results if isinstance(r, BaseException))
        start, end = fake.admitted[0].at, fake.admitted[-1].at
        measured = await waits(client, fake, sessions)
        store.close()
        return {
            "label": label,
            "wall": wall,
            "calls": len(fake.admitted),
            "failed runs": failed,
            "tokens per window": fake.tokens_per_window(start, end),
            "429s": len(fake.refused),
            "p50": statistics.median(measured) if measured else 0.0,
            "p95": percentile(measured, 0.95),
        }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--window", type=float, default=60.0, help="the limits' period in seconds (APIs: 60)")
    parser.add_argument("--tokens", type=int, default=50_000, help="input tokens per window")
    parser.add_argument("--requests", type=int, default=1000, help="requests per window")
    opts = parser.parse_args()
    budget = Budget(
        MODEL, input_tokens_per_minute=opts.tokens, requests_per_minute=opts.requests, window_seconds=opts.window
    )
    rows = []
    with DevServer(ui=False, db_file=None) as server:
        rows.append(await run_fleet(server, opts, [budget], "with-budgets"))
        rows.append(await run_fleet(server, opts, [], "without"))
    print(
        f"{opts.sessions} sessions × 2 model calls; limits per {opts.window:g}s window: "
        f"{opts.tokens:,} input tokens, {opts.requests:,} requests"
    )
    print(
        "| fleet | wall | input tokens per window (of the limit) | 429s (requests retried) | wait p50 / p95 | runs failed |"
    )
    print("| - | - | - | - | - | - |")
    for row in rows:
        share = float(row["tokens per window"]) / opts.tokens  # type: ignore[arg-type]
        print(
            f"| {row['label']} | {row['wall']:.0f} s | {row['tokens per window']:,.0f} ({share:.0%}) | {row['429s']} | "
            f"{row['p50']:.1f} s / {row['p95']:.1f} s | {row['failed runs']} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
