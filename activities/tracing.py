"""Our OpenTelemetry spans inside activities: model turns, tool calls, approval waits, store calls.

Off unless the worker runs with ``durable_agents.tracing.interceptor()`` (``build_worker(tracing=…)``,
``durable-agents worker --otlp-endpoint``): that interceptor sets :data:`TRACER` for the duration
of each activity. Without it every helper here returns at once (one context-variable read), and
``opentelemetry`` is not even imported.

Spans carry ids, names, counts, durations and outcomes only: never a prompt, an argument, a
result, a note or a failure message (a failed span's status names the exception's type).

Every span here carries the activity's ``durable_agents.session_id``, ``.agent`` and ``.step``
(its :class:`Scope`): from the activity's input where it says them (a model turn's step is the
turn's), else from the session's checkpoint header, read once before the activity's first
store call (only when tracing is on, and only when the input leaves one unsaid).

============================  ==================================================================
``chat {model}``              a model turn: ``gen_ai.*`` (provider, model, input/output tokens,
                              cache read/creation tokens), ``durable_agents.step``, ``.attempt``,
                              ``.retries``, ``.replayed`` (the stored turn, no provider call),
                              ``.budget.wait_ms`` (the wait for its rate-limit budget, when it has one),
                              ``.model.latency_ms``, ``.tool_calls`` (how many the turn asks for)
``execute_tool {tool}``       a tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
                              ``durable_agents.tool.durability`` (``safe-to-retry`` |
                              ``at-most-once``), ``.tool.attempt`` (the tool's invocation count),
                              ``.attempt`` (the activity's), ``.tool.outcome`` (``result``,
                              ``error``, ``recorded``, ``tool-durability-error``, …)
``approval_wait {tool}``      from the pause's save to the decision's record:
                              ``durable_agents.approval.id``, ``.decision`` (``approved`` |
                              ``rejected``), ``.duration_s``
``store.{operation}``         each store call an activity makes (``store.append``,
                              ``store.record_tool_result``, ``store.transcript``, …)
============================  ==================================================================
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from durable_agents.activities.contracts import ApprovalDecision
    from durable_agents.checkpoint.format import CheckpointHeader, RunConfig, ToolCall, Usage

TRACER: ContextVar[Tracer | None] = ContextVar("durable_agents_tracer", default=None)
"""The tracer of the running activity's worker; None: tracing is off (the default)."""

PREFIX = "durable_agents."


@dataclass
class Scope:
    """The session, agent and step the running activity works on: every span of ours says them."""

    session_id: str | None = None
    agent: str | None = None
    step: int | None = None
    looked_up: bool = False
    """The session's header was read for what the input left unsaid (once per activity)."""

    @classmethod
    def of(cls, inp: Any) -> Scope:
        """What an activity's input says (its ``session_id``, ``agent``, ``step`` fields)."""
        session_id, agent, step = (getattr(inp, name, None) for name in ("session_id", "agent", "step"))
        return cls(
            session_id if isinstance(session_id, str) else None,
            agent if isinstance(agent, str) else None,
            step if isinstance(step, int) and not isinstance(step, bool) else None,
        )

    def attributes(self) -> dict[str, Any]:
        known = {"session_id": self.session_id, "agent": self.agent, "step": self.step}
        return {PREFIX + key: value for key, value in known.items() if value is not None}

    def unresolved(self) -> bool:
        """The input left the agent or the step unsaid and the header was not read yet."""
        return self.session_id is not None and (self.agent is None or self.step is None) and not self.looked_up

    def learn(self, header: CheckpointHeader | None) -> None:
        """Fill what the input left unsaid from the session's header (None: no such session
        yet, so step 0); what the input says stands."""
        self.looked_up = True
        if header is not None and self.agent is None:
            self.agent = header.agent
        if self.step is None:
            self.step = header.step_index if header is not None else 0


SCOPE: ContextVar[Scope | None] = ContextVar("durable_agents_span_scope", default=None)
"""The running activity's :class:`Scope` (set with :data:`TRACER`)."""


def on() -> bool:
    return TRACER.get() is not None


def scope_needing_header() -> Scope | None:
    """The running activity's scope when tracing is on and it still needs the session's header."""
    if TRACER.get() is None:
        return None
    scope = SCOPE.get()
    return scope if scope is not None and scope.unresolved() else None


def _scoped(attributes: dict[str, Any] | None) -> dict[str, Any]:
    scope = SCOPE.get()
    return {**(scope.attributes() if scope is not None else {}), **(attributes or {})}


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any] | None = None, tracer: Tracer | None = None) -> Iterator[Span | None]:
    """A child span of the current one named ``name``, when tracing is on (else ``None``).

    ``tracer``: default, the running activity's (:data:`TRACER`). An exception marks the span
    failed with the exception's type only (its message may quote user text)."""
    tracer = tracer or TRACER.get()
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    given = _scoped(attributes)
    with tracer.start_as_current_span(
        name, attributes=given, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as e:
            if not isinstance(e, GeneratorExit):
                current.set_attribute("error.type", type(e).__name__)
                current.set_status(Status(StatusCode.ERROR, type(e).__name__))
            raise
        finally:  # what the scope learned meanwhile (the header read by the span's first store call)
            learned = {k: v for k, v in _scoped(None).items() if k not in given}
            if learned:
                current.set_attributes(learned)


def annotate(**attributes: Any) -> None:
    """Set ``durable_agents.<key>`` attributes on the current span (when tracing is on; None values skipped)."""
    if TRACER.get() is not None:
        annotate_span(**attributes)


def annotate_span(**attributes: Any) -> None:
    """:func:`annotate` on the current span, whoever made it (a client's span)."""
    from opentelemetry import trace

    current = trace.get_current_span()
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(key if key.startswith("gen_ai.") else PREFIX + key, value)


F = TypeVar("F", bound=Callable[..., Any])


def store_operation(name: str) -> Callable[[F], F]:
    """Names the span of a store call of ours made by a function whose name is not the
    operation's (``store.<name>``): the span names stay what the tracing page lists."""

    def named(fn: F) -> F:
        fn.store_operation = name  # type: ignore[attr-defined]
        return fn

    return named


def store_call(fn: Callable[..., Any]) -> contextlib.AbstractContextManager[Span | None]:
    """The span of one store call made by an activity (``ActivityDeps.in_store`` and friends)."""
    if TRACER.get() is None:
        return contextlib.nullcontext()
    qualname = getattr(fn, "__qualname__", "") or ""
    if (operation := getattr(fn, "store_operation", None)) is not None:
        name = operation
    elif "<locals>" in qualname:  # a closure writing several things at once: named after its function
        name = qualname.split(".<locals>")[0].rsplit(".", 1)[-1]
    else:
        name = getattr(fn, "__name__", "call")
    name = name.lstrip("_") or name
    return span(f"store.{name}", {PREFIX + "store.operation": name})


def model_of(config: RunConfig | None) -> None:
    """The model turn's span gets the run's agent and model (once the checkpoint is read)."""
    if TRACER.get() is None or config is None:
        return
    from opentelemetry import trace

    provider, _, model = config.model.partition(":")
    current = trace.get_current_span()
    current.update_name(f"chat {model or provider}")
    current.set_attributes(
        {
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model or provider,
            PREFIX + "agent": config.agent,
        }
    )


def model_generated(usage: Usage, started: float) -> None:
    """The provider answered (``started``: ``time.perf_counter()`` before the call)."""
    if TRACER.get() is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        PREFIX + "model.latency_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    if usage.cache_read_tokens is not None:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    current.set_attributes(attributes)


def budget_waited(seconds: float) -> None:
    """The model call waited ``seconds`` for its rate-limit budget (``durable_agents.providers.budgets``)."""
    if TRACER.get() is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attribute(PREFIX + "budget.wait_ms", round(seconds * 1000, 3))


def approval_waited(header: CheckpointHeader, decision: ApprovalDecision, call: ToolCall) -> None:
    """A span for the wait that ``decision`` ends: from the pause's save (the header's time, while
    the checkpoint still records the pause) to now. A retried record (the pause already cleared) adds none."""
    tracer = TRACER.get()
    if tracer is None or header.approval_id != decision.approval_id or header.updated_at is None:
        return
    paused = header.updated_at if header.updated_at.tzinfo else header.updated_at.replace(tzinfo=UTC)
    now = datetime.now(UTC)
    waited = max((now - paused).total_seconds(), 0.0)
    outcome = "approved" if decision.approved else "rejected"
    wait = tracer.start_span(
        f"approval_wait {call.name}",
        start_time=int(paused.timestamp() * 1e9),
        attributes={
            **_scoped(None),
            PREFIX + "approval.id": decision.approval_id,
            PREFIX + "approval.decision": outcome,
            PREFIX + "approval.duration_s": round(waited, 3),
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        },
    )
    wait.end(end_time=int(now.timestamp() * 1e9))
