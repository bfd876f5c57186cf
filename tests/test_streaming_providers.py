"""``stream()`` on the Anthropic and OpenAI wire-format fakes that stream (server-sent
events), through Temporal and the official SDKs: the deltas are the provider's, they
add up to each stored turn, a stream that breaks midway is retried and says so, and
``watch`` from offset 0 after the run ended replays every event."""

from __future__ import annotations

import pytest

from durable_agents import Agent
from durable_agents.checkpoint import FinishReason, Role
from durable_agents.events import (
    RunFinished,
    StepRetried,
    TextDelta,
    ToolCallFinished,
    TurnStored,
    step_text,
)
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer
from tests.test_streaming import assert_deltas_add_up, collect
from tests.test_versioning import cli_runner  # durable-agents in this process

PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "openai-responses": "/v1/responses"}
SCRIPTS = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "responses"}
ANSWER = "It rains in Paris: take an umbrella, and boots if you have them."


@pytest.fixture
def llm(monkeypatch):
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        yield server


def _agent(provider: str) -> Agent:
    return Agent(name=f"{provider}-streamer", model=f"{provider}:test-model", tools=[agents.get_weather])


@pytest.mark.parametrize("provider", PATHS)
async def test_stream_on_the_streaming_api_adds_up_to_the_stored_turns(provider, llm, run_worker, store):
    script = getattr(llm, SCRIPTS[provider])
    script.reply_tool_calls([("get_weather", {"city": "Paris"}, "call_1")], text="Let me check the sky.")
    script.reply_text(ANSWER)
    llm.stream_delay = 0.01  # the answer's 16 deltas span several of the worker's writes
    sid = session_id()
    async with run_worker([_agent(provider)]) as client:
        events = await collect(client.stream(f"{provider}-streamer", "Weather in Paris?", session_id=sid))
        replayed = await collect(client.watch(sid, after=0))

    result = events[-1].result
    assert isinstance(events[-1], RunFinished) and result.finish_reason == FinishReason.STOP
    assert result.text == ANSWER and store.load(sid).messages[-1].content == ANSWER
    assert all(body["stream"] is True for body in llm.bodies(PATHS[provider]))  # the streaming API, each step
    assert_deltas_add_up(events, result.messages)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    # the provider's own pieces (merged only when several arrive within one flush)
    assert len([d for d in deltas if d.step == 2]) > 1
    assert not any(isinstance(e, StepRetried) for e in events)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.tool_call_id == "call_1" and '"sky": "rain"' in finished.result.replace('":"', '": "')
    if provider == "openai-responses":  # reasoning items kept whole from the stream, and sent back
        [turn, _] = [m for m in store.load(sid).messages if m.role == Role.ASSISTANT]
        kept = [p.data for p in turn.parts or [] if getattr(p, "data", {}).get("type") == "reasoning"]
        issued = [i for i in llm.replies(PATHS[provider])[0]["output"] if i["type"] == "reasoning"]
        assert kept == issued and kept[0]["encrypted_content"]
        assert kept[0] in llm.bodies(PATHS[provider])[1]["input"]  # the next request carries it back
    # watch from offset 0 after the run ended: every event again, the same ones
    assert [(e.offset, e.model_dump(exclude={"result"})) for e in replayed] == [
        (e.offset, e.model_dump(exclude={"result"})) for e in events
    ]
    assert replayed[-1].result.model_dump() == result.model_dump()


@pytest.mark.parametrize("provider", PATHS)
async def test_a_stream_broken_midway_is_retried_and_the_stream_says_so(provider, llm, run_worker, store):
    script = getattr(llm, SCRIPTS[provider])
    script.reply_text(ANSWER)  # the first attempt's answer, cut after a few deltas...
    script.fail_stream_after(10 if provider == "openai-responses" else 6)  # a few text deltas in
    script.reply_text(ANSWER)  # ...and the retry's, whole
    sid = session_id()
    async with run_worker([_agent(provider)]) as client:
        events = await collect(client.stream(f"{provider}-streamer", "Weather?", session_id=sid))

    assert len(llm.bodies(PATHS[provider])) == 2  # the model was called again: its turn was never stored
    [retried] = [e for e in events if isinstance(e, StepRetried)]
    assert retried.step == 1 and retried.attempt == 2 and retried.discarded_attempts == [1]
    lost = [e for e in events if isinstance(e, TextDelta) and e.attempt == 1]
    assert lost and "".join(d.text for d in lost) != ANSWER  # a cut answer streamed first
    assert events.index(retried) > events.index(lost[-1])
    [stored] = [e for e in events if isinstance(e, TurnStored)]
    assert stored.attempt == 2 and stored.text == ANSWER == step_text(events, 1)
    assert [m.content for m in store.load(sid).messages if m.role == Role.ASSISTANT] == [ANSWER]


@pytest.mark.parametrize("provider", PATHS)
async def test_a_gateway_that_does_not_stream_still_serves_durable_agents_run(
    provider, env, llm, run_worker, store, task_queue
):  # type: ignore[no-untyped-def]
    """`durable-agents run` streams every model call; an endpoint that answers `"stream": true`
    with a plain JSON reply (a gateway that does not stream) gets one request per turn, read as
    the reply it is, and the run goes on. Before, Anthropic's SDK stream reader raised a bare
    AssertionError, retried as transient, and the run failed with "Application error" (OpenAI's:
    "malformed reply: no choices"; the Responses API's: retried as a stream cut short)."""
    llm.streams = False
    script = getattr(llm, SCRIPTS[provider])
    script.reply_tool_calls([("get_weather", {"city": "Paris"}, "call_1")], text="Let me check the sky.")
    script.reply_text(ANSWER)
    sid = session_id()
    cli = cli_runner(env, store, task_queue)
    async with run_worker([_agent(provider)]):
        code, out, err = await cli("run", f"{provider}-streamer", "Weather in Paris?", "--session", sid)
    assert code == 0, (out, err)
    assert ANSWER in out
    bodies = llm.bodies(PATHS[provider])
    assert len(bodies) == 2 and all(b["stream"] is True for b in bodies)  # one (streamed) request a turn
    assert [m.content for m in store.load(sid).messages if m.role == Role.ASSISTANT] == [
        "Let me check the sky.",
        ANSWER,
    ]
    events = await collect_watch(env, store, task_queue, sid)
    assert step_text(events, 2) == ANSWER  # its text, as one piece


async def collect_watch(env, store, task_queue: str, sid: str):  # type: ignore[no-untyped-def]
    from durable_agents import AgentClient

    return await collect(AgentClient(env.client, store, task_queue).watch(sid, after=0))


async def test_a_reply_that_is_no_stream_and_no_message_fails_the_run_at_once_saying_what_came(
    env, llm, run_worker, store, task_queue
):  # type: ignore[no-untyped-def]
    """A proxy's HTML page in answer to a streamed request: the same request would get the same
    page, so the run fails at the first attempt, naming the provider and model and what the
    server sent (not "Application error" after ten paid attempts)."""
    llm.anthropic.reply_raw(200, "<html><h1>Gateway says hello</h1></html>", headers={"content-type": "text/html"})
    sid = session_id()
    cli = cli_runner(env, store, task_queue)
    async with run_worker([_agent("anthropic")]):
        code, out, err = await cli("run", "anthropic-streamer", "Weather in Paris?", "--session", sid)
    assert code == 1, (out, err)
    [line] = [line for line in err.splitlines() if "failed" in line]
    assert f"run of session '{sid}' failed: anthropic:test-model: the server answered a streamed request" in line
    assert "with text/html, not an event stream" in line and "Gateway says hello" in line
    assert len(llm.bodies(PATHS["anthropic"])) == 1  # not retried
    assert "ModelProviderMalformedReply" in store.load_header(sid).last_error.type
