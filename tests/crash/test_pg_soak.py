"""The deployment ladder's third rung, killed: two worker processes on one task queue
and one PostgresStore (a fresh schema of the session's PostgreSQL), on the session's
Temporal server; either worker is SIGKILLed at random moments and started again.

Every run must finish with 0 guarantee violations, steps must have run on both
workers, a worker must have taken up a run again after the other one wrote to it
(its transcript cache held the session: it must read the other's messages), and
kills must have landed on running steps. Each worker has 3 activity slots, so a
busy worker's next activity goes to the other one (Temporal otherwise runs a
run's activities on the worker that runs its workflow). Seeded: PG_SOAK_SEED,
PG_SOAK_RUNS, PG_SOAK_KILLS and PG_SOAK_WORKERS override the defaults;
PG_SOAK_LOCAL=0 keeps every run off the local-activity path. The large one is
bench/pg_soak.py.
"""

from __future__ import annotations

import os

import pytest

from tests.crash.shared_store_soak import run_soak
from tests.postgres_server import fresh_schema

SEED = int(os.environ.get("PG_SOAK_SEED", "20251201"))
RUNS = int(os.environ.get("PG_SOAK_RUNS", "12"))
KILLS = int(os.environ.get("PG_SOAK_KILLS", "4"))
WORKERS = int(os.environ.get("PG_SOAK_WORKERS", "2"))
LOCAL = os.environ.get("PG_SOAK_LOCAL", "1") == "1"


@pytest.mark.crash
async def test_two_workers_one_postgres_store_survive_random_kills(env, postgres_url, tmp_path):
    with fresh_schema(postgres_url) as url:
        report = await run_soak(
            env.client, url, tmp_path, runs=RUNS, workers=WORKERS, kills=KILLS, seed=SEED, local=LOCAL
        )
    print("\n" + "\n".join(report.lines()))
    assert not report.violations, "\n".join(report.violations)
    assert report.worker_kills == KILLS, "the runs ended before every kill: the soak is too short"
    assert sum(report.hits.values()) >= 1, "no kill landed on a running step"
    assert report.shared_runs >= 1, "no run had steps on both workers"
    assert report.returns >= 1, "no worker's transcript cache had to read the other worker's writes"
