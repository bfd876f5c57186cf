"""Steps per second across concurrent sessions on one in-process worker.

    .venv/bin/python bench/concurrency.py [--sessions 20] [--steps 30] [--local]

Each step is a scripted model turn plus one no-op tool call, so the figure
is orchestration throughput (Temporal + store + activities), not model time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from step_overhead import warm_bench_worker


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--local", action="store_true")
    opts = parser.parse_args()
    async with warm_bench_worker(opts.steps, opts.local) as (_, agents):
        started = time.perf_counter()
        results = await asyncio.gather(
            *(agents.send("bench", "go", session_id=f"c-{uuid.uuid4().hex[:8]}") for _ in range(opts.sessions))
        )
        elapsed = time.perf_counter() - started
    steps = sum(r.steps for r in results)
    print(
        f"{opts.sessions} concurrent sessions × {opts.steps} steps "
        f"({'local' if opts.local else 'regular'} activities): {steps} steps in {elapsed:.1f}s "
        f"= {steps / elapsed:.0f} steps/s"
    )


if __name__ == "__main__":
    asyncio.run(main())
