"""Timeouts and retry policies of the activities a run schedules.

Every policy is bounded: a failure that outlasts it fails the run, whose
checkpoint stays ``in-progress`` (resume it once the cause is fixed). The
docs/how-to/production/crash-recovery.md lists the figures.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from durable_agents.checkpoint.errors import FailureType

STORE_TIMEOUT = timedelta(seconds=30)
STORE_HEARTBEAT_SECONDS = 5.0
"""Store activities heartbeat, so a worker killed inside one is noticed in seconds."""
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10), maximum_attempts=20
)
"""About 2.5 minutes of a store that cannot be written (or dead workers) before the run fails."""
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=10,
    non_retryable_error_types=[
        FailureType.MODEL_PROVIDER_REQUEST,
        FailureType.MODEL_PROVIDER_MALFORMED_REPLY,
        FailureType.CONFIGURATION,
    ],
)
TOOL_TIMEOUT_SECONDS = 60.0
"""A tool's start-to-close timeout unless it declares its own (``@tool(timeout=…)``)."""
TOOL_TIMEOUT_MARGIN_SECONDS = 15.0
"""The tool activity outlives the tool's own timeout by this much, so a slow tool
is stopped (and gets a timeout result) by the activity, not killed by Temporal."""
TOOL_HEARTBEAT_SECONDS = 10.0
"""A tool activity heartbeats in the background; a dead worker is noticed after this
(when the tool's spec names none; ``@tool``'s default is the same)."""
# Tool activities retry only infrastructure failures (a dead worker, a store
# hiccup): a tool's own exception is recorded as its result, not raised.
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=30), maximum_attempts=11
)
# The first retry comes 0.2 s after a failure: a killed worker's call is asked again
# soon after its heartbeat timeout (bench/recovery.py). The attempts keep about the
# same window as before for an outage to pass: ≈ 100 s of backoff for a model turn
# (0.2 s doubling to 60 s), ≈ 110 s for a tool activity (to 30 s).
RECORD_FAILURE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2), maximum_attempts=3
)
"""Saying why a run failed is best effort: a store that is down is often why."""

SANDBOXED = False
"""Our workflows run outside Temporal's workflow sandbox. The sandbox re-imports a run's
modules for each new run and proxies what they touch, to catch non-deterministic calls
at run time; ours are held to determinism by other means (tests/test_workflow_determinism.py:
workflows/ imports no I/O, clock or randomness, and recorded histories replay), so each
new run and step skips that cost (``bench/capacity.py``). Your own workflows on the same
worker keep the sandbox."""
