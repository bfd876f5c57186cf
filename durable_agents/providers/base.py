"""The provider contract: one neutral request in, one assistant turn out.

Providers never retry on their own (SDK clients are built with
``max_retries=0``): Temporal owns retries. A provider raises
``ApplicationError`` built by :func:`retryable_error` or
:func:`non_retryable_error` so the model activity's retry policy does the right
thing (429/5xx/timeouts retried, honouring Retry-After; other 4xx not).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, ModelSettings, ToolSpec, Usage

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})

INVALID_JSON_KEY = "__invalid_json__"
"""Arguments the model sent that are not a JSON object are kept under this key,
so the tool layer answers with a validation error instead of the run failing."""


class ModelRequest(BaseModel):
    model: str
    """The model name without the provider prefix, e.g. ``claude-sonnet-4-6``."""
    messages: list[Message]
    """The transcript, system messages included, in order; cut by the run's context policy
    when it has one (``Agent(context=…)``)."""
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 4096
    settings: ModelSettings = Field(default_factory=ModelSettings)
    """Sampling, tool choice and extras as the run recorded them (unset fields: not sent)."""
    output_schema: dict[str, Any] | None = None
    """Ask for a final answer matching this JSON schema with the API's own structured output."""
    output_name: str | None = None
    session_id: str = ""
    step: int = 0
    position: int | None = None
    """Where the reply is stored in the session's transcript (``len(messages)`` unless a context
    policy cut them); None: not said (a request built by hand)."""
    purpose: Literal["turn", "summary"] = "turn"
    """``summary``: a ``SummarizeOlder`` policy's request for a summary of older turns (no
    tools; its answer is stored as the summary), not the agent's next turn."""


class ModelResponse(BaseModel):
    message: Message
    """The assistant turn: role ``assistant``, text ``content``, ``tool_calls``."""
    usage: Usage
    stop_reason: str | None = None


class ModelProvider(Protocol):
    async def generate(self, request: ModelRequest) -> ModelResponse: ...


TextSink = Callable[[str], None]
"""Called with each piece of the model's text as the provider streams it."""


class StreamingModelProvider(ModelProvider, Protocol):
    """A provider that can stream: ``generate_stream`` calls ``on_text`` with each piece of
    the reply's text as it arrives, then returns the same reply ``generate`` would. A run
    that streams uses it when the provider has it (else its text arrives as one piece)."""

    async def generate_stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse: ...


def retry_after_seconds(headers: object) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header, if any."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = get("retry-after")
    if value:
        try:
            return max(float(value), 0.0)
        except ValueError:
            return None
    return None


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def retryable_error(message: str, *, kind: FailureType, retry_after: float | None = None) -> ApplicationError:
    return ApplicationError(
        message,
        type=kind,
        non_retryable=False,
        next_retry_delay=timedelta(seconds=retry_after) if retry_after else None,
    )


def non_retryable_error(message: str, *, kind: FailureType) -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


MAX_PROVIDER_TEXT = 2000
"""A provider's explanation is kept to this many characters in failures (some servers echo the prompt)."""


def provider_message(body: object, fallback: str) -> str:
    """The API's own explanation (``error.message`` in the body), else ``fallback``; one line, bounded."""
    text = fallback
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(body.get("detail"), (str, list)):  # FastAPI-style servers
            text = str(body["detail"])
    elif isinstance(body, str) and body:
        text = body
    text = " ".join(text.split())
    return text if len(text) <= MAX_PROVIDER_TEXT else text[:MAX_PROVIDER_TEXT] + "…"


_VALIDATION_MARKERS = ("validation error", "invalid_request", "invalid request", "badrequest", "bad request")


def is_request_error_body(body: object, message: str) -> bool:
    """A 5xx whose body says the request itself is invalid (some compatible servers answer a
    request they cannot parse with 500): retrying the same request cannot succeed."""
    kind = ""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            kind = f"{error.get('type') or ''} {error.get('code') or ''}"
    text = f"{kind} {message}".lower()
    return any(marker in text for marker in _VALIDATION_MARKERS)


def status_error(provider: str, status: int, body: object, fallback: str, headers: object) -> ApplicationError:
    """An HTTP error from a provider: 408/409/425/429/5xx retried (honouring Retry-After), other 4xx final."""
    text = provider_message(body, fallback)
    message = f"{provider} returned {status}: {text}"
    if status >= 500 and is_request_error_body(body, text):
        return non_retryable_error(
            message + " (the server refused the request itself; retrying it cannot help)",
            kind=FailureType.MODEL_PROVIDER_REQUEST,
        )
    if is_retryable_status(status):
        return retryable_error(
            message, kind=FailureType.MODEL_PROVIDER_RETRYABLE, retry_after=retry_after_seconds(headers)
        )
    return non_retryable_error(message, kind=FailureType.MODEL_PROVIDER_REQUEST)


EVENT_STREAM = "text/event-stream"


def not_an_event_stream(response: Any) -> str | None:
    """The content type of an HTTP reply to a streamed request when it is no event stream (a
    gateway or proxy in front of the API that does not stream); None when it is one."""
    kind = str(response.headers.get("content-type") or "")
    return None if kind.lower().startswith(EVENT_STREAM) else kind or "no content type"


async def unstreamed_reply(provider: str, model: str, response: Any, kind: str) -> dict[str, Any]:
    """The JSON object a server answered a streamed request with (``kind``: its content type), for
    the provider to read as the non-streamed reply it may be; any other body fails the turn,
    non-retryable (the same request to the same server gets the same answer), saying what came."""
    body = await response.aread()
    try:
        wire = json.loads(body)
    except ValueError:
        wire = None
    if isinstance(wire, dict):
        return wire
    raise not_a_reply(provider, model, kind, body.decode("utf-8", "replace"))


def not_a_reply(provider: str, model: str, kind: str, body: object) -> ApplicationError:
    """A reply to a streamed request that is neither an event stream nor a reply: what it was."""
    sent = provider_message(body, "(an empty body)")[:500]
    return non_retryable_error(
        f"{provider}:{model}: the server answered a streamed request with {kind}, not an event stream, "
        f"and not with a reply either: {sent}",
        kind=FailureType.MODEL_PROVIDER_MALFORMED_REPLY,
    )


def unexpected_failure(provider: str, model: str, error: Exception) -> ApplicationError:
    """A provider's exception that is none of ours (an SDK's assertion, a bug): the failure
    names the provider and model, the exception's type, and its message when it has one
    (bounded). Retried as Temporal retries any exception (the type is the failure's type)."""
    text = " ".join(str(error).split())
    if len(text) > MAX_PROVIDER_TEXT:
        text = text[:MAX_PROVIDER_TEXT] + "…"
    said = f"{type(error).__name__}: {text}" if text else f"{type(error).__name__} (with no message of its own)"
    return ApplicationError(f"{provider}:{model} failed: {said}", type=type(error).__name__, non_retryable=False)


def malformed_reply(provider: str, detail: str) -> ApplicationError:
    return non_retryable_error(
        f"{provider} returned a malformed reply: {detail}", kind=FailureType.MODEL_PROVIDER_MALFORMED_REPLY
    )
