"""A step's store work for a session that carries N decisions (issue 42: with an approval
policy, a busy session gathers one per gated call): the model turn's append, the tool call's
begin and its result, as a worker makes them, on a SQLite store with its history ring
(``history_limit`` 50). A step should cost about the same whatever N.

    .venv/bin/python bench/store_decisions.py [--decisions 0,30,100,300] [--steps 400]

Each N runs ``--steps`` steps in rounds of 50, its figure the fastest round's mean (the
host's noise only adds); the rounds of every N alternate.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_agents.checkpoint import Checkpoint, Message, SqliteStore
from durable_agents.checkpoint.format import Decision, Role, ToolCall

ROUND = 50


def decisions(n: int) -> list[Decision]:
    start = datetime(2026, 12, 5, tzinfo=UTC)
    return [
        Decision(
            approval_id=f"4c3c8a0e-1f7a-5a8e-9b1e-{i:012d}",
            tool_call_id=f"call_{i}_0",
            tool_name="book",
            approved=True,
            decided_at=start + timedelta(seconds=i),
            position=2 * i + 3,
            source="allow-rule",
            reason="allow rule 'small bookings' (amount_cents <= 5000)",
            rule="small bookings",
            policy_version=1,
            agent_policy_version=1,
            arguments_digest="sha256:" + "ab" * 32,
        )
        for i in range(n)
    ]


def one_round(store: SqliteStore, sid: str, first: int) -> float:
    """Seconds per step over one round of steps."""
    started = time.perf_counter()
    for i in range(first, first + ROUND):
        header = store.load_header(sid)
        assert header is not None
        count = header.message_count
        call = ToolCall(id=f"c{i}", name="book", arguments={"n": i})
        turn = Message(role=Role.ASSISTANT, content="t", tool_calls=[call])
        store.append_new(header.model_copy(update={"message_count": count + 1, "updated_at": None}), count, [turn])
        store.begin_tool_call(sid, count + 1, call, count, None)
        store.record_tool_result(sid, count + 1, Message.tool_result(call, '{"ok":true}'), count + 1, 1)
    return (time.perf_counter() - started) / ROUND


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", default="0,30,100,300")
    parser.add_argument("--steps", type=int, default=400)
    opts = parser.parse_args()
    counts = [int(n) for n in opts.decisions.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for n in counts:
            store = SqliteStore(Path(tmp) / f"s{n}.db")
            messages = [Message.system("you book"), Message.user("go")]
            store.save(Checkpoint(session_id="s", messages=messages, decisions=decisions(n) or None))
            stores[n] = store
        rounds: dict[int, list[float]] = {n: [] for n in counts}
        for r in range(max(1, opts.steps // ROUND)):
            for n in counts:
                rounds[n].append(one_round(stores[n], "s", r * ROUND))
        print(f"store work of a step (append, begin, result), us: fastest round of {ROUND} steps, median round")
        base = min(rounds[counts[0]])
        for n in counts:
            fastest, median = min(rounds[n]) * 1e6, statistics.median(rounds[n]) * 1e6
            print(f"  {n:5} decisions  {fastest:7.0f}  {median:7.0f}   {fastest / (base * 1e6):.2f}x")
            stores[n].close()


if __name__ == "__main__":
    main()
