"""What the fake Messages API checks and counts, as the real one does.

- Extended thinking: every thinking block the fake sends is signed (an HMAC of
  its text under a per-server secret); a request that sends one back altered,
  or whose final tool-use turn does not start with the thinking blocks the
  model sent with it while thinking is on, is refused with HTTP 400 and the
  real API's wording. Thinking settings are checked as the API checks them.
- Prompt caching: the prompt is the sequence of blocks tools -> system ->
  messages; a ``cache_control`` breakpoint caches the prefix ending at its
  block. A request reads the longest cached prefix found at one of its
  breakpoints or up to 20 blocks before one (the API's lookback), and writes
  the prefixes at its breakpoints; usage reports ``cache_read_input_tokens``,
  ``cache_creation_input_tokens`` and the rest as ``input_tokens``. A prefix
  shorter than ``min_cache_tokens`` is never cached (the API's minimum is
  1024-4096 tokens by model; 0 here unless a test sets it). Entries never
  expire (the API's 5-minute TTL is longer than any test).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
from typing import Any

LOOKBACK = 20
MAX_BREAKPOINTS = 4
THINKING = frozenset({"thinking", "redacted_thinking"})
_FINAL_TURN_RULE = (
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
    "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult "
    "our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


def text_chars(value: Any) -> int:
    """Total length of every string inside ``value``: independent of key order."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(text_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(text_chars(v) for v in value)
    return 0


def turn_blocks(content: Any) -> list[dict[str, Any]]:
    """A turn's content as blocks (a plain string is one text block, as the API reads it)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


class Thinking:
    """Signs the thinking the fake sends; checks what comes back."""

    def __init__(self) -> None:
        self._secret = os.urandom(16)
        self._lock = threading.Lock()
        self._sent_with: dict[str, list[dict[str, Any]]] = {}  # tool_use id -> thinking blocks before it

    def block(self, text: str) -> dict[str, Any]:
        return {"type": "thinking", "thinking": text, "signature": self._mac(text.encode())}

    def redacted(self, payload: str = "opaque reasoning") -> dict[str, Any]:
        raw = payload.encode()
        return {"type": "redacted_thinking", "data": base64.b64encode(raw + self._raw_mac(raw)).decode()}

    def remember(self, content: list[dict[str, Any]]) -> None:
        """Which thinking blocks the model sent before each of its tool calls."""
        thinking = [b for b in content if b.get("type") in THINKING]
        with self._lock:
            for block in content:
                if block.get("type") == "tool_use":
                    self._sent_with[block["id"]] = thinking

    def problem(self, body: dict[str, Any]) -> str | None:
        """The API's 400 message for ``body``, or None when it would accept it."""
        config = body.get("thinking") or {}
        enabled = config.get("type") == "enabled"
        if enabled:
            wrong = self._config_problem(body, config)
            if wrong:
                return wrong
        messages = body.get("messages") or []
        for i, message in enumerate(messages):
            for j, block in enumerate(turn_blocks(message.get("content"))):
                if block.get("type") == "thinking" and not self._valid(block):
                    return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                if block.get("type") == "redacted_thinking" and not self._valid_redacted(block):
                    return f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
        return self._final_turn_problem(messages) if enabled else None

    def _config_problem(self, body: dict[str, Any], config: dict[str, Any]) -> str | None:
        budget = config.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if body.get("max_tokens", 0) <= budget:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if body.get("temperature", 1) != 1:
            return "`temperature` may only be set to 1 when thinking is enabled"
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            return "Thinking may not be enabled when tool_choice forces tool use."
        return None

    def _final_turn_problem(self, messages: list[dict[str, Any]]) -> str | None:
        if len(messages) < 2 or messages[-2].get("role") != "assistant":
            return None
        last = turn_blocks(messages[-1].get("content"))
        if not any(b.get("type") == "tool_result" for b in last):
            return None
        index, turn = len(messages) - 2, turn_blocks(messages[-2].get("content"))
        first = turn[0].get("type") if turn else "nothing"
        if first not in THINKING:
            return (
                f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
                + (_FINAL_TURN_RULE)
            )
        sent_thinking = [b for b in turn if b.get("type") in THINKING]
        with self._lock:
            expected = [self._sent_with.get(b["id"]) for b in turn if b.get("type") == "tool_use"]
        for blocks in expected:
            if blocks is not None and [_without_cache(b) for b in sent_thinking] != blocks:
                return f"messages.{index}: the thinking blocks of this turn are not those the model sent with it"
        return None

    def _valid(self, block: dict[str, Any]) -> bool:
        text, signature = block.get("thinking"), block.get("signature")
        return (
            isinstance(text, str)
            and isinstance(signature, str)
            and hmac.compare_digest(signature, self._mac(text.encode()))
        )

    def _valid_redacted(self, block: dict[str, Any]) -> bool:
        try:
            raw = base64.b64decode(str(block.get("data")), validate=True)
        except ValueError:
            return False
        return len(raw) > 32 and hmac.compare_digest(raw[-32:], self._raw_mac(raw[:-32]))

    def _raw_mac(self, data: bytes) -> bytes:
        return hmac.new(self._secret, data, hashlib.sha256).digest()

    def _mac(self, data: bytes) -> str:
        return base64.b64encode(self._raw_mac(data)).decode()


def _without_cache(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


class PromptCache:
    """Cache accounting by prefix, per model (see the module docstring)."""

    def __init__(self, min_cache_tokens: int = 0) -> None:
        self.min_cache_tokens = min_cache_tokens
        self._lock = threading.Lock()
        self._cached: set[str] = set()

    def clear(self) -> None:
        with self._lock:
            self._cached.clear()

    def problem(self, body: dict[str, Any]) -> str | None:
        marks = [(where, b) for where, b in _prompt(body) if "cache_control" in b]
        if len(marks) > MAX_BREAKPOINTS:
            return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}."
        for where, block in marks:
            if block.get("type") in THINKING:
                return f"{where}.cache_control: Thinking blocks cannot be cached directly"
            if block.get("type") == "text" and not block.get("text"):
                return f"{where}.text: cache_control cannot be set for empty text blocks"
        return None

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """``input_tokens`` and the cache counts for ``body``, recording what it writes."""
        keys, totals, marks = [], [], []
        digest, tokens = hashlib.sha256(str(body.get("model")).encode()), 0
        for index, (_, block) in enumerate(_prompt(body)):
            digest.update(json.dumps(_without_cache(block), sort_keys=True).encode() + b"\0")
            keys.append(digest.copy().hexdigest())
            tokens += text_chars(_without_cache(block)) // 4
            totals.append(tokens)
            if "cache_control" in block:
                marks.append(index)
        with self._lock:
            candidates = [i for m in marks for i in range(max(0, m - LOOKBACK + 1), m + 1) if keys[i] in self._cached]
            read_end = max(candidates, default=-1)
            read = totals[read_end] if read_end >= 0 else 0
            cacheable = [m for m in marks if m > read_end and totals[m] >= self.min_cache_tokens]
            self._cached.update(keys[m] for m in cacheable)
        written = totals[max(cacheable)] - read if cacheable else 0
        return {
            "input_tokens": tokens - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }


def count_tokens(body: dict[str, Any]) -> int:
    """The fake's token count of a request: a quarter of the characters of each block's strings."""
    return sum(text_chars(_without_cache(block)) // 4 for _, block in _prompt(body))


def _prompt(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The prompt's blocks in cache order, each with where it is; a turn's first block
    carries the turn's role (so the same text from user and assistant differs)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for i, tool in enumerate(body.get("tools") or []):
        out.append((f"tools.{i}", tool))
    system = body.get("system")
    for i, block in enumerate(turn_blocks(system) if system else []):
        out.append((f"system.{i}", block))
    for i, message in enumerate(body.get("messages") or []):
        role = str(message.get("role", ""))
        for j, block in enumerate(turn_blocks(message.get("content"))):
            out.append((f"messages.{i}.content.{j}", {"role": role, **block} if j == 0 else block))
    return out
