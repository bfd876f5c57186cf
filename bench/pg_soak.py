"""The shared-store crash soak, large: N worker processes on one task queue and one
PostgresStore, on one Temporal server, any of them SIGKILLed at random moments.

The same code as tests/crash/test_pg_soak.py (tests/crash/shared_store_soak.py),
with more runs, workers and kills. PostgreSQL: DURABLE_AGENTS_TEST_POSTGRES_URL,
else a throwaway cluster (tests/postgres_server.py, as the test fixture); Temporal:
the embedded dev server, in memory. Prints runs, kills, violations and time; exits
1 on any violation.

    .venv/bin/python bench/pg_soak.py [--runs 100] [--workers 3] [--kills 30] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_agents.client.connection import connect
from durable_agents.devserver import DevServer
from tests.crash.shared_store_soak import run_soak
from tests.postgres_server import fresh_schema, postgres_server


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=20251201)
    parser.add_argument("--gap", type=float, nargs=2, default=(0.5, 2.5), help="seconds between kills (min max)")
    parser.add_argument("--slots", type=int, default=10, help="activity slots per worker (0: the default, 200)")
    parser.add_argument("--no-local", action="store_true", help="no run on the local-activity path")
    args = parser.parse_args()

    began = time.monotonic()
    with (
        postgres_server() as server_url,
        fresh_schema(server_url) as url,
        DevServer(ui=False, db_file=None) as temporal,
        tempfile.TemporaryDirectory(prefix="da-pg-soak-") as tmp,
    ):
        client = await connect(temporal.address)
        print(f"(PostgreSQL and Temporal up in {time.monotonic() - began:.1f}s; logs in {tmp})", flush=True)
        report = await run_soak(
            client,
            url,
            Path(tmp),
            runs=args.runs,
            workers=args.workers,
            kills=args.kills,
            seed=args.seed,
            local=not args.no_local,
            gap=(args.gap[0], args.gap[1]),
            activity_slots=args.slots or None,
            result_timeout=600,
        )
        print("\n".join(report.lines()))
        for violation in report.violations:
            print(violation)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
