"""The provider contract: one neutral request in, one assistant turn out.

Providers never retry on their own (SDK clients are built with
``max_retries=0``): Temporal owns retries. A provider raises
``ApplicationError`` built by :func:`retryable_error` or
:func:`non_retryable_error` so the model activity's retry policy does the right
thing (429/5xx/timeouts retried, honouring Retry-After; other 4xx not).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Message, ToolSpec, Usage

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})

INVALID_JSON_KEY = "__invalid_json__"
"""Arguments the model sent that are not a JSON object are kept under this key,
so the tool layer answers with a validation error instead of the run failing."""


class ModelRequest(BaseModel):
    model: str
    """The model name without the provider prefix, e.g. ``claude-sonnet-4-5``."""
    messages: list[Message]
    """The whole transcript; system messages included, in order."""
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 4096
    session_id: str = ""
    step: int = 0


class ModelResponse(BaseModel):
    message: Message
    """The assistant turn: role ``assistant``, text ``content``, ``tool_calls``."""
    usage: Usage
    stop_reason: str | None = None


class ModelProvider(Protocol):
    async def generate(self, request: ModelRequest) -> ModelResponse: ...


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


def provider_message(body: object, fallback: str) -> str:
    """The API's own explanation (``error.message`` in the body), else ``fallback``."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    if isinstance(body, str) and body:
        return body
    return fallback


def status_error(provider: str, status: int, body: object, fallback: str, headers: object) -> ApplicationError:
    """An HTTP error from a provider: 408/409/425/429/5xx retried (honouring Retry-After), other 4xx final."""
    message = f"{provider} returned {status}: {provider_message(body, fallback)}"
    if is_retryable_status(status):
        return retryable_error(
            message, kind=FailureType.MODEL_PROVIDER_RETRYABLE, retry_after=retry_after_seconds(headers)
        )
    return non_retryable_error(message, kind=FailureType.MODEL_PROVIDER_REQUEST)


def malformed_reply(provider: str, detail: str) -> ApplicationError:
    return non_retryable_error(
        f"{provider} returned a malformed reply: {detail}", kind=FailureType.MODEL_PROVIDER_MALFORMED_REPLY
    )
