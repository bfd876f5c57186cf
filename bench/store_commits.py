"""A step's three store writes on a SQLite store, back to back: µs per step and the commits' stalls.

    .venv/bin/python bench/store_commits.py [--steps 3000] [--in-commit-checkpoints]

Each step writes what a worker writes (``SqliteStore.append_new`` of a ~1 KB turn with a
tool call, ``begin_tool_call`` recording the call's start, ``record_tool_result`` of a
~1 KB result) on one session, on this thread, as a worker's event loop does. Printed: µs
per step, and each ``COMMIT``'s time (median, 99th percentile, the longest, and the sum of
those over 1 ms: the stalls a worker's event loop would take). ``--in-commit-checkpoints``
runs the same with SQLite's own checkpoints inside commits (every 1,000 pages, its default;
the store's before the background checkpoints) for the comparison.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_agents.checkpoint import Checkpoint, Message, SqliteStore, ToolCall
from durable_agents.checkpoint.format import CheckpointStatus, Role

PAD = "x" * 1000


class TimedCommits:
    """The store's connection, timing each ``COMMIT``."""

    def __init__(self, db: Any) -> None:
        self.db, self.commits = db, []

    def execute(self, sql: str, params: Any = ()) -> Any:
        if sql != "COMMIT" and not sql.startswith("PRAGMA wal_checkpoint"):
            return self.db.execute(sql, params)
        started = time.perf_counter()
        try:
            return self.db.execute(sql, params)
        finally:
            self.commits.append(time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--in-commit-checkpoints", action="store_true")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "s.db")
        if opts.in_commit_checkpoints:
            store._db.execute("PRAGMA wal_autocheckpoint=1000")
            store._checkpoint_later = lambda: None  # type: ignore[method-assign]
        store.save(Checkpoint(session_id="s", status=CheckpointStatus.IN_PROGRESS, messages=[Message.user("go")]))
        header = store.load_header("s")
        assert header is not None

        def step(i: int) -> None:
            nonlocal header
            assert header is not None
            count = header.message_count
            call = ToolCall(id=f"call_{count}", name="noop", arguments={"n": i})
            turn = Message(role=Role.ASSISTANT, content=f"step {i} {PAD}", tool_calls=[call])
            stored = header.model_copy(
                update={"message_count": count + 1, "step_index": header.step_index + 1, "updated_at": None}
            )
            assert store.append_new(stored, count, [turn])
            store.begin_tool_call("s", count + 1, call, count, lambda _call, _header: True)
            result = Message.tool_result(call, f'{{"n": {i}, "pad": "{PAD}"}}')
            header = stored.model_copy(
                update={"message_count": store.record_tool_result("s", count + 1, result, count + 1, 1)}
            )

        for i in range(100):  # warm
            step(i)
        timed = TimedCommits(store._db)
        store._db = timed  # type: ignore[assignment]
        started = time.perf_counter()
        for i in range(opts.steps):
            step(i)
        elapsed = time.perf_counter() - started
        commits = sorted(timed.commits)
        wal = (Path(tmp) / "s.db-wal").stat().st_size
        store._db = timed.db
        store.close()
    how = "in commits (SQLite's default)" if opts.in_commit_checkpoints else "in the background thread"
    print(f"{opts.steps} steps, WAL checkpoints {how}: {elapsed * 1e6 / opts.steps:.0f} µs a step (3 writes)")
    print(
        f"commits: median {statistics.median(commits) * 1e6:.0f} µs, "
        f"p99 {commits[int(len(commits) * 0.99)] * 1e6:.0f} µs, longest {commits[-1] * 1000:.1f} ms, "
        f"over 1 ms: {sum(c for c in commits if c > 0.001) * 1000:.0f} ms in all; WAL {wal / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
