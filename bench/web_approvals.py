"""The approvals inbox's HTTP API at scale: listing 10,000 waiting approvals (the first page,
a filter, a filter matching none) and an approve's round trip to the run's next outcome.

N sessions waiting for approval are written to the store as copies of one real paused
session (what the API lists is read from the store; live runs are asked only when the store
does not know them), then ``GET /api/approvals`` is timed (median of 5). The round trip
is timed on real runs: ``POST /api/sessions/{id}/decision`` until the answer carries the
run's next outcome.

    .venv/bin/python bench/web_approvals.py [--sessions 10000] [--round-trips 15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import uvicorn
from pydantic import BaseModel
from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.agent.tools import ToolContext, tool
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer
from durable_agents.providers.scripted import ScriptedToolCall, ScriptedTurn, register_script
from durable_agents.web import TokenFile, create_app
from durable_agents.worker import build_worker


class Pay(BaseModel):
    amount_cents: int
    recipient: str


@tool(needs_approval=True)
async def pay(args: Pay, ctx: ToolContext) -> dict:
    """Pay a recipient."""
    return {"ok": True}


CALL = ScriptedToolCall(name="pay", arguments={"amount_cents": 1, "recipient": "x"})
register_script("bench-pay", [ScriptedTurn(text="Paying.", tool_calls=[CALL]), ScriptedTurn(text="Paid.")])
payer = Agent(name="payer", model="scripted:bench-pay", instructions="Pay.", tools=[pay])


async def timed(http: httpx.AsyncClient, params: dict, times: int = 5) -> tuple[float, int]:
    took = []
    for _ in range(times):
        started = time.perf_counter()
        answer = await http.get("/api/approvals", params=params)
        took.append(time.perf_counter() - started)
        answer.raise_for_status()
    return statistics.median(took) * 1000, answer.json()["total"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--round-trips", type=int, default=15)
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="web-bench-"))
    with DevServer(ui=False, db_file=None) as server:
        temporal = await Client.connect(server.address, data_converter=data_converter())
        store, queue = SqliteStore(folder / "store.db"), f"web-bench-{uuid.uuid4().hex[:6]}"
        tokens = TokenFile(folder / "tokens.json")
        token = tokens.add("alice", ["approver"])
        client = AgentClient(temporal, store, queue)
        web = uvicorn.Server(uvicorn.Config(create_app(client, tokens=tokens), port=0, log_level="warning"))
        async with build_worker(temporal, agents=[payer], store=store, task_queue=queue):
            serving = asyncio.create_task(web.serve())
            while not web.started:  # noqa: ASYNC110 - uvicorn says it started only by this flag
                await asyncio.sleep(0.02)
            url = f"http://127.0.0.1:{web.servers[0].sockets[0].getsockname()[1]}"
            await client.send("payer", "Pay x", session_id="seed")
            seed = store.load("seed")
            for i in range(opts.sessions):
                store.save(
                    seed.model_copy(
                        update={
                            "session_id": f"copy-{i:05d}",
                            "approval_id": uuid.uuid4().hex,
                            "session_uid": uuid.uuid4().hex,
                            "updated_at": None,
                        }
                    )
                )
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
                for label, params in (
                    ("first page (limit 50)", {"limit": 50}),
                    ("filter agent and tool (limit 50)", {"agent": "payer", "tool": "pay", "limit": 50}),
                    ("filter matching none", {"tool": "nothing"}),
                ):
                    ms, total = await timed(http, params)
                    print(f"GET /api/approvals, {label}: {ms:.0f} ms median of 5 ({total} listed)", flush=True)
                trips = []
                for i in range(opts.round_trips):
                    sid = f"trip-{i}"
                    await client.send("payer", "Pay x", session_id=sid)
                    pending = (await http.get(f"/api/sessions/{sid}/approval")).json()
                    decision = {"approvalId": pending["approvalId"], "approved": True}
                    decision["argumentsDigest"] = pending["argumentsDigest"]
                    started = time.perf_counter()
                    answer = await http.post(f"/api/sessions/{sid}/decision", json=decision)
                    trips.append(time.perf_counter() - started)
                    assert answer.status_code == 200 and answer.json()["outcome"]["finishReason"] == "stop", answer.text
                print(
                    f"approve -> the run's next outcome, {len(trips)} runs: {statistics.median(trips) * 1000:.0f} ms "
                    f"median ({min(trips) * 1000:.0f}-{max(trips) * 1000:.0f})"
                )
            web.should_exit = True
            await serving
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
