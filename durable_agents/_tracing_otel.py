"""The tracing interceptor: Temporal's ``TracingInterceptor`` plus our activity spans.

Imported only when tracing is asked for (``durable_agents.tracing``): it imports
``temporalio.contrib.opentelemetry`` and the OpenTelemetry API.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any, cast

import opentelemetry.trace
from opentelemetry.trace import Status, StatusCode, TracerProvider
from temporalio import activity, workflow
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, WorkflowInterceptorClassInput

from durable_agents.activities import tracing
from durable_agents.activities.contracts import EXECUTE_TOOL, MODEL_TURN, ExecuteToolOutput, ModelTurnOutput

TEMPORAL_SCOPE = "temporalio.contrib.opentelemetry"
OUR_SCOPE = "durable_agents"


class DurableAgentsTracingInterceptor(TracingInterceptor):
    """``TracingInterceptor`` (client and worker: Temporal's spans, context through headers)
    with our spans in activities, failures recorded by type only, and a run's trace even
    when the run was started by a client that does not trace."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        get = tracer_provider.get_tracer if tracer_provider is not None else opentelemetry.trace.get_tracer
        super().__init__(cast(opentelemetry.trace.Tracer, _TypeOnlyFailures(get(TEMPORAL_SCOPE))))
        self.durable_agents_tracer = get(OUR_SCOPE)
        """Our spans' tracer (``AgentClient`` finds it here)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        # Temporal's RunActivity span outside, ours inside it
        return super().intercept_activity(_ActivitySpans(next, self.durable_agents_tracer))

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        super().workflow_interceptor_class(input)
        return _RunTraceWorkflowInterceptor


class _RunTraceWorkflowInterceptor(TracingWorkflowInboundInterceptor):
    """A run started without a trace context (by a client that does not trace) still gets one
    trace: its parent is a context derived from the run's ids, the same on every replay and
    every worker, so the spans after a crash join the ones before it. (That parent span itself
    is never exported: backends show the trace with its root missing.)"""

    def _load_workflow_context_carrier(self) -> dict[str, Any] | None:
        carrier = super()._load_workflow_context_carrier()
        if carrier:
            return carrier
        info = workflow.info()
        digest = hashlib.sha256(f"durable-agents run {info.workflow_id} {info.run_id}".encode()).hexdigest()
        self._workflow_context_carrier = {"traceparent": f"00-{digest[:32]}-{digest[32:48]}-01"}
        return self._workflow_context_carrier


class _ActivitySpans(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, tracer: opentelemetry.trace.Tracer) -> None:
        super().__init__(next)
        self.tracer = tracer

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        token = tracing.TRACER.set(self.tracer)
        scoped = tracing.SCOPE.set(tracing.Scope.of(input.args[0] if input.args else None))
        try:
            info = activity.info()
            if info.activity_type == MODEL_TURN and input.args:
                return await self._model_turn(input, info)
            if info.activity_type == EXECUTE_TOOL and input.args:
                return await self._tool_call(input, info)
            return await self.next.execute_activity(input)
        finally:
            tracing.SCOPE.reset(scoped)
            tracing.TRACER.reset(token)

    async def _model_turn(self, input: ExecuteActivityInput, info: activity.Info) -> Any:
        inp = input.args[0]
        attributes = {
            "gen_ai.operation.name": "chat",
            "durable_agents.session_id": inp.session_id,
            "durable_agents.step": inp.step,
            "durable_agents.attempt": info.attempt,
            "durable_agents.retries": info.attempt - 1,
        }
        with tracing.span("chat", attributes) as current:
            output = await self.next.execute_activity(input)
            if current is not None and isinstance(output, ModelTurnOutput):
                current.set_attributes(
                    {"durable_agents.replayed": output.replayed, "durable_agents.tool_calls": len(output.tool_calls)}
                )
            return output

    async def _tool_call(self, input: ExecuteActivityInput, info: activity.Info) -> Any:
        inp = input.args[0]
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": inp.call.name,
            "gen_ai.tool.call.id": inp.call.id,
            "durable_agents.session_id": inp.session_id,
            "durable_agents.agent": inp.agent,
            "durable_agents.step": inp.step,
            "durable_agents.position": inp.position,
            "durable_agents.tool.durability": "safe-to-retry" if inp.safe_to_retry else "at-most-once",
            "durable_agents.attempt": info.attempt,
        }
        with tracing.span(f"execute_tool {inp.call.name}", attributes) as current:
            output = await self.next.execute_activity(input)
            if current is not None and isinstance(output, ExecuteToolOutput):
                current.set_attribute("durable_agents.tool.outcome", output.kind)
                if output.is_error:  # the call's result is an error (the run goes on: the model sees it)
                    current.set_attribute("error.type", output.kind)
                    current.set_status(Status(StatusCode.ERROR, output.kind))
            return output


class _TypeOnlyFailures:
    """A tracer whose spans record a failure by its type, not its message: Temporal's spans
    describe a failure as ``Type: message``, and a message may quote a prompt, a provider's
    reply or a tool's output."""

    def __init__(self, tracer: opentelemetry.trace.Tracer) -> None:
        self._tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        return _TypeOnlySpan(self._tracer.start_span(*args, **kwargs))

    @contextlib.contextmanager
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        kwargs["record_exception"] = False
        with self._tracer.start_as_current_span(*args, **kwargs) as span:
            yield _TypeOnlySpan(span)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tracer, name)


class _TypeOnlySpan(opentelemetry.trace.Span):
    """A span (so that contexts holding it propagate) that delegates all but failures' messages."""

    def __init__(self, span: opentelemetry.trace.Span) -> None:
        self._span = span

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if isinstance(status, Status):
            if status.description:
                kind = status.description.split(":", 1)[0]
                self._span.set_attribute("error.type", kind)
                status = Status(status.status_code, kind)
            self._span.set_status(status)
        else:
            self._span.set_status(status, description.split(":", 1)[0] if description else None)

    def record_exception(self, exception: BaseException, *args: Any, **kwargs: Any) -> None:
        self._span.set_attribute("error.type", type(exception).__name__)
        self._span.set_status(Status(StatusCode.ERROR, type(exception).__name__))

    def get_span_context(self) -> opentelemetry.trace.SpanContext:
        return self._span.get_span_context()

    def end(self, end_time: int | None = None) -> None:
        self._span.end(end_time)

    def set_attributes(self, attributes: Any) -> None:
        self._span.set_attributes(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        self._span.add_event(name, attributes, timestamp)

    def update_name(self, name: str) -> None:
        self._span.update_name(name)

    def is_recording(self) -> bool:
        return self._span.is_recording()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)
