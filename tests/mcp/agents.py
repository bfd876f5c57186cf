"""Agents whose tools come from the real MCP server in ``server.py`` (importable by worker
subprocesses too: the crash agents read their record file from ``DA_MCP_TEST_RECORD``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from durable_agents import Agent, MCPServerHTTP, MCPServerStdio, ScriptedToolCall, ScriptedTurn, register_script

SERVER = Path(__file__).with_name("server.py")
RECORD_ENV = "DA_MCP_TEST_RECORD"


def stdio_server(record: Path | str, *, name: str = "tools", variant: str = "v1", fail: bool = False, **options: Any):
    args = [str(SERVER), "--record", str(record), "--variant", variant, *(["--fail-at-start"] if fail else [])]
    return MCPServerStdio(name=name, command=sys.executable, args=args, **options)


def http_server(url: str, *, name: str = "web", **options: Any) -> MCPServerHTTP:
    return MCPServerHTTP(name=name, url=url, **options)


def records(path: Path | str, tool: str | None = None, event: str = "start") -> list[dict]:
    """What the server received, in order (``start`` records unless told)."""
    if not Path(path).exists():
        return []
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [r for r in lines if r["event"] == event and (tool is None or r["tool"] == tool)]


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=arguments)


register_script(
    "mcp-echo-search",
    [
        ScriptedTurn(text="Asking the server.", tool_calls=[call("echo", text="hi"), call("search", query="durable")]),
        ScriptedTurn(text="The server answered."),
    ],
)
register_script(
    "mcp-prefixed",
    [ScriptedTurn(tool_calls=[call("web_echo", text="over http")]), ScriptedTurn(text="Done over HTTP.")],
)
register_script(
    "mcp-local-and-prefixed",
    [ScriptedTurn(tool_calls=[call("echo", text="one"), call("srv_echo", text="two")]), ScriptedTurn(text="Two.")],
)
register_script(
    "mcp-gated",
    [
        ScriptedTurn(text="Deleting it.", tool_calls=[call("delete_file", path="/tmp/x")]),
        ScriptedTurn(text="Deleted."),
    ],
)
register_script(
    "mcp-mixed-gates",
    [
        ScriptedTurn(tool_calls=[call("note", text="fine"), call("delete_file", path="/tmp/y")]),
        ScriptedTurn(text="Both done."),
    ],
)
register_script(
    "mcp-errors",
    [
        ScriptedTurn(tool_calls=[call("fail", reason="no disk"), call("echo", text=5), call("charge")]),
        ScriptedTurn(text="Recovered."),
    ],
)
register_script(
    "mcp-search-then-charge",
    [
        ScriptedTurn(tool_calls=[call("search", query="prices")]),
        ScriptedTurn(tool_calls=[call("charge", amount=3)]),
        ScriptedTurn(text="Charged."),
    ],
)
register_script(
    "mcp-slow-charge",
    [ScriptedTurn(tool_calls=[call("charge", amount=7, seconds=3.0)]), ScriptedTurn(text="Charged once.")],
)


def _crash_agents() -> list[Agent]:
    record = os.environ.get(RECORD_ENV)
    if not record:
        return []
    options = {"heartbeat_timeout": 2.0, "timeout": 30.0}
    return [
        Agent(
            name="mcp-crash-once",
            model="scripted:mcp-slow-charge",
            mcp_servers=[stdio_server(record, **options)],
        ),
        Agent(
            name="mcp-crash-safe",
            model="scripted:mcp-slow-charge",
            mcp_servers=[stdio_server(record, safe_to_retry={"charge"}, **options)],
        ),
    ]


CRASH = _crash_agents()
"""For ``WorkerProcess(["tests.mcp.agents:CRASH"], env={RECORD_ENV: path})``."""
