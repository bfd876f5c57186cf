"""What a provider's HTTP replies say about its rate limits, heard by the budget limiter.

Providers call :func:`heard` with each reply's status and headers they see (a success's and
an error's); the limiter (:mod:`durable_agents.providers.budgets`) listens around one call
with :func:`listening`. Nobody listening: nothing is kept (one context-variable read).

Read: Anthropic's ``anthropic-ratelimit-{requests,input-tokens,output-tokens}-{remaining,reset}``
(reset: an RFC 3339 time) and OpenAI's ``x-ratelimit-{remaining,reset}-{requests,tokens}``
(reset: a duration such as ``6m0s``, ``1.5s`` or ``20ms``), and ``retry-after``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from durable_agents.providers.base import retry_after_seconds

Dimension = Literal["requests", "input_tokens", "output_tokens", "tokens"]


@dataclass
class Heard:
    """One reply's status and what its headers said."""

    status: int
    retry_after: float | None = None
    remaining: dict[Dimension, int] = field(default_factory=dict)
    reset_in: dict[Dimension, float] = field(default_factory=dict)
    """Seconds from the reply until that dimension is full again."""


_LISTENER: ContextVar[list[Heard] | None] = ContextVar("durable_agents_ratelimit_listener", default=None)

_ANTHROPIC = {"requests": "requests", "input-tokens": "input_tokens", "output-tokens": "output_tokens"}
_OPENAI = {"requests": "requests", "tokens": "tokens"}


@contextlib.contextmanager
def listening() -> Iterator[list[Heard]]:
    """Collect what providers hear in this block (this task and the tasks it starts)."""
    heard: list[Heard] = []
    token = _LISTENER.set(heard)
    try:
        yield heard
    finally:
        _LISTENER.reset(token)


def heard(status: int, headers: object, now: datetime | None = None) -> None:
    """A provider saw a reply of ``status`` with ``headers`` (any mapping with ``get``)."""
    listener = _LISTENER.get()
    if listener is None:
        return
    try:
        listener.append(parse(status, headers, now))
    except Exception:  # noqa: BLE001 - a header we cannot read never fails a call
        listener.append(Heard(status))


def parse(status: int, headers: object, now: datetime | None = None) -> Heard:
    get = getattr(headers, "get", None)
    found = Heard(status, retry_after=retry_after_seconds(headers))
    if get is None:
        return found
    for name, dimension in _ANTHROPIC.items():
        left, reset = get(f"anthropic-ratelimit-{name}-remaining"), get(f"anthropic-ratelimit-{name}-reset")
        if left is not None:
            found.remaining[dimension] = int(float(left))  # type: ignore[index]
            if reset:
                at = datetime.fromisoformat(str(reset).replace("Z", "+00:00"))
                base = now or datetime.now(at.tzinfo)
                found.reset_in[dimension] = max((at - base).total_seconds(), 0.0)  # type: ignore[index]
    for name, dimension in _OPENAI.items():
        left, reset = get(f"x-ratelimit-remaining-{name}"), get(f"x-ratelimit-reset-{name}")
        if left is not None:
            found.remaining[dimension] = int(float(left))  # type: ignore[index]
            if reset:
                found.reset_in[dimension] = duration_seconds(str(reset))  # type: ignore[index]
    return found


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def duration_seconds(text: str) -> float:
    """OpenAI's reset durations: ``1s``, ``6m0s``, ``1h2m3.5s``, ``20ms``; a bare number is seconds."""
    text = text.strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        pass
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = _DURATION.findall(text)
    if not parts:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(value) * scale[unit] for value, unit in parts)
