"""Tracing: one trace per run, through a tool, an approval, a worker SIGKILL and a sub-agent.

Spans come from the SDK's in-memory exporter (the test's client and in-process workers) and,
for a `durable-agents worker --otlp-endpoint` subprocess, from a small OTLP/HTTP receiver
here: the spans a killed worker exported before it died join the run's trace with those of
the worker that finished the run.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from durable_agents import AgentClient, PropagatingToolError, build_worker
from durable_agents.checkpoint import FinishReason, SqliteStore
from durable_agents.testing import WorkerProcess
from durable_agents.tracing import interceptor, traces_url
from tests import hook_agents, subagent_agents, tracing_agents
from tests.conftest import session_id
from tests.tracing_agents import HANG_DIR_ENV, SECRET

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Span:
    name: str
    trace: str
    id: str
    parent: str | None
    attributes: dict[str, Any]
    source: str
    status: str = ""
    """The status description (failures)."""
    events: tuple[str, ...] = ()
    """Each event's name and attributes, as text."""


def from_sdk(spans: Any) -> list[Span]:
    return [
        Span(
            s.name,
            f"{s.context.trace_id:032x}",
            f"{s.context.span_id:016x}",
            f"{s.parent.span_id:016x}" if s.parent else None,
            dict(s.attributes or {}),
            "memory",
            s.status.description or "",
            tuple(f"{e.name} {dict(e.attributes or {})}" for e in s.events),
        )
        for s in spans
    ]


class OtlpReceiver:
    """An OTLP/HTTP traces endpoint (protobuf) on 127.0.0.1 that keeps what it is sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.services: set[str] = set()
        lock, spans, services = threading.Lock(), self.spans, self.services

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                with lock:
                    for resource in request.resource_spans:
                        for kv in resource.resource.attributes:
                            if kv.key == "service.name":
                                services.add(kv.value.string_value)
                        for scope in resource.scope_spans:
                            spans.extend(_from_proto(s, self.path) for s in scope.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _from_proto(span: Any, path: str) -> Span:
    attributes = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        attributes[kv.key] = getattr(kv.value, which) if which else None
    return Span(span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex() or None, attributes, path)


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def traced_client(env, provider: TracerProvider) -> Client:
    """The test's Temporal client, tracing (its workers trace too)."""
    return Client(**{**env.client.config(), "interceptors": [interceptor(provider)]})


def named(spans: list[Span], name: str, **attributes: Any) -> list[Span]:
    return [
        s
        for s in spans
        if s.name == name
        and all(s.attributes.get(f"durable_agents.{k}", s.attributes.get(k)) == v for k, v in attributes.items())
    ]


def ancestors(span: Span, by_id: dict[str, Span]) -> list[str]:
    """Names from the span's parent up to the root it reaches (``?`` where a parent is missing)."""
    names, parent = [], span.parent
    while parent is not None:
        up = by_id.get(parent)
        if up is None:
            names.append("?")
            break
        names.append(up.name)
        parent = up.parent
    return names


def no_user_text(spans: list[Span], secret: str = SECRET) -> None:
    for s in spans:
        assert secret not in s.name and secret not in s.status and not [e for e in s.events if secret in e]
        for key, value in s.attributes.items():
            assert secret not in str(value), (s.name, key, value)


START = "StartUpdateWithStartWorkflow:AgentRun"
"""Temporal's span for ``send()``'s start of the run (update-with-start)."""


OURS = ("chat ", "execute_tool ", "approval_wait ", "store.")
"""The names of the spans we make inside activities."""


def check_run_ids(spans: list[Span], sessions: dict[str, str]) -> None:
    """Each span of ours names its session, its agent and its step (an operator filters a
    backend by session): ``sessions`` maps each session id to its agent."""
    ours = [s for s in spans if s.name.startswith(OURS)]
    assert ours
    for s in ours:
        keys = ("durable_agents.session_id", "durable_agents.agent", "durable_agents.step")
        assert all(k in s.attributes for k in keys), (s.name, s.attributes)
        assert s.attributes["durable_agents.session_id"] in sessions, (s.name, s.attributes)
        assert s.attributes["durable_agents.agent"] == sessions[s.attributes["durable_agents.session_id"]], s.name
        assert isinstance(s.attributes["durable_agents.step"], int) and s.attributes["durable_agents.step"] >= 0


def check_run_tree(spans: list[Span], sid: str) -> list[Span]:
    """The run's spans: one trace rooted at ``send traced``; each span of ours under its activity."""
    [send] = named(spans, "send traced")
    assert send.parent is None and send.attributes["durable_agents.session_id"] == sid
    run = [s for s in spans if s.trace == send.trace]
    by_id = {s.id: s for s in run}
    [start] = named(run, START)  # send() starts the run and asks for its outcome in one request
    assert start.parent == send.id and start.attributes["temporalWorkflowID"] == sid
    # every model turn, tool call and store call is under a RunActivity span, under the run's StartWorkflow
    for s in run:
        if s.name.startswith(("chat ", "execute_tool ", "approval_wait ", "store.")):
            chain = ancestors(s, by_id)
            if "?" in chain:
                continue  # below a span that never ended (the killed worker's tool call)
            assert any(n.startswith("RunActivity:durable_agents.") for n in chain), (s.name, chain)
            assert chain[-2:] == [START, "send traced"], (s.name, chain)
    chats = {s.attributes["durable_agents.step"]: s for s in named(run, "chat traced")}
    assert sorted(chats) == [1, 2, 3]
    for step, chat in chats.items():
        assert chat.attributes["gen_ai.request.model"] == "traced"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["durable_agents.agent"] == "traced"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.attributes["durable_agents.model.latency_ms"] >= 0
        assert chat.attributes["durable_agents.retries"] == chat.attributes["durable_agents.attempt"] - 1
        assert chat.attributes["durable_agents.tool_calls"] == (0 if step == 3 else 1)
        assert by_id[chat.parent].name == "RunActivity:durable_agents.model_turn"
        assert {c.name for c in run if c.parent == chat.id} >= {"store.transcript", "store.append_new"}
    [charge] = named(run, "execute_tool charge")
    assert charge.attributes["durable_agents.tool.durability"] == "at-most-once"
    assert charge.attributes["durable_agents.tool.outcome"] == "result"
    assert charge.attributes["gen_ai.tool.call.id"] and charge.attributes["durable_agents.tool.attempt"] == 1
    # its start is recorded with the read of its arguments, in one store call
    assert {c.name for c in run if c.parent == charge.id} >= {"store.begin_tool_call", "store.record_tool_result"}
    [wait] = named(run, "approval_wait charge")
    assert wait.attributes["durable_agents.approval.decision"] == "approved"
    assert wait.attributes["durable_agents.approval.duration_s"] > 0
    assert wait.attributes["durable_agents.approval.id"] == send.attributes["durable_agents.approval_id"]
    assert by_id[wait.parent].name == "RunActivity:durable_agents.record_decision"
    assert named(run, "HandleUpdate:decide")  # the decision, in the run's trace (linked to approve's)
    check_run_ids(run, {sid: "traced"})
    # a store call is counted in the step its activity works on: a model turn's in the turn's
    for chat in chats.values():
        for child in (c for c in run if c.parent == chat.id):
            assert child.attributes["durable_agents.step"] == chat.attributes["durable_agents.step"], child.name
    assert wait.attributes["durable_agents.step"] == 2  # turn 2 asked for the charge
    return run


async def test_a_run_with_a_tool_and_an_approval_is_one_trace(env, store, task_queue):
    provider, exporter = memory_provider()
    client = traced_client(env, provider)
    sid = session_id()
    async with build_worker(client, agents=[tracing_agents.traced], store=store, task_queue=task_queue):
        agents = AgentClient(client, store, task_queue)
        paused = await agents.send("traced", f"Look up {SECRET}", session_id=sid)
        assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
        await asyncio.sleep(0.2)  # a wait the span measures
        done = await agents.approve(sid, paused.approval_id, note=SECRET)
    assert done.finish_reason == FinishReason.STOP
    spans = from_sdk(exporter.get_finished_spans())
    run = check_run_tree(spans, sid)
    [look_up] = named(run, "execute_tool look_up")
    assert look_up.attributes["durable_agents.tool.durability"] == "safe-to-retry"
    assert look_up.attributes["durable_agents.attempt"] == 1
    [approve] = named(spans, "approve")
    assert approve.parent is None and approve.attributes["durable_agents.decision"] == "approved"
    assert {s.trace for s in spans} == {run[0].trace, approve.trace}
    assert named(spans, "approval_wait charge")[0].attributes["durable_agents.approval.duration_s"] >= 0.2
    no_user_text(spans)


async def test_a_forks_spans_name_the_session_it_forks(env, store, task_queue):
    """The fork's activity (a ForkSession workflow) reads the source session: its store spans say which."""
    provider, exporter = memory_provider()
    client = traced_client(env, provider)
    sid = session_id()
    async with build_worker(client, agents=[tracing_agents.traced], store=store, task_queue=task_queue):
        agents = AgentClient(client, store, task_queue)
        paused = await agents.send("traced", "Look up", session_id=sid)
        exporter.clear()
        await agents.fork(sid, from_step=1)
    spans = from_sdk(exporter.get_finished_spans())
    assert named(spans, "store.fork_session")
    check_run_ids(spans, {sid: "traced"})
    assert {s.attributes["durable_agents.step"] for s in spans if s.name.startswith(OURS)} == {paused.steps}


class CliWorker(WorkerProcess):
    """`durable-agents worker … --otlp-endpoint URL` as a subprocess (SIGKILLed by the test)."""

    def __init__(self, *, otlp: str, **kwargs: Any) -> None:
        super().__init__(["tests.tracing_agents:traced"], **kwargs)
        self.otlp = otlp

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "durable_agents.cli", "--address", self.address, "--store", self.store_url,
            "--task-queue", self.task_queue, "worker", "--agent", self.agents[0], "--otlp-endpoint", self.otlp,
        ]  # fmt: skip

    async def wait_ready(self, client: Any = None, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while "traces to " not in self.log() or not await self._polling(client):
            if not self.alive:
                raise RuntimeError(f"worker exited:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker did not start:\n{self.log()[-3000:]}")
            await asyncio.sleep(0.1)


async def _until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


async def test_a_run_resumed_after_a_worker_sigkill_stays_one_trace(env, tmp_path):
    """A `durable-agents worker --otlp-endpoint` is killed inside a tool call; an in-process worker
    finishes the run. The killed worker's exported spans and the new worker's share the trace."""
    receiver = OtlpReceiver()
    provider, exporter = memory_provider()
    client = traced_client(env, provider)
    store_path = tmp_path / "store.db"
    worker = CliWorker(
        otlp=receiver.url,
        address=env.client.service_client.config.target_host,
        store_url=f"sqlite:///{store_path}",
        task_queue=f"tracing-{uuid.uuid4().hex[:8]}",
        log_dir=tmp_path / "logs",
        cwd=ROOT,
        env={HANG_DIR_ENV: str(tmp_path), "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_SERVICE_NAME": "traced-worker"},
    )
    store = SqliteStore(store_path)
    sid = session_id()
    try:
        await worker.start_ready(env.client)
        assert f"traces to {traces_url(receiver.url)} (OTLP/HTTP)" in worker.log()
        agents = AgentClient(client, store, worker.task_queue)
        sending = asyncio.create_task(agents.send("traced", f"Look up {SECRET}", session_id=sid))
        await _until((tmp_path / f"{sid}.started").exists, 60, "the tool did not start")
        # the spans ended so far reach the receiver within the batch delay (50 ms here, 5 s by default)
        exported = ("chat traced", "StartActivity:durable_agents.execute_tool")
        await _until(lambda: all(named(receiver.spans, n) for n in exported), 20, f"{exported} not exported")
        worker.kill()  # SIGKILL, inside look_up
        async with build_worker(client, agents=[tracing_agents.traced], store=store, task_queue=worker.task_queue):
            paused = await asyncio.wait_for(sending, 120)
            assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
            done = await agents.approve(sid, paused.approval_id)
        assert done.finish_reason == FinishReason.STOP
    finally:
        worker.stop()
        store.close()
        receiver.close()
    killed = list(receiver.spans)
    assert receiver.services == {"traced-worker"}
    spans = from_sdk(exporter.get_finished_spans()) + killed
    run = check_run_tree(spans, sid)
    trace = run[0].trace
    assert {s.trace for s in killed} == {trace}  # everything the killed worker exported is the run's
    assert all(s.source == "/v1/traces" for s in killed)
    # before the kill: the workflow's first spans and turn 1, from the subprocess; its tool call never ended
    assert named(killed, "RunWorkflow:AgentRun") and named(killed, "chat traced", step=1)
    assert not named(killed, "execute_tool look_up")
    # after: the call ran again (safe to retry) as the activity's second attempt, on the new worker
    [again] = named(run, "execute_tool look_up")
    assert again.source == "memory"
    assert again.attributes["durable_agents.attempt"] == 2 and again.attributes["durable_agents.tool.attempt"] == 2
    assert again.attributes["durable_agents.tool.outcome"] == "result"
    by_id = {s.id: s for s in run}
    retried = by_id[again.parent]
    assert retried.name == "RunActivity:durable_agents.execute_tool"
    assert by_id[retried.parent].source == "/v1/traces"  # scheduled by the killed worker, run by the new one
    assert {s.source for s in named(run, "chat traced")} == {"/v1/traces", "memory"}
    no_user_text(spans)


async def test_a_subagent_run_joins_its_parents_trace_from_a_worker_only_tracing(env, store, task_queue):
    """The client does not trace: the worker alone (build_worker(tracing=…)) still gives the run one
    trace, and the sub-agent's child run is in it."""
    provider, exporter = memory_provider()
    worker = build_worker(
        env.client, agents=[subagent_agents.solo_lead], store=store, task_queue=task_queue, tracing=provider
    )
    async with worker:
        result = await AgentClient(env.client, store, task_queue).send(
            "solo-lead", "Find out.", session_id=session_id()
        )
    assert result.finish_reason == FinishReason.STOP
    spans = from_sdk(exporter.get_finished_spans())
    assert len({s.trace for s in spans}) == 1
    models = {s.attributes["gen_ai.request.model"] for s in spans if s.name.startswith("chat ")}
    assert models == {"solo-lead", "researcher"}
    assert named(spans, "StartChildWorkflow:AgentRun")
    assert len({s.attributes["temporalWorkflowID"] for s in named(spans, "RunWorkflow:AgentRun")}) == 2  # parent, child
    [tool] = named(spans, "execute_tool look_up")
    by_id = {s.id: s for s in spans}
    assert "StartChildWorkflow:AgentRun" in ancestors(tool, by_id)
    child = tool.attributes["durable_agents.session_id"]
    check_run_ids(spans, {result.session_id: "solo-lead", child: "researcher"})


async def test_a_failed_run_is_recorded_by_its_failures_type_not_its_message(env, store, task_queue):
    provider, exporter = memory_provider()
    client = traced_client(env, provider)
    hook_agents.PAYMENTS["down"] = True
    try:
        async with build_worker(client, agents=[hook_agents.propagating_agent], store=store, task_queue=task_queue):
            with pytest.raises(PropagatingToolError, match="the payment provider is down"):
                await AgentClient(client, store, task_queue).send("propagating", "Pay.", session_id=session_id())
    finally:
        hook_agents.PAYMENTS["down"] = False
    spans = from_sdk(exporter.get_finished_spans())
    [failed] = [s for s in spans if s.name == "RunActivity:durable_agents.execute_tool"]
    assert failed.status == "ApplicationError" and failed.attributes["error.type"] == "ApplicationError"
    [send] = named(spans, "send propagating")
    assert send.status == "PropagatingToolError"
    assert [s for s in spans if s.name == "CompleteWorkflow:AgentRun" and s.attributes.get("error.type")]
    no_user_text(spans, "payment provider")


def test_tracing_off_needs_no_sdk_and_asking_for_it_without_says_what_to_install(tmp_path):
    """Core imports and a worker's setup never import the OpenTelemetry SDK; `--otlp-endpoint`
    without it fails with one line naming the extra."""
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith(('opentelemetry.sdk', 'opentelemetry.exporter')):\n"
        "            raise ImportError(name, name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    check = blocker + (
        "import durable_agents, durable_agents.worker, durable_agents.client, durable_agents.cli, durable_agents.tracing\n"
        "from durable_agents import Agent, build_worker\n"
        "from durable_agents.activities import build_activities\n"
        "assert not [m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'temporalio.contrib.opentelemetry'))]\n"
        "from durable_agents.cli import main\n"
        "sys.exit(main(['--store', sys.argv[1], 'worker', '--agent', 'tests.tracing_agents:traced', '--otlp-endpoint', 'http://127.0.0.1:9']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, f"sqlite:///{tmp_path / 'store.db'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "durable-agents[otel]" in line and "OpenTelemetry SDK" in line


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom"}, "http://c:4318/custom"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, None),
    ],
)
def test_the_standard_otel_variables_turn_a_workers_tracing_on(monkeypatch, variables, expected):
    from durable_agents.tracing import endpoint_from_env

    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert endpoint_from_env() == expected
    assert traces_url("http://h:4318/") == traces_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"
