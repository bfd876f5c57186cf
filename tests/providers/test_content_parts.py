"""Content parts on the wire: images and documents to both APIs through their real
SDKs, and what each API does with the other's opaque blocks (dropped)."""

from __future__ import annotations

import base64

import anthropic
import openai
import pytest

from durable_agents.checkpoint.format import Message, ModelSettings, Role, ToolCall
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart, TextPart
from durable_agents.providers.anthropic_messages import AnthropicProvider
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.openai_chat import OpenAIProvider
from tests.fakes.llm_server import FakeLLMServer

PNG = b"\x89PNG\r\n\x1a\n fake pixels"
PDF = b"%PDF-1.4 fake pages"
PNG64, PDF64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()


def rich_input() -> Message:
    return Message.user(
        "Compare these:",
        ImagePart.from_bytes(PNG, "image/png"),
        ImagePart.from_url("https://example.com/cat.jpg"),
        DocumentPart.from_pdf(PDF, title="invoice.pdf"),
        DocumentPart.from_text("Net 30 days.", title="terms.txt"),
        DocumentPart.from_url("https://example.com/spec.pdf"),
    )


def thought_turn(srv: FakeLLMServer) -> Message:
    call = ToolCall(id="t1", name="lookup", arguments={})
    thinking = OpaquePart(provider="anthropic", data=srv.anthropic.thinking.block("Hmm."))  # validly signed
    return Message(role=Role.ASSISTANT, tool_calls=[call], parts=[thinking, TextPart(text="Looking it up.")])


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def clients(srv):
    a = anthropic.AsyncAnthropic(base_url=srv.anthropic_base_url, api_key="t", max_retries=0)
    o = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="t", max_retries=0)
    yield AnthropicProvider(a), OpenAIProvider(o)
    await a.close()
    await o.close()


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(model="m", messages=list(messages), settings=ModelSettings(anthropic_cache=False))


def test_content_is_the_text_of_the_parts():
    message = rich_input()
    assert message.content == "Compare these:" and len(message.parts) == 6
    assert Message.user("plain").parts is None  # text alone stays as format 1 wrote it
    assert Message.model_validate_json(message.to_json()) == message


async def test_images_and_documents_reach_anthropic_as_blocks(srv, clients):
    anthropic_provider, _ = clients
    await anthropic_provider.generate(request(rich_input()))
    (body,) = srv.bodies("/v1/messages")
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "Compare these:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
            "title": "invoice.pdf",
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Net 30 days."},
            "title": "terms.txt",
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/spec.pdf"}},
    ]


async def test_images_and_documents_reach_openai_chat_downgraded_as_documented(srv, clients):
    _, openai_provider = clients
    await openai_provider.generate(request(rich_input()))
    (body,) = srv.bodies("/v1/chat/completions")
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "Compare these:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "file", "file": {"filename": "invoice.pdf", "file_data": f"data:application/pdf;base64,{PDF64}"}},
        {"type": "text", "text": "terms.txt\n\nNet 30 days."},
        {"type": "text", "text": "(document at https://example.com/spec.pdf)"},
    ]


async def test_text_only_parts_stay_a_plain_string_for_openai(srv, clients):
    _, openai_provider = clients
    await openai_provider.generate(request(Message.user("one ", TextPart(text="two"))))
    assert srv.bodies("/v1/chat/completions")[0]["messages"][0]["content"] == "one two"


async def test_anthropic_thinking_is_dropped_for_openai_and_kept_for_anthropic(srv, clients):
    anthropic_provider, openai_provider = clients
    turn = thought_turn(srv)
    transcript = [Message.user("Look it up."), turn, Message.tool_result(turn.tool_calls[0], "found")]
    await openai_provider.generate(request(*transcript))
    sent = srv.bodies("/v1/chat/completions")[0]["messages"][1]
    assert sent["content"] == "Looking it up." and "Hmm." not in str(sent)
    await anthropic_provider.generate(request(*transcript))
    blocks = srv.bodies("/v1/messages")[0]["messages"][1]["content"]
    assert blocks[0] == turn.parts[0].data and [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]


def test_parts_are_checked_when_built(tmp_path):
    with pytest.raises(ValueError, match="exactly one of `data`"):
        ImagePart()
    with pytest.raises(ValueError, match="is not one of image/jpeg"):
        ImagePart.from_bytes(b"x", "image/tiff")
    with pytest.raises(ValueError, match="cannot tell an image type"):
        ImagePart.from_path(tmp_path / "notes.txt")
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "b.md").write_text("# Notes")
    assert ImagePart.from_path(tmp_path / "a.png").data == PNG64
    doc = DocumentPart.from_path(tmp_path / "b.md")
    assert (doc.text, doc.media_type, doc.title) == ("# Notes", "text/plain", "b.md")
    with pytest.raises(TypeError, match="must be str or a part"):
        Message.user("x", 3)  # type: ignore[arg-type]
