"""OpenAI Chat Completions provider (``openai:<model>``).

Converts the neutral transcript to Chat Completions messages and the reply
back. The SDK client is built with ``max_retries=0`` because Temporal owns
retries; ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` are read by the SDK from the
worker's environment, so they never pass through workflow inputs or history.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, ModelSettings, Role, ToolCall, ToolSpec, Usage
from durable_agents.providers import ratelimit_headers
from durable_agents.providers.base import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    TextSink,
    malformed_reply,
    non_retryable_error,
    not_a_reply,
    not_an_event_stream,
    retryable_error,
    status_error,
    unstreamed_reply,
)
from durable_agents.providers.openai_parts import openai_content
from durable_agents.providers.openai_stream import StreamedCompletion

_EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}


def openai_client() -> openai.AsyncOpenAI:
    """The SDK client from the worker's environment (OPENAI_API_KEY, OPENAI_BASE_URL), its own
    retries off (Temporal owns retries); a missing key is a configuration error."""
    try:
        return openai.AsyncOpenAI(max_retries=0)
    except openai.OpenAIError as exc:  # e.g. OPENAI_API_KEY missing
        raise non_retryable_error(
            f"openai client could not be configured: {exc}", kind=FailureType.CONFIGURATION
        ) from exc


class OpenAIProvider:
    def __init__(self, client: openai.AsyncOpenAI | None = None) -> None:
        self._client = client

    def _get_client(self) -> openai.AsyncOpenAI:
        # Built lazily so importing/registering the provider needs no key.
        if self._client is None:
            self._client = openai_client()
        return self._client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        client = self._get_client()
        params = to_openai_params(request)
        try:
            raw = await client.chat.completions.with_raw_response.create(**params)
            ratelimit_headers.heard(raw.status_code, raw.headers)  # what is left, for the budget limiter
            reply = raw.parse()
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            raise retryable_error(f"openai request failed: {exc}", kind=FailureType.MODEL_PROVIDER_RETRYABLE) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise _malformed(f"{type(exc).__name__}: {exc}") from exc
        return from_openai_reply(reply)

    async def generate_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """``generate`` over the streaming Chat Completions API (server-sent chunks): ``on_text``
        gets each content delta as it arrives; the chunks are put together into one reply."""
        client = self._get_client()
        params = {**to_openai_params(request), "stream": True, "stream_options": {"include_usage": True}}
        reply = StreamedCompletion()
        try:
            try:
                chunks = await client.chat.completions.create(**params)
            except openai.BadRequestError as exc:  # a compatible server that takes no stream_options
                if "stream_options" not in str(exc.message):
                    raise
                params.pop("stream_options")
                chunks = await client.chat.completions.create(**params)
            kind = not_an_event_stream(chunks.response)
            if kind is not None:  # a server that does not stream: its reply is read as it came
                response = from_openai_reply(await _unstreamed(request, chunks.response, kind))
                on_text(response.message.content or "")  # its text, as one piece
                return response
            async for chunk in chunks:
                text = reply.add(chunk)
                if text:
                    on_text(text)
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APIConnectionError as exc:
            raise retryable_error(f"openai request failed: {exc}", kind=FailureType.MODEL_PROVIDER_RETRYABLE) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise _malformed(f"{type(exc).__name__}: {exc}") from exc
        return from_openai_reply(reply.completion())


async def _unstreamed(request: ModelRequest, response: Any, kind: str) -> Any:
    """A chat completion (JSON, as a non-streamed request gets it) in answer to a streamed
    request: that reply; an error object is that error; anything else fails the turn."""
    wire = await unstreamed_reply("openai", request.model, response, kind)
    if "choices" in wire:
        return openai.types.chat.ChatCompletion.construct(**wire)
    if isinstance(wire.get("error"), dict):  # an error in a 200 reply
        raise status_error("openai", 500, wire, "error", response.headers)
    raise not_a_reply("openai", request.model, kind, wire)


# -- request -------------------------------------------------------------------


_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")


def max_tokens_param(model: str, settings: ModelSettings) -> str:
    """``max_completion_tokens`` for OpenAI's reasoning models, which refuse ``max_tokens``;
    ``max_tokens`` for every other name (what llama.cpp, vLLM and Ollama read; OpenAI's other
    models take both)."""
    if settings.max_tokens_param:
        return settings.max_tokens_param
    return "max_completion_tokens" if _REASONING_MODEL.match(model) else "max_tokens"


def to_openai_params(request: ModelRequest) -> dict[str, Any]:
    settings = request.settings
    params: dict[str, Any] = {
        "model": request.model,
        max_tokens_param(request.model, settings): request.max_tokens,
        "messages": [m for m in map(_to_openai_message, request.messages) if m is not None],
    }
    if request.tools:
        params["tools"] = [_tool_param(t) for t in request.tools]
        # Sent explicitly: several compatible servers read a missing tool_choice as "none".
        params["tool_choice"] = _tool_choice(settings.tool_choice or "auto")
    for name in ("temperature", "top_p", "stop", "seed", "reasoning_effort"):
        value = getattr(settings, name)
        if value is not None:
            params[name] = value
    if request.output_schema is not None:  # structured output, native mode
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.output_name or "output", "schema": request.output_schema},
        }
    if settings.extra:
        params["extra_body"] = dict(settings.extra)
    return params


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _to_openai_message(message: Message) -> dict[str, Any] | None:
    if message.role == Role.TOOL:
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content or ""}
    if message.role != Role.ASSISTANT:  # parts (images, documents) as openai_parts documents
        return {"role": message.role.value, "content": openai_content(message)}
    if not message.content and not message.tool_calls:
        return None  # the API rejects an assistant turn with neither; it says nothing
    # "" rather than null for a turn of tool calls only: OpenAI takes both, but compatible
    # servers (llama.cpp's) refuse null content with a validation error.
    wire: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        wire["tool_calls"] = [_tool_call_param(c) for c in message.tool_calls]
    return wire


def _tool_call_param(call: ToolCall) -> dict[str, Any]:
    # Invalid arguments go back exactly as the model wrote them.
    raw = call.arguments.get(INVALID_JSON_KEY) if set(call.arguments) == {INVALID_JSON_KEY} else None
    arguments = raw if isinstance(raw, str) else json.dumps(call.arguments)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _tool_param(tool: ToolSpec) -> dict[str, Any]:
    # The API requires an object schema even for tools without arguments.
    schema = tool.input_schema or _EMPTY_OBJECT_SCHEMA
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }


# -- reply -----------------------------------------------------------------------


def from_openai_reply(reply: Any) -> ModelResponse:
    # The SDK does not validate replies, so every field is checked here.
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _malformed("no choices")
    choice = choices[0]
    wire = getattr(choice, "message", None)
    if wire is None:
        raise _malformed("choices[0] has no message")
    content = getattr(wire, "content", None)
    if content is not None and not isinstance(content, str):
        raise _malformed(f"message content is {type(content).__name__}, not text")
    # A refusal is the model's answer; keep it as the turn's text.
    text = content or getattr(wire, "refusal", None) or None
    calls = [_tool_call(c) for c in getattr(wire, "tool_calls", None) or []]
    usage = getattr(reply, "usage", None)
    cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    return ModelResponse(
        message=Message(role=Role.ASSISTANT, content=text, tool_calls=calls or None),
        usage=Usage(
            input_tokens=getattr(usage, "prompt_tokens", None) or 0,
            output_tokens=getattr(usage, "completion_tokens", None) or 0,
            requests=1,
            cache_read_tokens=cached if isinstance(cached, int) else None,  # of prompt_tokens
        ),
        stop_reason=getattr(choice, "finish_reason", None),
    )


def _tool_call(call: Any) -> ToolCall:
    function = getattr(call, "function", None)
    call_id, name = getattr(call, "id", None), getattr(function, "name", None)
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise _malformed("a tool call has no id or function name")
    return ToolCall(id=call_id, name=name, arguments=decode_arguments(getattr(function, "arguments", None)))


def decode_arguments(raw: Any) -> dict[str, Any]:
    """The model's arguments string as a dict; never raises (see INVALID_JSON_KEY)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}  # some servers send "" for a tool without parameters
    if isinstance(raw, dict):
        return raw  # some compatible servers send the object itself
    if not isinstance(raw, str):
        return {INVALID_JSON_KEY: str(raw)}
    try:
        value = json.loads(raw)
    except ValueError:
        return {INVALID_JSON_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_JSON_KEY: raw}


# -- errors ------------------------------------------------------------------------


def _status_error(exc: openai.APIStatusError) -> ApplicationError:
    ratelimit_headers.heard(exc.status_code, exc.response.headers)  # a 429's pause, for the budget limiter
    return status_error("openai", exc.status_code, exc.body, exc.message, exc.response.headers)


def _malformed(detail: str) -> ApplicationError:
    return malformed_reply("openai", detail)
