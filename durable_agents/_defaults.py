"""Defaults that light modules (the CLI's store-only commands) share with the Temporal-facing ones."""

from __future__ import annotations

DEFAULT_TASK_QUEUE = "durable-agents"
"""The task queue runs and workers use unless told another."""
