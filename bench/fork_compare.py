"""Fork and compare cost on long sessions (no Temporal, no model).

    .venv/bin/python bench/fork_compare.py [--messages 1000] [--steps 1000] [--runs 5]

- fork: a SQLite session of ``--messages`` messages (saved step by step, so
  its history is full), forked from its newest step with a patched tool result.
- compare: ``compare_trajectories`` of two ``--steps``-step transcripts that
  differ in their last tool result.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_agents.checkpoint import Checkpoint, Message, Role, SqliteStore, ToolCall
from durable_agents.checkpoint.compare import compare_trajectories
from durable_agents.checkpoint.fork import Patch, ToolResultPatch, fork


def transcript(steps: int, last_result: str = "ok") -> list[Message]:
    """``steps`` assistant turns, each with one tool call and its result (2 messages a step)."""
    messages = [Message.system("You plan trips."), Message.user("plan a trip")]
    for i in range(steps):
        call = ToolCall(id=f"call_{i}", name="search", arguments={"query": f"q{i}", "page": i})
        messages.append(Message(role=Role.ASSISTANT, content=f"step {i}", tool_calls=[call]))
        content = last_result if i == steps - 1 else f'{{"hits": [{i}, {i + 1}], "text": "result {i}"}}'
        messages.append(Message.tool_result(call, content))
    return messages


def build_session(store: SqliteStore, sid: str, messages: list[Message]) -> int:
    """Save the session as the loop does: one save per step. Returns the last step."""
    step = 0
    for end in range(2, len(messages) + 1, 2):
        store.save(Checkpoint(session_id=sid, messages=messages[:end], step_index=step))
        step += 1
    return step - 1


def ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:.2f} ms (min {min(samples) * 1000:.2f})"


def bench_fork(n_messages: int, runs: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "store.db")
        last = build_session(store, "s", transcript((n_messages - 2) // 2))
        patch = Patch(tool_result=ToolResultPatch(tool_call_id="call_0", result={"hits": []}))
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fork(store, "s", last, patch)
            samples.append(time.perf_counter() - t0)
        count = len(store.load("s").messages)
        store.close()
    return f"fork of a {count}-message SQLite session (history {store.history_limit}): {ms(samples)}"


def bench_compare(steps: int, runs: int) -> str:
    a, b = transcript(steps), transcript(steps, last_result="changed")
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cmp = compare_trajectories(a, b)
        samples.append(time.perf_counter() - t0)
    assert cmp.diverged_at == steps - 1
    return f"compare_trajectories of two {steps}-step runs: {ms(samples)}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    print(bench_fork(opts.messages, opts.runs))
    print(bench_compare(opts.steps, opts.runs))


if __name__ == "__main__":
    main()
