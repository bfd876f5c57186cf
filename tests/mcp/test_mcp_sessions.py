"""The worker's MCP sessions (``MCPConnections``) against the real test server, without Temporal."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from durable_agents import ConfigurationError, MCPServerHTTP, MCPServerStdio
from durable_agents.activities.mcp_client import MCPConnections, MCPUnavailable
from tests.mcp.agents import records, stdio_server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    import asyncio

    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not _alive(pid)


async def _echo(pool: MCPConnections, server, text: str, *, retry_lost: bool = False):
    return await pool.call_tool(server, "echo", {"text": text}, {}, retry_lost=retry_lost)


async def test_one_stdio_server_serves_a_workers_calls_and_is_stopped_with_the_worker(record):
    pool, server = MCPConnections(), stdio_server(record)
    async with pool.running():
        for i in range(3):
            assert (await _echo(pool, server, str(i))).structured_content == {"result": f"echo: {i}"}
        [pid] = {r["pid"] for r in records(record)}
    assert await _wait_gone(pid), "the stdio server outlived its worker's sessions"


async def test_a_stdio_server_that_died_between_calls_is_started_again_for_the_next(record):
    pool, server = MCPConnections(), stdio_server(record)
    async with pool.running():
        await _echo(pool, server, "first")
        [first] = {r["pid"] for r in records(record)}
        os.kill(first, signal.SIGKILL)
        assert await _wait_gone(first)
        # not a lost call (it could not have been sent): an at-most-once call just runs
        assert (await _echo(pool, server, "second")).structured_content == {"result": "echo: second"}
    pids = [r["pid"] for r in records(record)]
    assert pids[0] == first and pids[1] != first


async def test_without_reuse_each_call_has_its_own_session(record):
    pool, server = MCPConnections(), stdio_server(record, reuse_session=False)
    async with pool.running():
        await _echo(pool, server, "a")
        await _echo(pool, server, "b")
    pids = [r["pid"] for r in records(record)]
    assert len(set(pids)) == 2
    assert all([await _wait_gone(pid) for pid in pids])


async def test_an_http_server_that_is_not_there_is_unavailable_after_a_few_quick_tries():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = MCPServerHTTP(name="down", url=f"http://user:pw@127.0.0.1:{port}/mcp")
    started = time.monotonic()
    pool = MCPConnections()
    async with pool.running():
        with pytest.raises(MCPUnavailable, match=rf"MCP server 'down' \(url http://127.0.0.1:{port}/mcp\)") as e:
            await pool.list_tools(server, timeout=10)
    assert "pw" not in str(e.value)
    assert time.monotonic() - started < 8  # 4 tries, 1.75 s of pauses


def test_definitions_refuse_what_cannot_work():
    with pytest.raises(ConfigurationError, match="must be 1-64 letters"):
        MCPServerStdio(name="my server", command="x")
    with pytest.raises(ConfigurationError, match="safe_to_retry is True, False or a set of tool names"):
        MCPServerStdio(name="s", command="x", safe_to_retry="search")
    with pytest.raises(ConfigurationError, match="url must be http"):
        MCPServerHTTP(name="s", url="localhost:8000/mcp")
    with pytest.raises(ConfigurationError, match="timeouts must be positive"):
        MCPServerStdio(name="s", command="x", tool_timeouts={"slow": 0})
