"""History storage per store backend: is it linear in the transcript?

    .venv/bin/python bench/history_storage.py [--saves 1000] [--size 1024] [--history-limit 50]

Each backend gets ``--saves`` saves of one ``--size``-byte message each, made
the way the worker makes them (``append`` of the new message), with a history
ring of ``--history-limit``. Printed per backend: the transcript's bytes, what
the store keeps (values in tables, or files on disk; and database pages on
disk), their ratio to the transcript, the mean save time and the latency of
``history(limit)`` at the last step. A store that copied the transcript into
every history entry would keep ~``history_limit``x the transcript.

PostgreSQL: ``DURABLE_AGENTS_TEST_POSTGRES_URL``, else a throwaway cluster
(needs the server binaries: scripts/ensure-postgres.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from durable_agents.checkpoint import Checkpoint, Message, ToolCall
from durable_agents.checkpoint.format import Role
from tests.checkpoint.conftest import (
    BACKENDS,
    POSTGRES_URL_ENV,
    ThrowawayPostgres,
    backend,
    storage_bytes,
)


def fill(store, saves: int, size: int) -> float:
    """``saves`` saves; returns the mean ms per save."""
    store.save(Checkpoint(session_id="bench", messages=[Message.system("sys"), Message.user("go")]))
    began = time.perf_counter()
    for i in range(1, saves):
        header = store.load_header("bench")
        turn = Message(
            role=Role.ASSISTANT,
            content=f"turn {i} " + "x" * (size - 20),
            tool_calls=[ToolCall(id=f"call_{i}", name="t", arguments={"i": i})],
        )
        store.append(
            header.model_copy(update={"message_count": header.message_count + 1, "step_index": i, "updated_at": None}),
            header.message_count,
            [turn],
        )
    return (time.perf_counter() - began) * 1000 / max(saves - 1, 1)


def history_ms(store, limit: int, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        entries = store.history("bench", limit)
        times.append((time.perf_counter() - began) * 1000)
    assert len(entries) == min(limit, store.history_limit)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per message")
    parser.add_argument("--history-limit", type=int, default=50)
    args = parser.parse_args()

    rows = []
    with contextlib.ExitStack() as stack:
        pg_url = os.environ.get(POSTGRES_URL_ENV)
        for kind in BACKENDS:
            if kind == "postgres" and not pg_url:
                try:
                    cluster = ThrowawayPostgres()
                except RuntimeError as e:
                    rows.append((kind, None, str(e)))
                    continue
                began = time.monotonic()
                pg_url = cluster.start()
                stack.callback(cluster.stop)
                print(f"(throwaway PostgreSQL cluster started in {time.monotonic() - began:.1f}s)")
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="da-bench-")))
            with backend(kind, tmp, pg_url) as make:
                store = make(history_limit=args.history_limit)
                save_ms = fill(store, args.saves, args.size)
                transcript = sum(len(m.to_json()) for m in store.load("bench").messages)
                kept = storage_bytes(store)
                disk = storage_bytes(store, on_disk=True)
                rows.append((kind, (transcript, kept, disk, save_ms, history_ms(store, args.history_limit)), ""))

    print(f"\n{args.saves} saves of {args.size} B messages, history_limit={args.history_limit}\n")
    head = ("store", "transcript B", "stored B", "x", "on disk B", "x", "ms/save", f"history({args.history_limit}) ms")
    print("{:<9} {:>13} {:>12} {:>5} {:>12} {:>5} {:>8} {:>16}".format(*head))
    for kind, figures, note in rows:
        if figures is None:
            print(f"{kind:<9} skipped: {note}")
            continue
        transcript, kept, disk, save_ms, hist_ms = figures
        print(
            f"{kind:<9} {transcript:>13,} {kept:>12,} {kept / transcript:>5.2f} {disk:>12,} "
            f"{disk / transcript:>5.2f} {save_ms:>8.2f} {hist_ms:>16.1f}"
        )
    print(
        "\nstored = values in tables (sqlite, memory, postgres) or files (file); on disk = database"
        " pages (sqlite: in use after a WAL checkpoint; postgres: pg_total_relation_size) or files."
    )


if __name__ == "__main__":
    main()
