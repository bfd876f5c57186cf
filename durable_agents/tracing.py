"""Tracing with OpenTelemetry: one trace per run (off unless asked for).

    durable-agents worker --agent myapp.agents:booker --otlp-endpoint http://localhost:4318

or, in code, with the OpenTelemetry SDK configured your way (or by :func:`configure`)::

    provider = durable_agents.tracing.configure("http://localhost:4318", service_name="booker-worker")
    worker = build_worker(client, agents=[booker], store=store, tracing=True)       # the global provider
    agents = await AgentClient.connect(store=store, tracing=True)                    # send()/approve() spans

Temporal's ``temporalio.contrib.opentelemetry.TracingInterceptor`` makes the spans of
workflows and activities and carries the trace context through Temporal headers: from
``AgentClient.send()`` to the run's workflow, its activities, its sub-agents' child runs and
its continuations (continue-as-new), across worker crashes. Inside activities we add
``chat {model}`` (a model turn), ``execute_tool {tool}``, ``approval_wait {tool}`` and
``store.{operation}`` spans (see :mod:`durable_agents.activities.tracing` for their attributes).
A run started by a client that does not trace still gets one trace (its id derived from the run's).

Spans carry ids, names, counts, durations and outcomes: never a prompt, tool arguments, a result,
a note or a failure's message (failures are recorded by their type), so tracing keeps what
encryption keeps out of Temporal out of your tracing backend too.

Exporting needs ``pip install 'durable-agents[otel]'`` (``opentelemetry-sdk`` and
``opentelemetry-exporter-otlp-proto-http``); without tracing nothing of it is imported.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from durable_agents.checkpoint.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import TracerProvider
    from temporalio.contrib.opentelemetry import TracingInterceptor

__all__ = ["configure", "endpoint_from_env", "interceptor", "traces_url"]

INSTALL_HINT = "pip install 'durable-agents[otel]' (opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
DEFAULT_SERVICE_NAME = "durable-agents"
TRACES_PATH = "/v1/traces"


def interceptor(tracer_provider: TracerProvider | None = None) -> TracingInterceptor:
    """Temporal's ``TracingInterceptor`` with our spans: give it to a client (its workers get it
    too) or a worker. ``tracer_provider``: default, the global one (``opentelemetry.trace``)."""
    from durable_agents._tracing_otel import DurableAgentsTracingInterceptor

    return DurableAgentsTracingInterceptor(tracer_provider)


def interceptors_for(tracing: bool | TracerProvider | None) -> list[TracingInterceptor]:
    """``[interceptor]`` for a ``tracing=`` argument (of ``build_worker``, ``connect``,
    ``AgentClient.connect``): ``False``/None is off (the default), ``True`` uses the global
    tracer provider, a tracer provider is used as given."""
    if tracing is None or tracing is False:
        return []
    return [interceptor(None if tracing is True else tracing)]


def tracer_of(interceptors: Any) -> Any:
    """Our spans' tracer, when one of ``interceptors`` is ours (else None)."""
    for each in interceptors or ():
        tracer = getattr(each, "durable_agents_tracer", None)
        if tracer is not None:
            return tracer
    return None


def traces_url(endpoint: str) -> str:
    """An OTLP/HTTP endpoint as ``OTEL_EXPORTER_OTLP_ENDPOINT`` gives it (``http://host:4318``) → its traces URL."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def endpoint_from_env() -> str | None:
    """The traces URL the standard variables name (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as is,
    else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``); None when neither is set or
    ``OTEL_SDK_DISABLED=true`` / ``OTEL_TRACES_EXPORTER=none``."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return traces_url(base) if base else None


def configure(
    endpoint: str | None = None,
    *,
    service_name: str | None = None,
    exporter: SpanExporter | None = None,
    set_global: bool = True,
) -> SdkTracerProvider:
    """An OpenTelemetry SDK tracer provider exporting spans in batches over OTLP/HTTP.

    ``endpoint``: the collector's base URL (``http://localhost:4318``; ``/v1/traces`` is
    added) or its traces URL; default from ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter reads the other ``OTEL_EXPORTER_OTLP_*``
    variables: headers, timeout, compression). ``exporter`` replaces the OTLP exporter.
    ``service_name``: default ``OTEL_SERVICE_NAME``, else ``durable-agents``
    (``OTEL_RESOURCE_ATTRIBUTES`` are added). ``set_global``: make it the process's tracer
    provider (what ``tracing=True`` uses). Call ``shutdown()`` on it at exit to flush.
    """
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        raise ConfigurationError(f"tracing needs the OpenTelemetry SDK ({e.name} is missing): {INSTALL_HINT}") from None
    if exporter is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as e:
            raise ConfigurationError(
                f"exporting spans over OTLP needs the OTLP exporter ({e.name} is missing): {INSTALL_HINT}"
            ) from None
        url = traces_url(endpoint) if endpoint else endpoint_from_env()
        exporter = OTLPSpanExporter(endpoint=url)
    name = service_name or os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
    provider = SdkTracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider
