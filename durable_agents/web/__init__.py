"""The HTTP API and the web inbox (``durable-agents web``, or ``create_app`` in your own ASGI
server): waiting approvals across sessions, decisions made by authenticated people, sessions,
transcripts, diffs, forks and live events (docs/how-to/web-inbox.md)."""

from __future__ import annotations

from durable_agents.web.app import create_app
from durable_agents.web.auth import Identity, LoginThrottle, Role, TokenFile
from durable_agents.web.views import arguments_digest

__all__ = ["Identity", "LoginThrottle", "Role", "TokenFile", "arguments_digest", "create_app"]
