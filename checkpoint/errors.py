"""Typed errors, each with a stable ``code``.

Hierarchy::

    DurableAgentsError
    ├── ConfigurationError          CONFIGURATION_ERROR
    ├── CheckpointNotFoundError     CHECKPOINT_NOT_FOUND
    ├── StoreCorruptError           STORE_CORRUPT
    ├── StoreUnavailableError       STORE_UNAVAILABLE
    └── (durable_agents.errors adds the run-level errors)
"""

from __future__ import annotations


class DurableAgentsError(Exception):
    """Base of every error this project raises on purpose."""

    code: str = "DURABLE_AGENTS_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(DurableAgentsError):
    """Something is set up wrongly; the message says how to fix it."""

    code = "CONFIGURATION_ERROR"


class CheckpointNotFoundError(DurableAgentsError):
    """A session or step the store does not have."""

    code = "CHECKPOINT_NOT_FOUND"

    def __init__(self, message: str, *, session_id: str, kept_steps: list[int] | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.kept_steps = kept_steps or []


class StoreCorruptError(DurableAgentsError):
    """A store file or row that cannot be read."""

    code = "STORE_CORRUPT"


class StoreUnavailableError(DurableAgentsError):
    """A store server that cannot be reached (the message names it, never its password)."""

    code = "STORE_UNAVAILABLE"
