"""A real MCP server for the tests, written with the ``mcp`` SDK's server API.

Run as a stdio server (``python server.py --record FILE``) or over streamable
HTTP (``--http``: it binds a free port on 127.0.0.1 and prints ``port=N``).
Each tool call appends what the server received (tool, arguments, the
``durable-agents/*`` keys of the request's ``_meta``, an ``authorization``
header, the pid) to the record file, once when the call starts and once when
it ends. ``--variant v2`` changes ``search``'s input schema and ``v3`` drops ``charge``
(changed tool lists); ``--fail-at-start`` writes to stderr and exits before it serves.

Only the ``mcp`` SDK is imported: this file runs outside the test package.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

parser = argparse.ArgumentParser()
parser.add_argument("--record", required=True, help="a file, or - for none")
parser.add_argument("--variant", default="v1")
parser.add_argument("--http", action="store_true")
parser.add_argument("--fail-at-start", action="store_true")
opts = parser.parse_args()

server = MCPServer("durable-agents-test")


def record(event: str, tool: str, arguments: dict[str, Any], ctx: Context) -> None:
    if opts.record == "-":  # nothing to record (the bench)
        return
    meta = ctx.request_context.meta or {}
    headers = ctx.headers or {}
    line = {
        "event": event,
        "tool": tool,
        "arguments": arguments,
        "meta": {k: v for k, v in meta.items() if k.startswith("durable-agents/")},
        "authorization": headers.get("authorization"),
        "secret_env": os.environ.get("TEST_SECRET_ENV"),
        "pid": os.getpid(),
        "at": time.time(),
    }
    with open(opts.record, "a") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())


@server.tool()
def echo(text: str, ctx: Context) -> str:
    """Say the text back."""
    record("start", "echo", {"text": text}, ctx)
    return f"echo: {text}"


def charge(amount: int, ctx: Context, seconds: float = 0.0) -> dict:
    """Charge an amount (a side effect: at most once)."""
    record("start", "charge", {"amount": amount, "seconds": seconds}, ctx)
    time.sleep(seconds)
    record("end", "charge", {"amount": amount, "seconds": seconds}, ctx)
    key = (ctx.request_context.meta or {}).get("durable-agents/idempotencyKey")
    return {"charged": amount, "receipt": f"R-{key}"}


if opts.variant != "v3":  # v3 no longer has it
    server.tool()(charge)


@server.tool()
def delete_file(path: str, ctx: Context) -> dict:
    """Delete a file (needs a human's approval)."""
    record("start", "delete_file", {"path": path}, ctx)
    return {"deleted": path}


@server.tool()
def fail(reason: str, ctx: Context) -> str:
    """Always fails, as a tool error the model can read."""
    record("start", "fail", {"reason": reason}, ctx)
    raise ToolError(f"cannot do it: {reason}")


if opts.variant == "v1":

    @server.tool()
    def search(query: str, ctx: Context) -> list[str]:
        """Search the docs."""
        record("start", "search", {"query": query}, ctx)
        return [f"result for {query}"]

else:

    @server.tool()
    def search(query: str, ctx: Context, limit: int = 3) -> list[str]:  # type: ignore[no-redef]
        """Search the docs, at most `limit` results."""
        record("start", "search", {"query": query, "limit": limit}, ctx)
        return [f"result {i} for {query}" for i in range(limit)]


def serve_http() -> None:
    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    print(f"port={port}", flush=True)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if opts.fail_at_start:
        print("test server: refusing to start (--fail-at-start)", file=sys.stderr, flush=True)
        sys.exit(3)
    if opts.http:
        serve_http()
    else:
        server.run()
