"""Secrets stay out of Temporal history; a payload codec works without other changes."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import PayloadCodec

from durable_agents import AgentClient, ModelProviderError, build_worker
from durable_agents.client.connection import data_converter
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer
from tests.test_providers_e2e import _agent


class ReversingCodec(PayloadCodec):
    """A stand-in for encryption: payload bytes reversed and base64-encoded."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": b"binary/reversed"}, data=base64.b64encode(p.SerializeToString()[::-1]))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != b"binary/reversed":
                out.append(p)
                continue
            decoded = Payload()
            decoded.ParseFromString(base64.b64decode(p.data)[::-1])
            out.append(decoded)
        return out


async def _history_bytes(client: Client, workflow_id: str) -> bytes:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return b"".join(e.SerializeToString() for e in history.events)


async def test_api_keys_never_enter_workflow_history(env, store, task_queue, monkeypatch):
    secret = "sk-ant-test-SECRET-4f9a1c"
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
        server.anthropic.reply_tool_calls([("get_weather", {"city": "Paris"}, "toolu_9")])
        server.anthropic.reply_text("Rainy.")
        sid = session_id()
        async with build_worker(env.client, agents=[_agent("anthropic")], store=store, task_queue=task_queue):
            await AgentClient(env.client, store, task_queue).send("anthropic-agent", "Paris?", session_id=sid)
        assert any(secret in str(r["headers"]) for r in server.requests)  # the key was used…
    assert secret.encode() not in await _history_bytes(env.client, sid)  # …and never recorded


async def test_a_payload_codec_encodes_everything_in_history(env, store, task_queue):
    encoded = Client(
        env.client.service_client, namespace=env.client.namespace, data_converter=data_converter(ReversingCodec())
    )
    sid = session_id()
    async with build_worker(encoded, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        result = await AgentClient(encoded, store, task_queue).send(
            "booker", "Book a table for 2 tonight", session_id=sid
        )
    assert result.text == "Booked a table for 2 at Roscioli in Rome."
    raw = await _history_bytes(env.client, sid)
    # input, summaries, tool calls and results are encoded; only search attributes
    # (agent name, status, step, approval id) stay readable, as Temporal requires
    assert b"Book a table" not in raw and b"Paris" not in raw and b"Roscioli" not in raw
    assert b"binary/reversed" in raw


async def test_with_a_codec_failure_messages_are_encoded_too(env, store, task_queue, monkeypatch):
    """A provider's refusal quotes the request; with a codec, failures are encoded like payloads."""
    encoded = Client(
        env.client.service_client, namespace=env.client.namespace, data_converter=data_converter(ReversingCodec())
    )
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        server.anthropic.reply_error(400, "prompt mentions Zanzibar-7781 which is not allowed")
        sid = session_id()
        async with build_worker(encoded, agents=[_agent("anthropic")], store=store, task_queue=task_queue):
            with pytest.raises(ModelProviderError, match="Zanzibar-7781"):  # the caller still reads it
                await AgentClient(encoded, store, task_queue).send("anthropic-agent", "Zanzibar?", session_id=sid)
    raw = await _history_bytes(env.client, sid)
    assert b"Zanzibar-7781" not in raw and b"Zanzibar?" not in raw
    assert b"Encoded failure" in raw  # the failure is there, its text inside the codec's payload
