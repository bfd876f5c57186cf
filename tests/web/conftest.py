"""The web tests' server: ``durable_agents.web.create_app`` served by uvicorn on a free
loopback port, in the test session's event loop, over a real in-process worker (the
session's Temporal dev server, a SQLite store) and a tokens file with one person per role.

Every request the app answers is recorded (method, path, status), so a test can tell a
request the server refused from one that never arrived."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from temporalio.testing import WorkflowEnvironment

from durable_agents import AgentClient, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.web import LoginThrottle, TokenFile, create_app
from tests.web.agents import boss, payer, reader

pytestmark = pytest.mark.integration


@dataclass
class Served:
    url: str
    client: AgentClient
    store: SqliteStore
    tokens: dict[str, str]
    """name → token: alice and bob (approvers), victor (viewer), olga (operator and approver),
    sam (approver of another agent's calls only)."""
    answered: list[tuple[str, str, int]] = field(default_factory=list)
    folder: Path = Path()

    def http(self, who: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60)

    def session(self, prefix: str = "w") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    async def waiting(self, agent: str = "web-payer", prefix: str = "w", *, stream: bool = False) -> str:
        """A new session of ``agent`` paused on its ``pay`` call."""
        sid = self.session(prefix)
        if stream:
            async for event in self.client.stream(agent, "Pay ACME 42.00", session_id=sid):
                if event.type in ("run-paused", "run-finished", "run-failed"):
                    break
        else:
            result = await self.client.send(agent, "Pay ACME 42.00", session_id=sid)
            assert result.finish_reason == "awaiting-approval", result
        return sid


class Recorder:
    def __init__(self, app: Any, answered: list[tuple[str, str, int]]) -> None:
        self.app, self.answered = app, answered

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def recorded(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.answered.append((scope["method"], scope["path"], message["status"]))
            await send(message)

        await self.app(scope, receive, recorded)


@pytest.fixture(scope="session")
async def served(env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    folder = tmp_path_factory.mktemp("web")
    store = SqliteStore(folder / "store.db")
    task_queue = f"tq-web-{uuid.uuid4().hex[:8]}"
    token_file = TokenFile(folder / "tokens.json")
    tokens = {
        "alice": token_file.add("alice", ["approver"]),
        "bob": token_file.add("bob", ["approver"]),
        "victor": token_file.add("victor", ["viewer"]),
        "olga": token_file.add("olga", ["operator", "approver"]),
        "sam": token_file.add("sam", ["approver"], agents=["another-agent"]),
    }
    client = AgentClient(env.client, store, task_queue)
    answered: list[tuple[str, str, int]] = []
    app = create_app(
        client,
        tokens=token_file,
        temporal_ui_url="http://127.0.0.1:8233",
        throttle=LoginThrottle(limit=5, window=600, base_delay=0.05, max_delay=0.2),
    )
    server = uvicorn.Server(uvicorn.Config(Recorder(app, answered), host="127.0.0.1", port=0, log_level="warning"))
    async with build_worker(env.client, agents=[payer, reader, boss], store=store, task_queue=task_queue):
        serving = asyncio.create_task(server.serve())
        while not server.started:
            assert not serving.done(), "uvicorn did not start"
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield Served(f"http://127.0.0.1:{port}", client, store, tokens, answered, folder)
        finally:
            server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(serving, 10)
    store.close()
