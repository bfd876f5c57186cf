"""`durable-agents demo`: the example agent, end to end, on the embedded server.

It starts the Temporal dev server (with its UI) and a worker process, then:
1. runs the ``booker`` agent (``durable_agents.examples.booker``) on the offline
   ``scripted:`` model: two weather lookups, then a booking that pauses for a
   human's approval, approved here as the human would from the CLI;
2. sends a follow-up whose tool is slow, kills the worker with SIGKILL while
   that tool runs, starts a new worker, and shows the run finishing with the
   tool's side effect done once under its ``idempotency_key``;
3. forks the session at step 1 with a patched forecast, resumes the fork on
   Temporal, and compares the two trajectories.

Then it stops the server and the worker, so the Temporal UI links it printed
stop answering; with ``--keep-running`` both stay up (and the links work) until
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from durable_agents.examples import booker as example

DEMO_DIR = Path(os.environ.get("DURABLE_AGENTS_DEMO_DIR", ".durable-agents/demo"))
OUTBOX = example.OUTBOX
AGENT_SPEC = "durable_agents.examples.booker:booker"


def _worker_process(address: str, store_url: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_agents.cli",
            "--address",
            address,
            "--store",
            store_url,
            "worker",
            "--agent",
            AGENT_SPEC,
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def _wait_for_worker(log: Path, starts_before: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().count("worker for ") > starts_before:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the demo worker did not start; see {log}")


async def _wait_for_sending(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if OUTBOX.exists() and '"sending"' in OUTBOX.read_text():
            return True
        await asyncio.sleep(0.1)
    return False


async def _book(client, session: str, model: str | None) -> None:
    from durable_agents.cli._render import plural, render_transcript

    ask = "Book a table for 2 tonight, Paris or Rome, wherever it stays dry."
    print(f"\n① {session}: {ask!r}")
    started = time.perf_counter()
    result = await client.send("booker", ask, session_id=session, model=model)
    elapsed = time.perf_counter() - started
    print(render_transcript(result.messages))
    print(
        f"  → {result.finish_reason} after {plural(result.steps, 'model turn')}, "
        f"{plural(len(result.tool_calls), 'tool call')}, "
        f"{elapsed * 1000:.0f} ms ({elapsed * 1000 / max(result.steps, 1):.0f} ms/step, worker warm-up included)"
    )
    if result.finish_reason == "awaiting-approval":
        pending = await client.pending_approval(session)
        print(f"  ⏸ {pending.tool_name}({pending.arguments}) waits for approval {pending.approval_id}")
        print(f"    (from a shell: durable-agents approve {session}) — approving as the human now")
        result = await client.approve(session, pending.approval_id, note="looks good")
        print(render_transcript(result.messages[-2:]))
        print(f"  → {result.finish_reason}")


async def _crash_and_resume(client, server, worker, session: str, store_url: str, log: Path, model):
    from durable_agents.cli._render import render_transcript

    print("\n② Follow-up 'Email me the confirmation': the email tool is slow; the worker will be killed while it runs.")
    await client.start("booker", "Email me the confirmation.", session_id=session, model=model)
    if await _wait_for_sending(60):
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        print(f"  ✗ worker {worker.pid} killed with SIGKILL mid-tool")
        worker = _worker_process(server.address, store_url, log)
        await _wait_for_worker(log, 1)
        print(f"  ↻ new worker {worker.pid} started; Temporal retries the tool once its heartbeat times out")
    result = await client.outcome(session)
    print(render_transcript(result.messages[-4:]))
    events = [json.loads(line) for line in OUTBOX.read_text().splitlines()] if OUTBOX.exists() else []
    sent = [e for e in events if e["event"] == "sent"]
    attempts = [e["attempt"] for e in events if e["event"] == "sending"]
    print(
        f"  → {result.finish_reason}; email attempts {attempts}, emails sent: {len(sent)}"
        + (f" (idempotency key {sent[0]['key']})" if sent else "")
    )
    return worker


async def _fork_and_compare(client, session: str) -> str:
    from durable_agents.checkpoint.compare import compare_trajectories
    from durable_agents.checkpoint.fork import Patch, ToolResultPatch
    from durable_agents.cli._render import render_transcript

    source = client.store.load(session)
    rome = next(c for m in source.messages for c in (m.tool_calls or []) if c.arguments.get("city") == "Rome")
    print(f"\n③ Fork at step 1: what if Rome's forecast ({rome.id}) had been rain?")
    made = await client.fork(
        session,
        1,
        Patch(tool_result=ToolResultPatch(tool_call_id=rome.id, result={"city": "Rome", "forecast": "rain"})),
    )
    forked = await client.resume(made.session_id)
    print(render_transcript(forked.messages[-3:]))
    cmp = compare_trajectories(client.store.load(session), client.store.load(made.session_id))
    steps = cmp.drift.step_count
    print(
        f"  → fork {made.session_id}: {forked.finish_reason}; diverged at step {cmp.diverged_at}"
        + (f", {steps.a} vs {steps.b} steps" if steps else "")
    )
    return made.session_id


async def _until_stopped(server) -> None:
    """Until Ctrl-C or SIGTERM (the demo then stops everything and says so), or the server exits."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # e.g. Windows: KeyboardInterrupt
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    waits = {asyncio.ensure_future(asyncio.to_thread(server.wait)), asyncio.ensure_future(stop.wait())}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()  # the server.wait() thread returns once the server is stopped below
        for sig in handled:
            loop.remove_signal_handler(sig)


async def run_demo(*, model: str | None, keep_running: bool, store_url: str | None) -> int:
    from durable_agents.client.client import AgentClient
    from durable_agents.devserver import DevServer

    DEMO_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    OUTBOX.unlink(missing_ok=True)
    store_url = f"sqlite:///{DEMO_DIR / 'store.db'}"
    session = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    log = DEMO_DIR / "worker.log"
    print("Starting the embedded Temporal server…", flush=True)
    with DevServer(db_file=DEMO_DIR / "temporal.db") as server:
        print(f"  Temporal {server.address}, UI {server.ui_url}")
        log.unlink(missing_ok=True)
        worker = _worker_process(server.address, store_url, log)
        try:
            await _wait_for_worker(log, 0)
            client = await AgentClient.connect(server.address, store=store_url)
            await _book(client, session, model)
            worker = await _crash_and_resume(client, server, worker, session, store_url, log, model)
            fork_id = await _fork_and_compare(client, session)
            ui = f"{server.ui_url}/namespaces/default/workflows"
            print(f"\nIn the Temporal UI: {ui}/{session} (runs of the session), {ui}/{fork_id} (the fork)")
            print(f"Checkpoint store: {store_url}; try: durable-agents --store {store_url} show {session}")
            if keep_running:
                print("Server and worker keep running, so the links work; Ctrl-C to stop them.", flush=True)
                await _until_stopped(server)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=10)
    if keep_running:
        print("Stopped the server and the worker.")
    else:
        print(
            "Stopped the server and the worker. The links above no longer answer: "
            "`durable-agents demo --keep-running` keeps them up until Ctrl-C."
        )
    return 0
