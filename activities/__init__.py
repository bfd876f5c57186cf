"""All I/O of a run: model providers, tool execution, checkpoint writes.

``build_activities`` (the activity callables a worker registers) loads the
providers and their SDKs on first use; importing ``contracts`` or
``definitions`` alone does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agents.activities.worker_activities import build_activities

__all__ = ["build_activities"]


def __getattr__(name: str) -> Any:
    if name != "build_activities":
        raise AttributeError(f"module 'durable_agents.activities' has no attribute {name!r}")
    from durable_agents.activities.worker_activities import build_activities

    return build_activities
