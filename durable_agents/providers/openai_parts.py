"""Content parts as OpenAI Chat Completions message content.

Chat Completions has no place for other providers' blocks, so what a session
brings from elsewhere is downgraded, never sent as something it is not:

- text: a ``text`` content part; a message of text only stays a plain string
  (what every compatible server reads).
- image: an ``image_url`` part (inline images as a ``data:`` URL).
- document: a PDF as a ``file`` part (``file_data`` as a ``data:`` URL, named by
  its title); plain text as a ``text`` part headed by its title; a PDF by URL
  as a ``text`` part naming the URL (Chat Completions fetches no documents).
- opaque parts (e.g. Anthropic thinking): dropped; they mean nothing here.
- assistant turns: their text only (the API takes no images from the assistant).
"""

from __future__ import annotations

from typing import Any

from durable_agents.checkpoint.format import Message, Role
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, TextPart


def openai_content(message: Message) -> str | list[dict[str, Any]]:
    """The ``content`` of a system, user or tool message."""
    if message.parts is None or message.role != Role.USER:
        return message.content or ""
    wire = [p for part in message.parts if (p := _part(part)) is not None]
    if all(isinstance(part, TextPart) for part in message.parts) or not wire:
        return "".join(p["text"] for p in wire)
    return wire


def _part(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url if part.url is not None else f"data:{part.media_type};base64,{part.data}"
        return {"type": "image_url", "image_url": {"url": url}}
    if isinstance(part, DocumentPart):
        return _document(part)
    return None  # opaque: another provider's block


def _document(part: DocumentPart) -> dict[str, Any]:
    if part.data is not None:
        name = part.title or "document.pdf"
        return {"type": "file", "file": {"filename": name, "file_data": f"data:{part.media_type};base64,{part.data}"}}
    if part.text is not None:
        head = f"{part.title}\n\n" if part.title else ""
        return {"type": "text", "text": head + part.text}
    named = f"{part.title} " if part.title else ""
    return {"type": "text", "text": f"(document {named}at {part.url})"}
