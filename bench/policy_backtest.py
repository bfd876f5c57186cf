"""The backtest of a candidate approval policy over 10,000 recorded decisions (issue 42: under a minute).

    .venv/bin/python bench/policy_backtest.py [--decisions 10000] [--per-session 10]

Writes the decisions through the store's API into a fresh SQLite store (the refunds of
``tests/recorded_decisions.py``: sessions of 10 gated calls, each decided by a person), then
times ``durable-agents policy test --policy FILE --json -`` as a process (reading every
session's decisions and transcript, deciding each call, the report), and the same in this
process (``backtest(policy, recorded_decisions(store))``). Checks the counts against the
ones worked out by hand.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from durable_agents.checkpoint import SqliteStore  # noqa: E402
from durable_agents.checkpoint.approval_policy import parse_policy  # noqa: E402
from durable_agents.checkpoint.policy_backtest import backtest, recorded_decisions  # noqa: E402
from tests.recorded_decisions import CANDIDATE, write_recorded_decisions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--per-session", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "store.db"
        store = SqliteStore(path)
        started = time.perf_counter()
        expected = write_recorded_decisions(store, args.decisions, per_session=args.per_session)
        written = time.perf_counter() - started
        policy_file = Path(folder) / "candidate.json"
        policy_file.write_text(json.dumps(CANDIDATE))

        started = time.perf_counter()
        report = backtest(parse_policy(CANDIDATE), recorded_decisions(store))
        in_process = time.perf_counter() - started
        store.close()

        started = time.perf_counter()
        ran = subprocess.run(
            [sys.executable, "-m", "durable_agents.cli", "--store", f"sqlite:///{path}", "policy", "test",
             "--policy", str(policy_file), "--json", "-"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        as_process = time.perf_counter() - started
        printed = json.loads(ran.stdout)

    for found in (report.to_dict(), printed):
        assert found["total"] == expected.total, found["total"]
        assert found.get("wouldApproveRejected", 0) == expected.would_approve_rejected
        assert found.get("wouldAskPerson", 0) == expected.would_ask_person
    sessions = (args.decisions + args.per_session - 1) // args.per_session
    print(f"{expected.total:,} recorded decisions in {sessions:,} sessions (written in {written:.1f} s)")
    print(
        f"would approve what people rejected {expected.would_approve_rejected}, agree {expected.agree}, "
        f"still ask {expected.would_ask_person}"
    )
    print(f"backtest in this process: {in_process:.2f} s")
    print(f"`durable-agents policy test --json -` as a process (its start included): {as_process:.2f} s")


if __name__ == "__main__":
    main()
