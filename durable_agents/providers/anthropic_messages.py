"""Anthropic Messages API provider (``anthropic:<model>``).

Converts the neutral transcript to Messages API turns and the reply back
(content blocks and prompt caching: :mod:`.anthropic_blocks`). Extended
thinking (``ModelSettings.thinking_budget_tokens``) is sent when set; its
blocks come back as opaque parts and are replayed verbatim.
A streamed request answered with a plain JSON message (a gateway or proxy that does not
stream) is read as the non-streamed reply it is; any other reply that is no event stream
fails the turn, non-retryable, saying what the server sent.
The SDK client is built with ``max_retries=0`` because Temporal owns retries;
the API key and ``ANTHROPIC_BASE_URL`` are read by the SDK from the worker's
environment, so they never pass through workflow inputs or history.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, ModelSettings, Role, ToolCall, Usage
from durable_agents.checkpoint.parts import OpaquePart, TextPart
from durable_agents.providers import anthropic_blocks as blocks
from durable_agents.providers import ratelimit_headers
from durable_agents.providers.anthropic_settings import thinking_problem
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


class AnthropicProvider:
    def __init__(self, client: anthropic.AsyncAnthropic | None = None) -> None:
        self._client = client

    def _get_client(self) -> anthropic.AsyncAnthropic:
        # Built lazily so importing/registering the provider needs no key.
        if self._client is None:
            try:
                client = anthropic.AsyncAnthropic(max_retries=0)
            except anthropic.AnthropicError as exc:
                raise _config_error(str(exc)) from exc
            # Without credentials the SDK only fails at request time, with a
            # TypeError that Temporal would retry; fail clearly and finally.
            if client.api_key is None and client.auth_token is None and client.credentials is None:
                raise _config_error("no credentials; set ANTHROPIC_API_KEY in the worker's environment")
            self._client = client
        return self._client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        client = self._get_client()
        params = to_anthropic_params(request)
        try:
            # The raw reply too: opaque blocks are kept exactly as the API wrote them.
            raw = await client.messages.with_raw_response.create(**params)
            reply, wire = await raw.parse(), await raw.json()
            ratelimit_headers.heard(raw.status_code, raw.headers)  # what is left, for the budget limiter
        except anthropic.APIStatusError as exc:
            raise _status_error(exc) from exc
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError
            raise retryable_error(
                f"anthropic request failed: {exc}", kind=FailureType.MODEL_PROVIDER_RETRYABLE
            ) from exc
        except (anthropic.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise _malformed(f"{type(exc).__name__}: {exc}") from exc
        return from_anthropic_reply(reply, wire)

    async def generate_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """``generate`` over the streaming Messages API (server-sent events): ``on_text`` gets
        each text delta as it arrives; the reply is the SDK's accumulated message."""
        client = self._get_client()
        params = to_anthropic_params(request)
        try:
            async with client.messages.stream(**params) as stream:
                kind = not_an_event_stream(stream.response)
                if kind is not None:  # a server that does not stream
                    response = await _unstreamed(request, stream.response, kind)
                    on_text(response.message.content or "")  # its text, as one piece
                    return response
                began = False
                async for event in stream:
                    began = began or event.type == "message_start"
                    if event.type == "text":
                        on_text(event.text)
                if not began:  # (the SDK's final message would fail a bare assertion)
                    raise retryable_error(
                        f"anthropic:{request.model}: the event stream ended before its message began "
                        "(no message_start event)",
                        kind=FailureType.MODEL_PROVIDER_RETRYABLE,
                    )
                reply = await stream.get_final_message()
                ratelimit_headers.heard(stream.response.status_code, stream.response.headers)
        except anthropic.APIStatusError as exc:  # also an `error` event inside the stream (e.g. overloaded)
            raise _stream_error(exc) from exc
        except anthropic.APIConnectionError as exc:
            raise retryable_error(
                f"anthropic request failed: {exc}", kind=FailureType.MODEL_PROVIDER_RETRYABLE
            ) from exc
        except (anthropic.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise _malformed(f"{type(exc).__name__}: {exc}") from exc
        return from_anthropic_reply(reply)


async def _unstreamed(request: ModelRequest, response: Any, kind: str) -> ModelResponse:
    """The reply to a streamed request that came as something else than an event stream: a
    message (JSON, as a non-streamed request gets it) is that reply; an error object is the
    error it says; anything else fails the turn, non-retryable (the same request to the same
    server gets the same answer), naming what the server sent."""
    wire = await unstreamed_reply("anthropic", request.model, response, kind)
    if wire.get("type") == "message":
        return from_anthropic_reply(anthropic.types.Message.construct(**wire), wire)
    if wire.get("type") == "error":  # an error in a 200 reply: as in a stream
        inner = wire.get("error")
        status = _STREAM_ERROR_STATUS.get(str(inner.get("type") if isinstance(inner, dict) else None), 500)
        raise status_error("anthropic", status, wire, "error", response.headers)
    raise not_a_reply("anthropic", request.model, kind, wire)


# -- request -------------------------------------------------------------------


def to_anthropic_params(request: ModelRequest) -> dict[str, Any]:
    settings = request.settings
    problem = thinking_problem(settings, request.max_tokens)
    if problem:  # a run's own settings; an agent's were checked when it was defined
        raise non_retryable_error(f"anthropic: {problem}", kind=FailureType.CONFIGURATION)
    cache = settings.anthropic_cache is not False
    turns = blocks.to_turns(request.messages)
    if cache:
        blocks.mark_cache_breakpoints(turns)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        # With caching, every turn keeps its block form, so a cached prefix is re-sent byte for byte.
        "messages": turns if cache else [blocks.simplified(t) for t in turns],
    }
    system = "\n\n".join(m.content for m in request.messages if m.role == Role.SYSTEM and m.content)
    if system:
        params["system"] = [{**blocks.text_block(system), "cache_control": blocks.EPHEMERAL}] if cache else system
    if request.tools:
        tools = [blocks.tool_param(t) for t in request.tools]
        if cache:
            tools[-1] = {**tools[-1], "cache_control": blocks.EPHEMERAL}
        params["tools"] = tools
        choice = _tool_choice(settings.tool_choice)
        if choice:
            params["tool_choice"] = choice
    if settings.thinking_budget_tokens is not None and blocks.thinking_can_continue(turns):
        params["thinking"] = {"type": "enabled", "budget_tokens": settings.thinking_budget_tokens}
    params.update(_sampling(settings))
    return params


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral transcript -> Messages API turns, without cache breakpoints."""
    return [blocks.simplified(t) for t in blocks.to_turns(messages)]


def _tool_choice(choice: str | None) -> dict[str, Any] | None:
    # None leaves the API's default ("auto"), which Anthropic applies when tools are offered.
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def _sampling(settings: ModelSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    body: dict[str, Any] = {}
    # The SDK's ``messages.create`` takes no ``temperature``/``top_p`` arguments (newer models
    # reject them, older ones still read them): they go in the JSON body, where the API reads them.
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.stop:
        out["stop_sequences"] = list(settings.stop)
    # ``seed`` and ``reasoning_effort`` have no Messages API counterpart: not sent.
    body.update(settings.extra or {})
    if body:
        out["extra_body"] = body  # merged into the JSON body by the SDK
    return out


# -- reply -----------------------------------------------------------------------


def from_anthropic_reply(reply: Any, wire: object = None) -> ModelResponse:
    """The SDK's parsed reply as a neutral turn; ``wire`` (the reply's JSON) supplies the
    exact blocks that are kept verbatim."""
    # The SDK does not validate replies, so every field is checked here.
    content = getattr(reply, "content", None)
    if not isinstance(content, list):
        raise _malformed("no content list")
    raw_blocks = wire.get("content") if isinstance(wire, dict) else None
    parts: list[TextPart | OpaquePart] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(content):
        if getattr(block, "type", None) == "tool_use":
            calls.append(_tool_call(block))
        else:  # text, and what must go back verbatim: thinking, redacted thinking, server tools
            exact = raw_blocks[index] if isinstance(raw_blocks, list) and index < len(raw_blocks) else None
            same = isinstance(exact, dict) and exact.get("type") == getattr(block, "type", None)
            parts.append(blocks.reply_part(exact if same else block))
    text = "".join(p.text for p in parts if isinstance(p, TextPart)) or None
    # Parts only when the turn holds more than text: a plain turn stays as format 1 wrote it.
    kept = parts if any(isinstance(p, OpaquePart) for p in parts) else None
    message = Message(role=Role.ASSISTANT, content=text, tool_calls=calls or None, parts=kept)
    return ModelResponse(
        message=message, usage=_usage(getattr(reply, "usage", None)), stop_reason=getattr(reply, "stop_reason", None)
    )


def _usage(usage: Any) -> Usage:
    # The API's input_tokens leaves out the cached prefix; Usage.input_tokens counts every input token.
    read = getattr(usage, "cache_read_input_tokens", None)
    written = getattr(usage, "cache_creation_input_tokens", None)
    return Usage(
        input_tokens=(getattr(usage, "input_tokens", None) or 0) + (read or 0) + (written or 0),
        output_tokens=getattr(usage, "output_tokens", None) or 0,
        requests=1,
        cache_read_tokens=read if isinstance(read, int) else None,
        cache_write_tokens=written if isinstance(written, int) else None,
    )


def _tool_call(block: Any) -> ToolCall:
    call_id, name, args = getattr(block, "id", None), getattr(block, "name", None), getattr(block, "input", None)
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise _malformed("a tool_use block has no id or name")
    if not isinstance(args, dict):  # the tool layer answers with a validation error; the run goes on
        return ToolCall(id=call_id, name=name, arguments={INVALID_JSON_KEY: json.dumps(args, default=str)})
    return ToolCall(id=call_id, name=name, arguments=args)


# -- errors ------------------------------------------------------------------------


def _status_error(exc: anthropic.APIStatusError) -> ApplicationError:
    ratelimit_headers.heard(exc.status_code, exc.response.headers)  # a 429's pause, for the budget limiter
    return status_error("anthropic", exc.status_code, exc.body, exc.message, exc.response.headers)


_STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _stream_error(exc: anthropic.APIStatusError) -> ApplicationError:
    """An error before the stream (its HTTP status) or an ``error`` event inside it (HTTP 200:
    the status its error type stands for, so an overloaded API mid-stream is retried)."""
    if exc.status_code != 200:
        return _status_error(exc)
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error")
    error: dict[str, Any] = inner if isinstance(inner, dict) else body
    status = _STREAM_ERROR_STATUS.get(str(error.get("type")), 500)
    return status_error("anthropic", status, exc.body, exc.message, exc.response.headers)


def _config_error(detail: str) -> ApplicationError:
    return non_retryable_error(f"anthropic client could not be configured: {detail}", kind=FailureType.CONFIGURATION)


def _malformed(detail: str) -> ApplicationError:
    return malformed_reply("anthropic", detail)
