"""Anthropic Messages API provider (``anthropic:<model>``).

Converts the neutral transcript to Messages API turns and the reply back.
The SDK client is built with ``max_retries=0`` because Temporal owns retries;
the API key and ``ANTHROPIC_BASE_URL`` are read by the SDK from the worker's
environment, so they never pass through workflow inputs or history.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from temporalio.exceptions import ApplicationError

from durable_agents.activities.providers.base import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    malformed_reply,
    non_retryable_error,
    retryable_error,
    status_error,
)
from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, Role, ToolCall, ToolSpec, Usage

_EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}


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
            reply = await client.messages.create(**params)
        except anthropic.APIStatusError as exc:
            raise _status_error(exc) from exc
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError
            raise retryable_error(
                f"anthropic request failed: {exc}", kind=FailureType.MODEL_PROVIDER_RETRYABLE
            ) from exc
        except (anthropic.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise _malformed(f"{type(exc).__name__}: {exc}") from exc
        return from_anthropic_reply(reply)


# -- request -------------------------------------------------------------------


def to_anthropic_params(request: ModelRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_anthropic_messages(request.messages),
    }
    system = "\n\n".join(m.content for m in request.messages if m.role == Role.SYSTEM and m.content)
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [_tool_param(t) for t in request.tools]
    return params


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral transcript -> Messages API turns (system messages go elsewhere).

    Consecutive user-side items (tool results, then perhaps new user input)
    are merged into ONE user turn: the API requires every tool_result of an
    assistant turn to sit in the single user turn right after it.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == Role.SYSTEM:
            continue
        if message.role == Role.ASSISTANT:
            blocks = _assistant_blocks(message)
            if blocks:  # the API rejects empty assistant turns; an empty one says nothing
                turns.append({"role": "assistant", "content": blocks})
            continue
        block = _tool_result_block(message) if message.role == Role.TOOL else _text_block(message.content or "")
        if turns and turns[-1]["role"] == "user":
            turns[-1]["content"].append(block)
        else:
            turns.append({"role": "user", "content": [block]})
    return [_simplify(turn) for turn in turns]


def _simplify(turn: dict[str, Any]) -> dict[str, Any]:
    # A lone text block is sent as a plain string, the API's most common shape.
    content = turn["content"]
    if turn["role"] == "user" and len(content) == 1 and content[0]["type"] == "text":
        return {"role": "user", "content": content[0]["text"]}
    return turn


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = [_text_block(message.content)] if message.content else []
    for call in message.tool_calls or []:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return blocks


def _tool_result_block(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id or "",
        "content": message.content or "",
    }
    if message.is_error:
        block["is_error"] = True
    return block


def _tool_param(tool: ToolSpec) -> dict[str, Any]:
    # The API requires an object schema even for tools without arguments.
    schema = tool.input_schema or _EMPTY_OBJECT_SCHEMA
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


# -- reply -----------------------------------------------------------------------


def from_anthropic_reply(reply: Any) -> ModelResponse:
    # The SDK does not validate replies, so every field is checked here.
    content = getattr(reply, "content", None)
    if not isinstance(content, list):
        raise _malformed("no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(getattr(block, "text", None) or "")
        elif kind == "tool_use":
            calls.append(_tool_call(block))
        # Other block types (e.g. thinking) carry nothing the transcript keeps.
    message = Message(role=Role.ASSISTANT, content="".join(texts) or None, tool_calls=calls or None)
    usage = getattr(reply, "usage", None)
    return ModelResponse(
        message=message,
        usage=Usage(
            input_tokens=getattr(usage, "input_tokens", None) or 0,
            output_tokens=getattr(usage, "output_tokens", None) or 0,
            requests=1,
        ),
        stop_reason=getattr(reply, "stop_reason", None),
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
    return status_error("anthropic", exc.status_code, exc.body, exc.message, exc.response.headers)


def _config_error(detail: str) -> ApplicationError:
    return non_retryable_error(f"anthropic client could not be configured: {detail}", kind=FailureType.CONFIGURATION)


def _malformed(detail: str) -> ApplicationError:
    return malformed_reply("anthropic", detail)
