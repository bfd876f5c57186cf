"""MCP servers an agent uses as tools: their definitions (what users write).

A definition lives on the worker, like a tool's code: its command, URL,
environment and headers (which may hold secrets) never enter Temporal history
or the store. A run records only the server's *name* on each of its tools'
``ToolSpec`` (``mcpServer``), with the tool's name, description and input
schema as the server listed them at the run's start.

Importing this module does not import the ``mcp`` SDK (an optional extra:
``pip install 'durable-agents[mcp]'``); connecting to a server does.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from durable_agents.checkpoint.errors import ConfigurationError

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, kw_only=True)
class MCPServerBase:
    """What every MCP server definition has: a name and the durability of its tools.

    Tool options name the server's tools as the *server* names them (before
    ``tool_prefix``); a name the server does not list is refused at run start,
    so a typo cannot leave a tool ungated.
    """

    name: str
    """Names the server in the run's config, in errors and logs (letters, digits, ``_``, ``-``)."""
    tool_prefix: str = ""
    """Prepended to each tool's name as the model sees it (e.g. ``"files_"``). Without one, a
    tool whose name clashes with a local tool or another server's is refused at run start."""
    tools: Collection[str] | None = None
    """Offer only these of the server's tools to the model; None: all it lists."""
    safe_to_retry: bool | Collection[str] = False
    """``True`` (all tools) or the tools that may run again after a crash lost their result
    (at-least-once, keyed by the idempotency key in the call's ``_meta``). Others run at
    most once: a lost result becomes a durability error."""
    needs_approval: bool | Collection[str] = False
    """``True`` (all tools) or the tools a human must approve before each call."""
    timeout: float = 60.0
    """Seconds one call may take (then it is stopped and gets a timeout result)."""
    tool_timeouts: Mapping[str, float] = field(default_factory=dict)
    """Per-tool ``timeout`` overrides."""
    heartbeat_timeout: float = 4.0
    """Seconds without a heartbeat after which a call's worker counts as dead (as for
    ``@tool``: calls heartbeat every second in the background)."""
    startup_timeout: float = 20.0
    """Seconds to start (or reach) the server and list its tools at a run's start; bounded
    further by the run start's own 30 s activity timeout."""
    reuse_session: bool = True
    """Keep one MCP session per worker and server (reconnected after a failure); False opens
    a session per call (a stdio server is then started for every call)."""

    def __post_init__(self) -> None:
        if not _SERVER_NAME.match(self.name or ""):
            raise ConfigurationError(
                f"MCP server name {self.name!r} must be 1-64 letters, digits, _ or -: it names the server "
                "in each run's recorded tool list"
            )
        for label, value in (("safe_to_retry", self.safe_to_retry), ("needs_approval", self.needs_approval)):
            if isinstance(value, str) or not isinstance(value, bool | Collection):
                raise ConfigurationError(
                    f"MCP server {self.name!r}: {label} is True, False or a set of tool names (got {value!r})"
                )
        if isinstance(self.tools, str):
            raise ConfigurationError(f"MCP server {self.name!r}: tools is a set of tool names (got {self.tools!r})")
        timeouts = [self.timeout, self.heartbeat_timeout, self.startup_timeout, *self.tool_timeouts.values()]
        if any(not isinstance(t, int | float) or t <= 0 for t in timeouts):
            raise ConfigurationError(f"MCP server {self.name!r}: timeouts must be positive numbers of seconds")

    # -- per-tool options (by the server's own tool name) ---------------------------------
    def is_safe_to_retry(self, tool: str) -> bool:
        return _chosen(self.safe_to_retry, tool)

    def requires_approval(self, tool: str) -> bool:
        return _chosen(self.needs_approval, tool)

    def timeout_for(self, tool: str) -> float:
        return float(self.tool_timeouts.get(tool, self.timeout))

    def named_tools(self) -> dict[str, set[str]]:
        """Every tool name an option names, by option: each must be a tool the server lists."""
        named = {
            "tools": set(self.tools or ()),
            "safe_to_retry": set() if isinstance(self.safe_to_retry, bool) else set(self.safe_to_retry),
            "needs_approval": set() if isinstance(self.needs_approval, bool) else set(self.needs_approval),
            "tool_timeouts": set(self.tool_timeouts),
        }
        return {option: names for option, names in named.items() if names}

    def describe(self) -> str:
        """How errors name the server: its name and where it is, never a secret."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class MCPServerStdio(MCPServerBase):
    """An MCP server the worker starts as a subprocess and talks to over stdin/stdout.

    The subprocess inherits only a safe part of the worker's environment (``PATH``,
    ``HOME``, ``USER``…, the ``mcp`` SDK's default) plus ``env``. Its stderr goes to the
    worker's log (logger ``durable_agents.mcp``); the last lines are quoted when it
    fails to start.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.command:
            raise ConfigurationError(f"MCP server {self.name!r}: command is empty")
        if isinstance(self.args, str):
            raise ConfigurationError(f"MCP server {self.name!r}: args is a list of strings (got {self.args!r})")

    def describe(self) -> str:
        return f"MCP server {self.name!r} (command {self.command!r})"


@dataclass(frozen=True, kw_only=True)
class MCPServerHTTP(MCPServerBase):
    """An MCP server reached over streamable HTTP at ``url``; ``headers`` go with every
    request (e.g. ``Authorization``) and stay on the worker."""

    url: str
    headers: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.url.startswith(("http://", "https://")):
            raise ConfigurationError(f"MCP server {self.name!r}: url must be http:// or https:// (got {self.url!r})")

    def describe(self) -> str:
        return f"MCP server {self.name!r} (url {_without_credentials(self.url)})"


MCPServer = MCPServerStdio | MCPServerHTTP
"""Any MCP server definition ``Agent(mcp_servers=[...])`` takes."""


def check_servers(agent: str, servers: Sequence[object]) -> list[MCPServerStdio | MCPServerHTTP]:
    """``servers`` as an agent keeps them: definitions with distinct names."""
    seen: set[str] = set()
    for server in servers:
        if not isinstance(server, MCPServerStdio | MCPServerHTTP):
            raise ConfigurationError(
                f"agent {agent!r}: {server!r} is not an MCP server definition; use MCPServerStdio(...) "
                "or MCPServerHTTP(...)"
            )
        if server.name in seen:
            raise ConfigurationError(f"agent {agent!r} has two MCP servers named {server.name!r}")
        seen.add(server.name)
    return list(servers)  # type: ignore[arg-type]


def _chosen(option: bool | Collection[str], tool: str) -> bool:
    return option if isinstance(option, bool) else tool in option


def _without_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part (errors and logs may be read by anyone)."""
    return re.sub(r"//[^/@]*@", "//", url, count=1)
