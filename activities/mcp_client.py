"""Sessions with MCP servers, kept per worker: connect, list, call, reconnect.

One :class:`MCPConnections` belongs to a worker (``ActivityDeps.mcp``); the
worker's plugin closes it when the worker stops. With ``reuse_session`` (the
default) each server has one live session, opened on first use by a task that
owns it (the ``mcp`` SDK's sessions are anyio task groups, which must be left
by the task that entered them) and used by any activity; a session that fails
is dropped and the next call opens a new one. Without it, each call opens and
closes its own session.

Failures are sorted by what they mean for a call:

- :class:`MCPUnavailable`: the server could not be started or reached, so the
  request was not sent. Retried here, boundedly.
- :class:`MCPLost`: the connection failed while the request was out: the call
  may or may not have run. Retried only for a tool that is safe to retry.
- :class:`MCPRefused`: the server answered with a protocol error (or a reply
  that does not parse): final, never retried.

The ``mcp`` SDK is imported on first connection, so this module loads without it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, cast

from durable_agents.agent.mcp import MCPServerHTTP, MCPServerStdio
from durable_agents.checkpoint.errors import ConfigurationError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, Tool
    from mcp_types import RequestParamsMeta

log = logging.getLogger("durable_agents.mcp")

RETRY_DELAYS = (0.25, 0.5, 1.0)
"""Pauses between attempts after a failure that is retried (at most len + 1 attempts)."""
MAX_LIST_PAGES = 100
CLOSE_TIMEOUT = 5.0
STDERR_LINES = 20


class MCPUnavailable(Exception):
    """The server could not be started or reached; nothing was sent. ``final``: starting it
    again would fail the same way (a stdio command that cannot run, or exits at once)."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


class MCPLost(Exception):
    """The connection failed while a request was out; it may or may not have run."""


class MCPRefused(Exception):
    """The server refused the request (a protocol error) or sent a reply that does not parse."""


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise ConfigurationError(
            "MCP servers need the official `mcp` SDK on the worker: pip install 'durable-agents[mcp]'"
        ) from e


class _Session:
    """One MCP session, owned by a background task from open to close."""

    def __init__(self, server: MCPServerStdio | MCPServerHTTP) -> None:
        self.server = server
        self.client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._stderr_done = threading.Event()
        self._errlog: Any = None

    @property
    def _stdio(self) -> bool:
        return isinstance(self.server, MCPServerStdio)

    @property
    def alive(self) -> bool:
        """Open, as far as can be told without a request; a stdio server whose stderr closed has
        exited (its session would fail the next call, which may then count as lost)."""
        exited = isinstance(self.server, MCPServerStdio) and self._stderr_done.is_set()
        return self.client is not None and self._task is not None and not self._task.done() and not exited

    async def open(self, timeout: float) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # read, even after a timeout
        self._task = asyncio.create_task(self._own(ready), name=f"mcp session {self.server.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self.close()
            raise MCPUnavailable(
                f"{self.server.describe()} did not answer within {timeout:g} s{await self.stderr_tail()}"
            ) from None
        except asyncio.CancelledError:
            await self.close()
            raise

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
        if not task.done():
            task.cancel()

    async def stderr_tail(self) -> str:
        """The last lines a stdio server wrote to stderr, quoted for an error ("" for HTTP)."""
        if not self._stdio:
            return ""
        for _ in range(10):  # a server that just died: let its last words arrive (0.5 s at most)
            if self._stderr_done.is_set():
                break
            await asyncio.sleep(0.05)
        lines = [line for line in self._stderr if line.strip()]
        return f"; its stderr ended with:\n{chr(10).join(lines)}" if lines else ""

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(await self._transport(stack), cache=None))
                if self._errlog is not None:  # spawned: the child holds its own end, and EOF means it exited
                    self._errlog.close()
                self.client = client
                ready.set_result(client)
                await self._stop.wait()
        except BaseException as e:  # noqa: BLE001 - this task only reports; a caller sees the failure
            if not ready.done():
                ready.set_exception(MCPUnavailable(await self._start_failure(e), final=self._stdio))
            elif not self._stop.is_set():
                log.warning("%s: session ended: %s", self.server.describe(), _reason(e))
        finally:
            self.client = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        server = self.server
        if isinstance(server, MCPServerStdio):
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            errlog = self._errlog = self._stderr_pipe()
            stack.callback(errlog.close)
            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) if server.env else None,
                cwd=server.cwd,
            )
            return stdio_client(params, errlog=errlog)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(server.headers or {}), timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return streamable_http_client(server.url, http_client=http)

    def _stderr_pipe(self) -> Any:
        """The write end of a pipe whose lines go to the log (and the last few to errors)."""
        read_fd, write_fd = os.pipe()
        name = self.server.name

        def pump() -> None:
            with os.fdopen(read_fd, "rb") as lines:
                for raw in lines:
                    line = raw.decode(errors="replace").rstrip()
                    self._stderr.append(line)
                    log.debug("[%s] %s", name, line)
            self._stderr_done.set()

        threading.Thread(target=pump, name=f"mcp stderr {name}", daemon=True).start()
        return os.fdopen(write_fd, "w")

    async def _start_failure(self, error: BaseException) -> str:
        server = self.server
        if isinstance(server, MCPServerStdio) and isinstance(_root(error), OSError):
            return f"{server.describe()} cannot be started: {_reason(error)}; check the command and its path"
        where = "exited or broke off before it answered" if isinstance(server, MCPServerStdio) else "cannot be reached"
        return f"{server.describe()} {where}: {_reason(error)}{await self.stderr_tail()}"


class MCPConnections:
    """The MCP sessions of one worker, by server definition."""

    def __init__(self) -> None:
        self._sessions: dict[int, _Session] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def list_tools(self, server: MCPServerStdio | MCPServerHTTP, timeout: float) -> list[Tool]:
        """Every tool the server lists now (all pages, never a cached answer)."""

        async def listing(client: Client) -> list[Tool]:
            tools, cursor = [], None
            for _ in range(MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools += page.tools
                cursor = page.next_cursor
                if cursor is None:
                    return tools
            raise MCPRefused(f"{server.describe()} lists more than {MAX_LIST_PAGES} pages of tools")

        deadline = time.monotonic() + timeout
        return await self._with_session(server, listing, retry_lost=True, deadline=deadline)

    async def call_tool(
        self,
        server: MCPServerStdio | MCPServerHTTP,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        *,
        retry_lost: bool,
    ) -> CallToolResult:
        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, arguments, meta=cast("RequestParamsMeta", meta))

        return await self._with_session(server, call, retry_lost=retry_lost, deadline=None)

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For a worker's lifetime: its sessions (and stdio servers) close when it stops."""
        try:
            yield
        finally:
            await self.aclose()

    # -- plumbing ----------------------------------------------------------------------
    async def _with_session(
        self,
        server: MCPServerStdio | MCPServerHTTP,
        use: Callable[[Client], Any],
        *,
        retry_lost: bool,
        deadline: float | None,
    ) -> Any:
        """``use(client)`` on a session of ``server``; failures retried as the module docstring says."""
        _require_sdk()
        for attempt, delay in enumerate((*RETRY_DELAYS, None)):
            left = None if deadline is None else deadline - time.monotonic()
            session: _Session | None = None
            try:
                session = await self._session(server, server.startup_timeout if left is None else max(left, 0.1))
                assert session.client is not None
                try:
                    return await use(session.client)
                finally:
                    if not server.reuse_session:
                        await session.close()
            except MCPUnavailable as e:
                if e.final:
                    raise
                failure: Exception = e
            except Exception as e:
                failure = _classify(server, e)
                if isinstance(failure, MCPRefused):
                    raise failure from e
                await self._drop(server, session)
                if isinstance(failure, MCPLost) and not retry_lost:
                    raise failure from e
            if delay is None or (deadline is not None and time.monotonic() + delay > deadline):
                raise failure
            log.warning("%s: %s; trying again in %.2fs (attempt %d)", server.describe(), failure, delay, attempt + 2)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _session(self, server: MCPServerStdio | MCPServerHTTP, timeout: float) -> _Session:
        if not server.reuse_session:
            session = _Session(server)
            await session.open(timeout)
            return session
        key = id(server)
        async with self._locks.setdefault(key, asyncio.Lock()):
            kept = self._sessions.get(key)
            if kept is not None and kept.alive:
                return kept
            fresh = _Session(server)
            await fresh.open(timeout)  # raises MCPUnavailable; nothing is kept then
            self._sessions[key] = fresh
            return fresh

    async def _drop(self, server: MCPServerStdio | MCPServerHTTP, session: _Session | None) -> None:
        if session is None:
            return
        if self._sessions.get(id(server)) is session:
            del self._sessions[id(server)]
        await session.close()


def _classify(server: MCPServerStdio | MCPServerHTTP, error: Exception) -> Exception:
    """A failure of a request on an open session: lost (the connection) or refused (the server)."""
    import anyio
    import httpx2
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST
    from pydantic import ValidationError

    root = _root(error)
    if isinstance(root, httpx2.ConnectError):
        return MCPUnavailable(f"{server.describe()} cannot be reached: {_reason(root)}")
    if isinstance(root, MCPError) and root.code == INVALID_REQUEST and root.message == "Session terminated":
        # the server answered 404 to the session's id (it restarted): it ran nothing; a new session will do
        return MCPUnavailable(f"{server.describe()} ended the session")
    transport = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, httpx2.TransportError)
    if isinstance(root, transport) or (isinstance(root, MCPError) and root.code == CONNECTION_CLOSED):
        return MCPLost(f"the connection to {server.describe()} failed: {_reason(root)}")
    if isinstance(root, MCPError):
        return MCPRefused(f"{server.describe()} refused the request: {root.message} (MCP error {root.code})")
    if isinstance(root, ValidationError | RuntimeError | httpx2.HTTPStatusError):
        return MCPRefused(f"{server.describe()} sent a reply that cannot be used: {_reason(root)}")
    return MCPLost(f"the session with {server.describe()} failed: {_reason(root)}")


def _root(error: BaseException) -> BaseException:
    """The one error inside (nested) exception groups, when there is one."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _reason(error: BaseException) -> str:
    root = _root(error)
    text = str(root).strip()
    return f"{type(root).__name__}: {text}" if text else type(root).__name__
