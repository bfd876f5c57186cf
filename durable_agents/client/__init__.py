"""The client side: what an application uses to drive runs.

``AgentClient`` (``client``) starts, resumes, approves, forks and lists runs; ``connect``
(``connection``) makes a Temporal client the way Temporal's own tools do; ``RunResult``
(``result``) is what a run returns; following a run's events and outcomes (``streams``,
``outcomes``) and listing the approvals that wait (``approvals``) are the client's helpers.

``from durable_agents.client import AgentClient`` imports the client on first use, so the
CLI's store-only commands, which use ``result`` and ``outcomes``, load no Temporal client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agents.client.client import AgentClient as AgentClient
    from durable_agents.client.client import fork_workflow_id as fork_workflow_id


def __getattr__(name: str) -> Any:
    """A name of ``durable_agents.client.client`` (the module this package was)."""
    return getattr(importlib.import_module("durable_agents.client.client"), name)
