"""Timeouts and retry policies of the activities a run schedules."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

STORE_TIMEOUT = timedelta(seconds=30)
STORE_HEARTBEAT_SECONDS = 5.0
"""Store activities heartbeat, so a worker killed inside one is noticed in seconds."""
STORE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=[
        "ModelProviderRequestError",
        "ModelProviderMalformedReply",
        "ConfigurationError",
    ],
)
TOOL_TIMEOUT_SECONDS = 60.0
"""A tool's start-to-close timeout unless it declares its own (``@tool(timeout_seconds=…)``)."""
TOOL_HEARTBEAT_SECONDS = 10.0
"""A tool activity heartbeats in the background; a dead worker is noticed after this."""
# Tool activities retry only infrastructure failures (a dead worker, a store
# hiccup): a tool's own exception is recorded as its result, not raised.
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=30))
