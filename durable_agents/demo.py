"""`durable-agents demo`: the example agent, end to end, on the embedded server.

It starts the Temporal dev server (with its UI) and a worker process, runs
the ``booker`` agent on the offline ``scripted:`` model (two tools over
several steps), then sends a follow-up whose tool is slow, kills the worker
with SIGKILL while that tool runs, starts a new worker, and shows the run
finishing with the tool's side effect done once under its ``tool_call_id``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from activities.definitions import Agent, ToolContext, tool
from activities.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script

DEMO_DIR = Path(os.environ.get("DURABLE_AGENTS_DEMO_DIR", ".durable-agents/demo"))
OUTBOX = DEMO_DIR / "outbox.jsonl"


class CityArgs(BaseModel):
    city: str


class BookingArgs(BaseModel):
    city: str
    restaurant: str
    people: int


class EmailArgs(BaseModel):
    to: str
    subject: str


@tool(safe_to_retry=True)
async def get_weather(args: CityArgs, ctx: ToolContext) -> dict:
    """Tonight's forecast for a city."""
    rainy = {"Paris", "London"}
    return {"city": args.city, "forecast": "rain" if args.city in rainy else "clear", "low_c": 14}


@tool
async def book_table(args: BookingArgs, ctx: ToolContext) -> dict:
    """Book a restaurant table (a side effect: runs at most once)."""
    return {"confirmation": f"BK-{abs(hash(ctx.tool_call_id)) % 100000:05d}",
            "restaurant": args.restaurant, "people": args.people}


@tool(safe_to_retry=True, heartbeat_timeout=2.0)
async def send_email(args: EmailArgs, ctx: ToolContext) -> dict:
    """Send an email. Slow; safe to retry because the outbox is keyed by tool_call_id."""
    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    with OUTBOX.open("a") as f:
        f.write(json.dumps({"event": "sending", "key": ctx.tool_call_id, "attempt": ctx.attempt}) + "\n")
    for _ in range(6):  # a slow mail server; heartbeats tell Temporal we are alive
        await asyncio.sleep(0.5)
        ctx.heartbeat()
    sent = [json.loads(line) for line in OUTBOX.read_text().splitlines()]
    if not any(e["event"] == "sent" and e["key"] == ctx.tool_call_id for e in sent):
        with OUTBOX.open("a") as f:
            f.write(json.dumps({"event": "sent", "key": ctx.tool_call_id, "to": args.to}) + "\n")
    return {"sent": True, "idempotency_key": ctx.tool_call_id}


register_script("booker-demo", [
    ScriptedTurn(text="Let me check tonight's weather in both cities.", tool_calls=[
        ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}),
        ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
    ]),
    ScriptedTurn(text="Paris expects rain, Rome is clear: booking in Rome.", tool_calls=[
        ScriptedToolCall(name="book_table",
                         arguments={"city": "Rome", "restaurant": "Da Enzo", "people": 2}),
    ]),
    ScriptedTurn(text="Booked a table for 2 at Da Enzo in Rome tonight; the sky will be clear."),
    ScriptedTurn(text="Sending the confirmation now.", tool_calls=[
        ScriptedToolCall(name="send_email", arguments={"to": "you@example.com",
                                                       "subject": "Your table at Da Enzo"}),
    ]),
    ScriptedTurn(text="The confirmation email is on its way."),
])

booker = Agent(
    name="booker",
    model="scripted:booker-demo",
    instructions="You book restaurant tables where tonight's weather is good, and confirm by email.",
    tools=[get_weather, book_table, send_email],
)


def _worker_process(address: str, store_url: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "durable_agents.cli", "--address", address, "--store", store_url,
         "worker", "--agent", "durable_agents.demo:booker"],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
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


async def run_demo(*, model: str | None, keep_running: bool, store_url: str | None) -> int:
    from durable_agents.client import AgentClient
    from durable_agents.devserver import DevServer
    from durable_agents.render import render_transcript

    DEMO_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    OUTBOX.unlink(missing_ok=True)
    store_url = f"sqlite:///{DEMO_DIR / 'store.db'}"
    session = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    server = DevServer(db_file=DEMO_DIR / "temporal.db")
    log = DEMO_DIR / "worker.log"
    print("Starting the embedded Temporal server…", flush=True)
    with server:
        print(f"  Temporal {server.address}, UI {server.ui_url}")
        log.unlink(missing_ok=True)
        worker = _worker_process(server.address, store_url, log)
        try:
            await _wait_for_worker(log, 0)
            client = await AgentClient.connect(server.address, store=store_url)
            print(f"\n① {session}: 'Book a table for 2 tonight, Paris or Rome, wherever it stays dry.'")
            started = time.perf_counter()
            result = await client.send("booker", "Book a table for 2 tonight, Paris or Rome, "
                                       "wherever it stays dry.", session_id=session, model=model)
            elapsed = time.perf_counter() - started
            print(render_transcript(result.messages))
            print(f"  → {result.finish_reason}: {result.steps} model turns, {len(result.tool_calls)} "
                  f"tool calls in {elapsed * 1000:.0f} ms ({elapsed * 1000 / result.steps:.0f} ms/step, "
                  "server start excluded)")

            print("\n② Follow-up 'Email me the confirmation': the email tool is slow; "
                  "the worker will be killed while it runs.")
            handle = await client.start("booker", "Email me the confirmation.", session_id=session,
                                        model=model)
            if await _wait_for_sending(60):
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
                print(f"  ✗ worker {worker.pid} killed with SIGKILL mid-tool")
                worker = _worker_process(server.address, store_url, log)
                await _wait_for_worker(log, 1)
                print(f"  ↻ new worker {worker.pid} started; Temporal retries the tool "
                      "once its heartbeat times out")
            result = await client.result(session, handle)
            print(render_transcript(result.messages[-4:]))
            events = [json.loads(line) for line in OUTBOX.read_text().splitlines()] if OUTBOX.exists() else []
            sent = [e for e in events if e["event"] == "sent"]
            attempts = [e["attempt"] for e in events if e["event"] == "sending"]
            print(f"  → {result.finish_reason}; email attempts {attempts}, emails sent: {len(sent)}"
                  + (f" (idempotency key {sent[0]['key']})" if sent else ""))
            print(f"\nSee both runs in the Temporal UI: {server.ui_url}/namespaces/default/workflows/{session}")
            print(f"Checkpoint store: {store_url} (session {session})")
            if keep_running:
                print("Server and worker keep running; Ctrl-C to stop.")
                await asyncio.to_thread(server.wait)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=10)
    print("Stopped the server and the worker.")
    return 0
