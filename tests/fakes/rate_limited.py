"""A local fake of the Anthropic Messages and OpenAI Chat Completions APIs that enforces
per-model rate limits as the real APIs do, for the official SDKs (``base_url``).

Limits are token buckets per model (Anthropic's documented algorithm): each holds its
limit and refills continuously at limit / ``window`` per second. A request is admitted when
the requests bucket has one, the input bucket its input tokens and the output bucket its
output tokens; else it gets a real 429 (``rate_limit_error``) with ``retry-after`` (whole
seconds until it would fit, as the APIs send), and every reply carries the rate-limit headers
(``anthropic-ratelimit-*``, ``x-ratelimit-*``). The fake counts input tokens its own way
(every 4 characters of the request's JSON), not as the limiter estimates them.

Replies: a ``work`` tool call while the transcript holds fewer than ``tool_turns`` tool results,
then a final text. ``hold_seconds`` delays each reply (a slow model); ``overload(n, after)``
answers the next ``n`` requests with a 529 (Anthropic) / 503 carrying ``retry-after``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

OUTPUT_TOKENS = 40
"""Every reply generates this many output tokens (what usage reports and the bucket spends)."""


@dataclass
class Bucket:
    limit: int
    window: float
    level: float = -1.0
    at: float = 0.0

    def refill(self, now: float) -> float:
        if self.level < 0:
            self.level, self.at = float(self.limit), now
        self.level = min(self.limit, self.level + (now - self.at) * self.limit / self.window)
        self.at = now
        return self.level

    def seconds_until(self, amount: int) -> float:
        return max(amount - self.level, 0.0) * self.window / self.limit

    def reset_seconds(self) -> float:
        return (self.limit - self.level) * self.window / self.limit


@dataclass
class Admitted:
    at: float
    model: str
    input_tokens: int
    output_tokens: int
    tag: str
    """The first user message's text (tests put the tenant / session there)."""
    worker: str
    """The ``x-worker`` header the client sent (tests name their worker processes so)."""


@dataclass
class RateLimitedServer:
    requests_per_window: int | None = None
    input_tokens_per_window: int | None = None
    output_tokens_per_window: int | None = None
    window: float = 60.0
    tool_turns: int = 1
    hold_seconds: float = 0.0
    admitted: list[Admitted] = field(default_factory=list)
    refused: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, model, tag) of each 429."""
    _buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _overloads: list[float] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> RateLimitedServer:
        handler = type("_Bound", (_Handler,), {"fake": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def anthropic_base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return self.anthropic_base_url + "/v1"

    def overload(self, n: int, retry_after: float) -> None:
        with self._lock:
            self._overloads += [retry_after] * n

    # -- figures --------------------------------------------------------------------
    def tokens_per_window(self, since: float, until: float) -> float:
        """Input tokens admitted per window between two times (``time.time()``)."""
        spent = sum(a.input_tokens for a in self.admitted if since <= a.at <= until)
        return spent * self.window / max(until - since, 1e-9)

    # -- serving ----------------------------------------------------------------------
    def limits(self, model: str) -> dict[str, int]:
        found = {
            "requests": self.requests_per_window,
            "input-tokens": self.input_tokens_per_window,
            "output-tokens": self.output_tokens_per_window,
        }
        return {k: v for k, v in found.items() if v is not None}

    def answer(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        openai = path == "/v1/chat/completions"
        model = str(body.get("model", ""))
        need = {"requests": 1, "input-tokens": math.ceil(len(json.dumps(body)) / 4), "output-tokens": OUTPUT_TOKENS}
        tag = _first_user_text(body)
        with self._lock:
            now = time.time()
            if self._overloads:
                after = self._overloads.pop(0)
                self.refused.append((now, model, tag))
                status = 503 if openai else 529
                kind = "overloaded_error"
                return status, _error(kind, "Overloaded", openai), {"retry-after": str(after)}
            buckets = {
                name: self._buckets.setdefault((model, name), Bucket(limit, self.window))
                for name, limit in self.limits(model).items()
            }
            for bucket in buckets.values():
                bucket.refill(now)
            short = {name: b.seconds_until(need[name]) for name, b in buckets.items() if b.level < need[name]}
            if short:
                self.refused.append((now, model, tag))
                wait = max(short.values())
                said = _headers(buckets, now, openai)
                said["retry-after"] = str(max(math.ceil(wait), 1))
                return 429, _error("rate_limit_error", f"rate limit of {', '.join(short)} reached", openai), said
            for name, bucket in buckets.items():
                bucket.level -= need[name]
            self.admitted.append(
                Admitted(now, model, need["input-tokens"], OUTPUT_TOKENS, tag, headers.get("x-worker", ""))
            )
            said = _headers(buckets, now, openai)
        if self.hold_seconds:
            time.sleep(self.hold_seconds)
        results = _tool_results(body, openai)
        call = results < self.tool_turns
        reply = _openai_reply(model, need, call, results) if openai else _anthropic_reply(model, need, call, results)
        return 200, reply, said


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            for block in content or []:
                if isinstance(block, dict) and block.get("type") == "text":
                    return str(block.get("text", ""))
    return ""


def _tool_results(body: dict[str, Any], openai: bool) -> int:
    if openai:
        return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    count = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return count


def _headers(buckets: dict[str, Bucket], now: float, openai: bool) -> dict[str, str]:
    said: dict[str, str] = {}
    for name, bucket in buckets.items():
        left = max(int(bucket.level), 0)
        reset = bucket.reset_seconds()
        if openai:
            short = {"requests": "requests", "input-tokens": "tokens"}.get(name)
            if short is not None:
                said[f"x-ratelimit-limit-{short}"] = str(bucket.limit)
                said[f"x-ratelimit-remaining-{short}"] = str(left)
                said[f"x-ratelimit-reset-{short}"] = f"{reset:.3f}s"
        else:
            at = datetime.fromtimestamp(now, UTC) + timedelta(seconds=reset)
            said[f"anthropic-ratelimit-{name}-limit"] = str(bucket.limit)
            said[f"anthropic-ratelimit-{name}-remaining"] = str(left)
            said[f"anthropic-ratelimit-{name}-reset"] = at.isoformat().replace("+00:00", "Z")
    return said


def _error(kind: str, message: str, openai: bool) -> dict[str, Any]:
    if openai:
        return {"error": {"message": message, "type": kind, "code": kind}}
    return {"type": "error", "error": {"type": kind, "message": message}}


def _anthropic_reply(model: str, need: dict[str, int], call: bool, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = (
        [{"type": "tool_use", "id": f"toolu_{n}", "name": "work", "input": {"n": n}}]
        if call
        else [{"type": "text", "text": "done"}]
    )
    return {
        "id": f"msg_{time.monotonic_ns()}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": need["input-tokens"], "output_tokens": OUTPUT_TOKENS},
    }


def _openai_reply(model: str, need: dict[str, int], call: bool, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if call else "done"}
    if call:
        message["tool_calls"] = [
            {"id": f"call_{n}", "type": "function", "function": {"name": "work", "arguments": json.dumps({"n": n})}}
        ]
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {
            "prompt_tokens": need["input-tokens"],
            "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": need["input-tokens"] + OUTPUT_TOKENS,
        },
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (a killed worker) is no failure of the fake


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: RateLimitedServer

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        status, reply, said = self.fake.answer(urlsplit(self.path).path, body, headers)
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        for name, value in said.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass
