"""OpenAI Responses API provider (``openai-responses:<model>``).

Stateless (``store: false``, no ``previous_response_id``): the transcript in
the checkpoint is the conversation, as with every provider, so a run resumes
on any worker and a session forks like any other. What reasoning models need
to keep their chain of thought across tool calls is kept verbatim: every
output item of a reply other than its text (``reasoning`` items with their
``encrypted_content``, which is asked for, and the ``function_call`` items
with their ids) is an opaque part of the assistant turn, in reply order, and
goes back in the next request exactly as it came, before the calls' results.

Mapping: system messages go first as ``system`` input messages; user messages
as ``input_text`` / ``input_image`` / ``input_file`` parts; an assistant turn as
its opaque items and its text (an ``output_text`` message) in their order,
then any tool call the reply did not carry (a fork's patched turn, another
provider's session) as a ``function_call``; a tool result as
``function_call_output``. Opaque parts of other providers are dropped, like
Chat Completions does. ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` come from the
worker's environment.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import openai
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, Role, ToolCall, ToolSpec, Usage
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart, TextPart
from durable_agents.providers import ratelimit_headers
from durable_agents.providers.base import (
    ModelRequest,
    ModelResponse,
    TextSink,
    malformed_reply,
    not_a_reply,
    not_an_event_stream,
    retryable_error,
    status_error,
    unstreamed_reply,
)
from durable_agents.providers.openai_chat import _EMPTY_OBJECT_SCHEMA, decode_arguments, openai_client

PROVIDER = "openai-responses"


class OpenAIResponsesProvider:
    def __init__(self, client: openai.AsyncOpenAI | None = None) -> None:
        self._client = client

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai_client()
        return self._client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        client = self._get_client()
        with _sdk_errors():
            reply = await client.responses.create(**to_responses_params(request))
        return from_responses_reply(reply)

    async def generate_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """``generate`` over the streaming Responses API (``stream: true``, typed server-sent
        events): ``on_text`` gets each ``response.output_text.delta`` as it arrives; the reply is
        the response ``response.completed`` (or ``response.incomplete``) carries whole, so its
        reasoning items keep their ``encrypted_content`` exactly as ``generate`` would."""
        client = self._get_client()
        final: Any = None
        try:
            with _sdk_errors():
                events = await client.responses.create(**to_responses_params(request), stream=True)
                kind = not_an_event_stream(events.response)
                if kind is not None:  # a server that does not stream: its reply is read as it came
                    response = from_responses_reply(await _unstreamed(request, events.response, kind))
                    on_text(response.message.content or "")  # its text, as one piece
                    return response
                async for event in events:
                    kind = getattr(event, "type", None)
                    if kind == "response.output_text.delta":
                        if event.delta:
                            on_text(event.delta)
                    elif kind in ("response.completed", "response.incomplete"):
                        final = event.response
                    elif kind == "response.failed":
                        raise _stream_failure(getattr(event.response, "error", None))
                    elif kind == "error":
                        raise _stream_failure(event)
        except openai.APIError as exc:  # the SDK's word for an ``error`` event in the stream
            raise _stream_failure(exc) from exc
        if final is None:  # the connection closed before the response did
            raise retryable_error(
                f"{PROVIDER} stream ended before response.completed", kind=FailureType.MODEL_PROVIDER_RETRYABLE
            )
        return from_responses_reply(final)


async def _unstreamed(request: ModelRequest, response: Any, kind: str) -> Any:
    """A response object (JSON, as a non-streamed request gets it) in answer to a streamed
    request: that reply; an error object is that error; anything else fails the turn."""
    wire = await unstreamed_reply(PROVIDER, request.model, response, kind)
    if wire.get("object") == "response" and isinstance(wire.get("output"), list):
        return openai.types.responses.Response.construct(**wire)
    if isinstance(wire.get("error"), dict):  # an error in a 200 reply
        raise status_error(PROVIDER, 500, wire, "error", response.headers)
    raise not_a_reply(PROVIDER, request.model, kind, wire)


@contextlib.contextmanager
def _sdk_errors() -> Iterator[None]:
    """The SDK's failures as ours: an HTTP status (final or retried by its class), a lost
    connection (retried), a reply that does not parse (malformed)."""
    try:
        yield
    except openai.APIStatusError as exc:
        raise _status_error(exc) from exc
    except openai.APIConnectionError as exc:
        raise retryable_error(f"{PROVIDER} request failed: {exc}", kind=FailureType.MODEL_PROVIDER_RETRYABLE) from exc
    except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
        raise malformed_reply(PROVIDER, f"{type(exc).__name__}: {exc}") from exc


def _stream_failure(error: Any) -> ApplicationError:
    """A failure the API reports inside the stream (``error`` / ``response.failed``): retried,
    as the API's own mid-stream failures are transient (overload, server errors)."""
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or "the response failed"
    return retryable_error(
        f"{PROVIDER} stream failed: {message}" + (f" ({code})" if code else ""),
        kind=FailureType.MODEL_PROVIDER_RETRYABLE,
    )


# -- request -------------------------------------------------------------------------


def to_responses_params(request: ModelRequest) -> dict[str, Any]:
    settings = request.settings
    params: dict[str, Any] = {
        "model": request.model,
        "input": [item for m in request.messages for item in _input_items(m)],
        "max_output_tokens": request.max_tokens,
        "store": False,
        # Stateless: reasoning travels back to us encrypted, and we send it again.
        "include": ["reasoning.encrypted_content"],
    }
    if request.tools:
        params["tools"] = [_tool_param(t) for t in request.tools]
        choice = settings.tool_choice or "auto"
        params["tool_choice"] = (
            choice if choice in ("auto", "required", "none") else {"type": "function", "name": choice}
        )
    for name in ("temperature", "top_p"):
        value = getattr(settings, name)
        if value is not None:
            params[name] = value
    if settings.reasoning_effort is not None:
        params["reasoning"] = {"effort": settings.reasoning_effort}
    if request.output_schema is not None:
        params["text"] = {
            "format": {"type": "json_schema", "name": request.output_name or "output", "schema": request.output_schema}
        }
    extra = dict(settings.extra or {})
    if settings.stop is not None or settings.seed is not None:
        # Not Responses parameters; compatible servers may read them from the body.
        extra.update({k: v for k, v in (("stop", settings.stop), ("seed", settings.seed)) if v is not None})
    if extra:
        params["extra_body"] = extra
    return params


def _input_items(message: Message) -> list[dict[str, Any]]:
    if message.role == Role.TOOL:
        return [
            {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.content or ""}
        ]
    if message.role == Role.ASSISTANT:
        return _assistant_items(message)
    if message.role == Role.USER and message.parts is not None:
        content = [p for part in message.parts if (p := _user_part(part)) is not None]
        return [{"role": "user", "content": content}] if content else []
    return [{"role": message.role.value, "content": message.content or ""}]


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    calls = {c.id: c for c in message.tool_calls or []}
    items: list[dict[str, Any]] = []
    sent: set[str] = set()
    parts = message.parts
    if parts is None:
        parts = [TextPart(text=message.content)] if message.content else []
    for part in parts:
        if isinstance(part, OpaquePart) and part.provider == PROVIDER:
            item = dict(part.data)
            if item.get("type") == "function_call":
                call = calls.get(str(item.get("call_id")))
                if call is None:
                    continue  # the turn no longer has this call (a fork's patch)
                item.update(name=call.name, arguments=_arguments(call))
                sent.add(call.id)
            items.append(item)
        elif isinstance(part, TextPart) and part.text:
            items.append(
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": part.text}]}
            )
    for call in message.tool_calls or []:
        if call.id not in sent:
            items.append(
                {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": _arguments(call)}
            )
    return items


def _arguments(call: ToolCall) -> str:
    from durable_agents.providers.base import INVALID_JSON_KEY

    raw = call.arguments.get(INVALID_JSON_KEY) if set(call.arguments) == {INVALID_JSON_KEY} else None
    return raw if isinstance(raw, str) else json.dumps(call.arguments)


def _user_part(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url if part.url is not None else f"data:{part.media_type};base64,{part.data}"
        return {"type": "input_image", "image_url": url}
    if isinstance(part, DocumentPart):
        if part.data is not None:
            return {
                "type": "input_file",
                "filename": part.title or "document.pdf",
                "file_data": f"data:{part.media_type};base64,{part.data}",
            }
        if part.url is not None:
            return {"type": "input_file", "file_url": part.url}
        head = f"{part.title}\n\n" if part.title else ""
        return {"type": "input_text", "text": head + (part.text or "")}
    return None  # another provider's opaque block


def _tool_param(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema or _EMPTY_OBJECT_SCHEMA,
        "strict": False,
    }


# -- reply ---------------------------------------------------------------------------


def from_responses_reply(reply: Any) -> ModelResponse:
    output = getattr(reply, "output", None)
    if not isinstance(output, list):
        raise malformed_reply(PROVIDER, "the reply has no output list")
    parts: list[Any] = []
    calls: list[ToolCall] = []
    for item in output:
        data = item.model_dump(mode="json", exclude_none=True) if hasattr(item, "model_dump") else item
        if not isinstance(data, dict):
            raise malformed_reply(PROVIDER, f"an output item is {type(data).__name__}, not an object")
        kind = data.get("type")
        if kind == "message":
            parts += _message_parts(data)
        elif kind == "function_call":
            call_id, name = data.get("call_id"), data.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise malformed_reply(PROVIDER, "a function_call has no call_id or name")
            calls.append(ToolCall(id=call_id, name=name, arguments=decode_arguments(data.get("arguments"))))
            parts.append(OpaquePart(provider=PROVIDER, data=data))
        else:  # reasoning, and whatever else the API adds: kept, sent back as it came
            parts.append(OpaquePart(provider=PROVIDER, data=data))
    text = "".join(p.text for p in parts if isinstance(p, TextPart)) or None
    usage = getattr(reply, "usage", None)
    details = getattr(usage, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    only_text = all(isinstance(p, TextPart) for p in parts)
    return ModelResponse(
        message=Message(
            role=Role.ASSISTANT, content=text, tool_calls=calls or None, parts=None if only_text else parts
        ),
        usage=Usage(
            input_tokens=getattr(usage, "input_tokens", None) or 0,
            output_tokens=getattr(usage, "output_tokens", None) or 0,
            requests=1,
            cache_read_tokens=cached if isinstance(cached, int) else None,
        ),
        stop_reason="tool_calls" if calls else getattr(reply, "status", None),
    )


def _message_parts(data: dict[str, Any]) -> list[Any]:
    parts: list[Any] = []
    for block in data.get("content") or []:
        if not isinstance(block, dict):
            raise malformed_reply(PROVIDER, "a message content block is not an object")
        if block.get("type") == "output_text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif block.get("type") == "refusal" and isinstance(block.get("refusal"), str):
            parts.append(TextPart(text=block["refusal"]))  # the model's answer, as Chat Completions keeps it
    return parts


def _status_error(exc: openai.APIStatusError) -> ApplicationError:
    ratelimit_headers.heard(exc.status_code, exc.response.headers)  # a 429's pause, for the budget limiter
    return status_error(PROVIDER, exc.status_code, exc.body, exc.message, exc.response.headers)
