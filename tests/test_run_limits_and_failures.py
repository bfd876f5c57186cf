"""A failed run says why (lastError, one concise Temporal failure); model settings are
recorded per run and kept by a resume; usage limits end a run with ``usage-limit``;
your own providers are named before agents use them."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agents import (
    Agent,
    ConfigurationError,
    ModelPrice,
    ModelProviderError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    UsageLimits,
    build_worker,
    register_provider,
)
from durable_agents.checkpoint import CheckpointStatus, FinishReason
from durable_agents.checkpoint.format import Message, Role, Usage
from durable_agents.cli._render import render_checkpoint, sessions_table
from durable_agents.providers import registry
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer

OPENAI_PATH = "/v1/chat/completions"


@pytest.fixture
def llm(monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        yield server


def openai_agent(**kwargs) -> Agent:
    return Agent(name="oa", model="openai:test-model", tools=[agents.get_weather, agents.book_table], **kwargs)


async def failure_event(client, sid: str):
    history = await client.temporal.get_workflow_handle(sid).fetch_history()
    (event,) = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED]
    return event.workflow_execution_failed_event_attributes.failure


# -- a failed run says why ------------------------------------------------------------------


async def test_failed_run_records_last_error_and_fails_with_one_concise_failure(llm, run_worker, store):
    llm.openai.reply_error(400, "max_tokens: 99999999 is too large for test-model")
    sid = session_id()
    async with run_worker([openai_agent()]) as client:
        with pytest.raises(ModelProviderError):
            await client.send("oa", "hi", session_id=sid)
        failure = await failure_event(client, sid)

    # one failure: the provider's message and type, no nested activity failure or causes
    assert failure.message == "openai returned 400: max_tokens: 99999999 is too large for test-model"
    assert failure.application_failure_info.type == "ModelProviderRequestError"
    assert not failure.HasField("cause")

    saved = store.load(sid)
    assert saved.status == CheckpointStatus.IN_PROGRESS  # resumable once the cause is fixed
    assert saved.last_error is not None and saved.last_error.type == "ModelProviderRequestError"
    assert "is too large for test-model" in saved.last_error.message and saved.last_error.at is not None
    assert '"lastError"' in saved.to_json()
    shown = render_checkpoint(saved, None)
    assert "failed    openai returned 400: max_tokens: 99999999 is too large" in shown
    listed = sessions_table(store.list_sessions())
    assert f"{sid}  oa     failed" in listed and f"{sid} failed: openai returned 400" in listed


async def test_next_run_clears_last_error(llm, run_worker, store):
    llm.openai.reply_error(400, "bad request")
    llm.openai.reply_text("Fine now.")
    sid = session_id()
    async with run_worker([openai_agent()]) as client:
        with pytest.raises(ModelProviderError):
            await client.send("oa", "hi", session_id=sid)
        assert store.load_header(sid).last_error is not None
        result = await client.resume(sid)
    assert result.text == "Fine now."
    assert store.load_header(sid).last_error is None
    assert store.list_sessions()[0].last_error is None


async def test_huge_provider_error_still_fails_the_run_readably(llm, run_worker, store):
    """A server that echoes the prompt in its error must not push the failure past Temporal's limit."""
    llm.openai.reply_error(400, "context length exceeded: " + "echoed prompt " * 200_000)
    sid = session_id()
    async with run_worker([openai_agent()]) as client:
        with pytest.raises(ModelProviderError) as raised:
            await client.send("oa", "hi", session_id=sid)
        failure = await failure_event(client, sid)
    assert failure.message.startswith("openai returned 400: context length exceeded: echoed prompt")
    assert len(failure.message) < 5000 and "exceeds size limit" not in failure.message
    assert "context length exceeded" in str(raised.value)
    assert len(store.load_header(sid).last_error.message) < 5000


# -- model settings -------------------------------------------------------------------------


async def test_agent_settings_reach_the_wire_and_are_recorded(llm, run_worker, store):
    llm.openai.reply_text("ok")
    agent = openai_agent(model_settings=ModelSettings(temperature=0.2, seed=11, tool_choice="required"))
    sid = session_id()
    async with run_worker([agent]) as client:
        await client.send("oa", "hi", session_id=sid)
    (body,) = llm.bodies(OPENAI_PATH)
    assert (body["temperature"], body["seed"], body["tool_choice"], body["max_tokens"]) == (0.2, 11, "required", 4096)
    recorded = store.load_header(sid).run_config.model_settings
    assert (recorded.temperature, recorded.seed, recorded.tool_choice) == (0.2, 11, "required")


async def test_run_settings_replace_the_agents_for_that_run(llm, run_worker, store):
    llm.openai.reply_text("ok")
    llm.openai.reply_text("ok again")
    agent = openai_agent(model_settings=ModelSettings(temperature=0.9))
    sid = session_id()
    async with run_worker([agent]) as client:
        await client.send("oa", "hi", session_id=sid, model_settings=ModelSettings(seed=5, tool_choice="none"))
        await client.send("oa", "and now?", session_id=sid)
    first, second = llm.bodies(OPENAI_PATH)
    assert (first.get("temperature"), first["seed"], first["tool_choice"]) == (None, 5, "none")
    assert (second["temperature"], second.get("seed"), second["tool_choice"]) == (0.9, None, "auto")


async def test_a_resumed_run_asks_the_model_as_its_run_recorded(llm, run_worker, store):
    """Paused for approval; a worker deployed with other settings answers the approval: the
    run's remaining requests use the settings the run started with."""
    llm.openai.reply_tool_calls([("charge_card", {"amount": 20}, "call_1")])
    llm.openai.reply_text("Booked.")
    gated = Agent(
        name="oa",
        model="openai:test-model",
        tools=[agents.get_weather, agents.charge_card],
        model_settings=ModelSettings(temperature=0.1),
    )
    redeployed = Agent(
        name="oa",
        model="openai:test-model",
        tools=[agents.get_weather, agents.charge_card],
        model_settings=ModelSettings(temperature=1.5),
    )
    sid = session_id()
    async with run_worker([gated]) as client:
        paused = await client.send("oa", "book", session_id=sid)
    assert paused.finish_reason == FinishReason.AWAITING_APPROVAL
    async with run_worker([redeployed]) as client:
        result = await client.approve(sid, paused.approval_id, approved=True)
    assert result.text == "Booked."
    assert agents.CALL_LOG[-1][:2] == ("charge_card", "call_1")
    assert [b["temperature"] for b in llm.bodies(OPENAI_PATH)] == [0.1, 0.1]


def test_tool_choice_must_name_a_tool_of_the_agent():
    with pytest.raises(ConfigurationError, match="tool_choice 'get_wether' is not 'auto', 'required', 'none'"):
        openai_agent(model_settings=ModelSettings(tool_choice="get_wether"))
    assert openai_agent(model_settings=ModelSettings(tool_choice="get_weather"))


# -- usage limits -----------------------------------------------------------------------------


async def test_request_limit_ends_the_run_with_usage_limit(run_worker, store):
    looping = Agent(
        name="looper-limited",
        model="scripted:loop-forever",
        tools=[agents.get_weather],
        max_steps=50,
        usage_limits=UsageLimits(max_requests=3),
    )
    sid = session_id()
    async with run_worker([looping]) as client:
        result = await client.send("looper-limited", "go", session_id=sid)
        assert result.finish_reason == FinishReason.USAGE_LIMIT
        assert result.usage.requests == 3 and result.steps == 3
        assert result.detail == "usage limit reached: 3 requests in this run (limit 3)"
        header = store.load_header(sid)
        assert header.status == CheckpointStatus.FINISHED and header.finish_reason == FinishReason.USAGE_LIMIT
        # the transcript is whole: the last turn's tool calls have their results
        messages = store.load(sid).messages
        assert messages[-1].role == Role.TOOL
        # a new run has a new budget
        again = await client.send("looper-limited", "more", session_id=sid)
    assert again.finish_reason == FinishReason.USAGE_LIMIT and again.usage.requests == 3
    assert store.load_header(sid).usage.requests == 6


async def test_output_token_limit_and_per_run_override(run_worker):
    looping = Agent(name="looper-tokens", model="scripted:loop-forever", tools=[agents.get_weather], max_steps=50)
    async with run_worker([looping]) as client:
        # each scripted turn: "again" (1 token) + 10 per tool call = 11 output tokens
        result = await client.send(
            "looper-tokens", "go", session_id=session_id(), usage_limits=UsageLimits(max_output_tokens=30)
        )
    assert result.finish_reason == FinishReason.USAGE_LIMIT
    assert result.usage.output_tokens == 33 and "33 output tokens" in (result.detail or "")


async def test_cost_limit_with_a_price(run_worker):
    price = ModelPrice(input=1_000_000, output=0)  # a dollar per input token: the test's arithmetic stays small
    looping = Agent(
        name="looper-cost",
        model="scripted:loop-forever",
        tools=[agents.get_weather],
        max_steps=50,
        usage_limits=UsageLimits(max_cost_usd=5, price=price),
    )
    async with run_worker([looping]) as client:
        result = await client.send("looper-cost", "go", session_id=session_id())
    assert result.finish_reason == FinishReason.USAGE_LIMIT
    assert result.usage.input_tokens >= 5 and "spent in this run (limit $5.0000)" in (result.detail or "")


def test_cost_limit_needs_a_known_price():
    with pytest.raises(ConfigurationError, match="max_cost_usd needs a price for 'openai:test-model'"):
        openai_agent(usage_limits=UsageLimits(max_cost_usd=1))
    assert Agent(name="priced", model="anthropic:claude-sonnet-4-5-20250929", usage_limits=UsageLimits(max_cost_usd=1))


def test_shipped_prices_match_model_families():
    from durable_agents.checkpoint.pricing import cost_usd, price_of

    assert price_of("openai:gpt-4.1-mini").input == 0.4  # not gpt-4.1's
    assert price_of("openai:gpt-4.1-2025-04-14").input == 2
    assert price_of("anthropic:claude-haiku-4-5-20251001").output == 5
    assert price_of("openai:gpt-4.10") is None and price_of("scripted:x") is None
    assert cost_usd(Usage(input_tokens=1_000_000, output_tokens=2_000_000), price_of("openai:gpt-4.1")) == 18
    # cache reads and writes are part of inputTokens, charged at their own prices
    cached = Usage(input_tokens=1_000_000, cache_read_tokens=600_000, cache_write_tokens=400_000)
    assert cost_usd(cached, price_of("anthropic:claude-sonnet-4-5")) == pytest.approx(0.6 * 0.3 + 0.4 * 3.75)


# -- your own providers -----------------------------------------------------------------------


class EchoProvider:
    async def generate(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1].content or ""
        return ModelResponse(
            message=Message(role=Role.ASSISTANT, content=f"echo: {last}"),
            usage=Usage(input_tokens=1, output_tokens=1, requests=1),
        )


@pytest.fixture
def echo_registered():
    register_provider("echo", EchoProvider)
    yield
    registry._registered.pop("echo", None)


async def test_a_registered_provider_runs_an_agent(echo_registered, run_worker):
    agent = Agent(name="echoer", model="echo:any")
    async with run_worker([agent]) as client:
        result = await client.send("echoer", "hello", session_id=session_id())
    assert result.text == "echo: hello"


async def test_build_worker_providers_serve_a_registered_name(echo_registered, env, store):
    agent = Agent(name="echoer", model="echo:any")
    build_worker(env.client, agents=[agent], store=store, task_queue="tq-echo", providers={"echo": EchoProvider()})


def test_unknown_provider_is_refused_naming_the_known_ones():
    with pytest.raises(ConfigurationError) as raised:
        Agent(name="x", model="myprov:x")
    text = str(raised.value)
    assert "model 'myprov:x' has no known provider" in text
    assert "known providers: anthropic, openai, openai-responses, scripted" in text and "register_provider" in text


def test_worker_without_the_agents_provider_refuses_to_start(echo_registered, env, store):
    agent = Agent(name="echoer", model="echo:any")
    registry._registered.pop("echo")  # a worker process that never registered it
    with pytest.raises(
        ConfigurationError, match="agent 'echoer' uses provider 'echo', which this worker does not have"
    ):
        build_worker(env.client, agents=[agent], store=store, task_queue="tq-echo")


class SilentOnceProvider:
    """Its first call fails with an exception that says nothing (as the Anthropic SDK's stream
    reader's bare ``assert`` did); its second waits until the test has read the failure."""

    def __init__(self) -> None:
        import asyncio

        self.calls = 0
        self.read = asyncio.Event()

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            raise AssertionError()
        await self.read.wait()
        return ModelResponse(message=Message(role=Role.ASSISTANT, content="fine"), usage=Usage(requests=1))


async def test_a_provider_failure_without_words_is_named_by_provider_model_and_type(env, store, task_queue):
    """What Temporal (its UI, `describe`) shows of the retried model turn's failure names the
    provider and the model and the exception's type, where it said "" before."""
    import asyncio
    import time

    from temporalio.service import RPCError

    from durable_agents import AgentClient

    provider = SilentOnceProvider()
    register_provider("silent", SilentOnceProvider)
    try:
        agent = Agent(name="silent-once", model="silent:quiet-model")
        worker = build_worker(env.client, agents=[agent], store=store, task_queue=task_queue,
                              providers={"silent": provider})  # fmt: skip
        async with worker:
            sid = session_id()
            sending = asyncio.create_task(
                AgentClient(env.client, store, task_queue).send("silent-once", "hi", session_id=sid)
            )
            failure, deadline = None, time.monotonic() + 30
            while failure is None and time.monotonic() < deadline:
                try:
                    described = await env.client.get_workflow_handle(sid).describe()
                except RPCError:  # not started yet
                    described = None
                activities = described.raw_description.pending_activities if described else []
                pending = [a for a in activities if a.attempt >= 2]
                if pending and pending[0].HasField("last_failure"):
                    failure = pending[0].last_failure
                else:
                    await asyncio.sleep(0.05)
            provider.read.set()
            result = await sending
    finally:
        registry._registered.pop("silent", None)
    assert failure is not None, "the model turn was not retried"
    assert failure.message == "silent:quiet-model failed: AssertionError (with no message of its own)"
    assert failure.application_failure_info.type == "AssertionError"  # retried as any exception is
    assert result.text == "fine" and provider.calls == 2
