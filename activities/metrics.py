"""Our Prometheus metrics, through the Temporal SDK's metric meter.

Recorded with ``activity.metric_meter()`` (and ``workflow.metric_meter()``,
which skips replays), so they are exported wherever the worker's runtime
exports the SDK's own metrics (``durable-agents worker --metrics-port``,
``durable_agents.observability.metrics_runtime``) and cost nothing when it
exports none: the SDK's meter is then a no-op. No dependency of ours.

==============================================  =========================================================
``durable_agents_runs{agent,status}``           runs that ended: ``stop``, ``max-steps``, ``usage-limit``,
                                                ``aborted``, ``failed`` (counter)
``durable_agents_steps{agent}``                 model turns generated (not replayed ones)
``durable_agents_model_tokens{agent,model,kind}``  tokens: ``input``, ``output``, ``cache_read``, ``cache_write``
``durable_agents_tool_calls{agent,tool,outcome}``  tool calls by outcome: ``result``, ``error``, ``tool-timeout``,
                                                ``validation-error``, ``unknown-tool``, ``tool-durability-error``,
                                                ``recorded`` (a result recorded before, not run again) …
``durable_agents_durability_errors{agent,tool}``  calls that may or may not have taken effect (not rerun)
``durable_agents_approvals{agent,event}``       ``requested``, ``approved``, ``rejected``
``durable_agents_approvals_waiting``            sessions waiting for a decision, from the store (gauge)
``durable_agents_budget_wait_seconds{agent,model}``  how long each model call under a rate-limit budget waited
                                                for it (histogram; 0 when it did not wait)
``durable_agents_budget_refusals{agent,model,status}``  calls under a budget the provider refused (429, 529)
==============================================  =========================================================

Every series also carries the SDK's labels (``namespace``, ``task_queue``,
``activity_type`` or ``workflow_type``). Labels hold names only: no user text.
A metric that cannot be recorded never fails the run.
"""

from __future__ import annotations

from temporalio import activity, workflow
from temporalio.common import MetricMeter

__all__ = ["approval", "budget_refusal", "budget_wait", "model_turn", "run_ended", "tool_call"]

PREFIX = "durable_agents_"
DURABILITY_ERROR = "tool-durability-error"


def _meter() -> MetricMeter | None:
    try:
        if workflow.in_workflow():
            return workflow.metric_meter()
        if activity.in_activity():
            return activity.metric_meter()
    except RuntimeError:  # e.g. a sync activity in another process: no meter there
        pass
    return None


def _add(name: str, description: str, value: int, labels: dict[str, str]) -> None:
    if value <= 0:
        return
    meter = _meter()
    if meter is None:
        return
    try:
        meter.create_counter(PREFIX + name, description).add(value, labels)
    except Exception:  # noqa: BLE001 - a metric never fails a run
        pass


def run_ended(agent: str, status: str) -> None:
    """A run ended (workflow code: not counted again when the workflow replays)."""
    _add("runs", "agent runs that ended, by status", 1, {"agent": agent, "status": status})


def model_turn(agent: str, model: str, usage: object) -> None:
    """A model turn was generated; ``usage`` is its ``checkpoint.format.Usage``."""
    _add("steps", "model turns generated", 1, {"agent": agent})
    for kind in ("input", "output", "cache_read", "cache_write"):
        tokens = getattr(usage, f"{kind}_tokens", None) or 0
        _add("model_tokens", "model tokens, by kind", tokens, {"agent": agent, "model": model, "kind": kind})


def tool_call(agent: str, tool: str, outcome: str) -> None:
    _add("tool_calls", "tool calls, by outcome", 1, {"agent": agent, "tool": tool, "outcome": outcome})
    if outcome == DURABILITY_ERROR:
        _add("durability_errors", "tool calls that may or may not have taken effect", 1, {"agent": agent, "tool": tool})


def approval(agent: str, event: str) -> None:
    """``requested``, ``approved`` or ``rejected``."""
    _add("approvals", "approval requests and decisions", 1, {"agent": agent, "event": event})


def approvals_waiting(meter: MetricMeter, count: int) -> None:
    """Set the gauge of sessions waiting for a decision (the worker's health loop reads the store)."""
    meter.create_gauge(PREFIX + "approvals_waiting", "sessions waiting for an approval decision").set(count)


def budget_wait(agent: str, model: str, seconds: float) -> None:
    """A model call under a rate-limit budget got it (or handed its wait to the workflow) after ``seconds``."""
    meter = _meter()
    if meter is None:
        return
    try:
        meter.create_histogram_float(
            PREFIX + "budget_wait_seconds", "how long model calls waited for their rate-limit budget", "s"
        ).record(max(seconds, 0.0), {"agent": agent, "model": model})
    except Exception:  # noqa: BLE001 - a metric never fails a run
        pass


def budget_refusal(agent: str, model: str, status: int) -> None:
    """The provider refused a call under a budget (429 or 529): its budget pauses for everyone."""
    _add(
        "budget_refusals",
        "model calls under a budget the provider refused",
        1,
        {"agent": agent, "model": model, "status": str(status)},
    )
