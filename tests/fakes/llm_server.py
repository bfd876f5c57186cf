"""A local fake of the Anthropic Messages and OpenAI Chat Completions APIs.

Tests point the real SDKs at it (``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``
or ``base_url=``), so the providers' wire conversion and error mapping run end
to end with no network. Replies are queued per API; when a queue is empty the
API's ``responder`` (if any) decides, else the model answers "done" so an agent
run always ends.

    with FakeLLMServer() as srv:
        srv.anthropic.reply_tool_calls([("get_weather", {"city": "Paris"}, "toolu_1")])
        srv.anthropic.reply_text("It is sunny.")
        srv.openai.reply_error(429, "slow down", headers={"retry-after": "2"})

The Anthropic side also checks extended thinking and counts prompt caching as
the real API does (:mod:`tests.fakes.anthropic_rules`): with ``thinking`` on,
replies open with a signed thinking block, and a request that drops or alters
one is refused with 400; usage reports cache reads and writes by prefix.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.anthropic_rules import THINKING, PromptCache, Thinking
from tests.fakes.anthropic_rules import text_chars as _text_chars
from tests.fakes.sse import send_frames, streamed

OUTPUT_TOKENS = 7
"""Every successful reply reports this many output tokens (deterministic)."""

ToolCallSpec = tuple  # (name, args) or (name, args, call_id); args may be a raw str for OpenAI


@dataclass
class Reply:
    """One HTTP reply. ``with_usage`` replies get ``model``/``usage`` filled at serve time."""

    status: int
    body: dict[str, Any] | str
    headers: dict[str, str] = field(default_factory=dict)
    with_usage: bool = False
    frames: list[tuple[bytes, str]] | None = None
    """Set for a request with ``"stream": true``: the reply as server-sent events (:mod:`.sse`)."""
    fail_after: int | None = None
    """Stop the stream after this many frames (Anthropic: an ``error`` event; OpenAI: the connection drops)."""


Responder = Callable[[dict[str, Any]], "Reply | str | None"]


class _Script:
    """The reply queue of one API. Subclasses build that API's wire format."""

    _ids = itertools.count(1)  # shared so ids are unique across both APIs

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self.responder: Responder | None = None
        self._stream_failures: deque[int] = deque()

    def fail_stream_after(self, frames: int) -> None:
        """The next streamed reply stops after ``frames`` events (once)."""
        with self._lock:
            self._stream_failures.append(frames)

    def take_stream_failure(self) -> int | None:
        with self._lock:
            return self._stream_failures.popleft() if self._stream_failures else None

    # -- queueing -----------------------------------------------------------
    def reply_text(self, text: str) -> None:
        self._push(self.text(text))

    def reply_tool_calls(self, calls: Iterable[ToolCallSpec], text: str | None = None) -> None:
        self._push(self.tool_calls(calls, text=text))

    def reply_error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._push(self.error(status, message, headers=headers))

    def reply_raw(self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None) -> None:
        self._push(Reply(status, body, dict(headers or {})))

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()

    def _push(self, reply: Reply) -> None:
        with self._lock:
            self._queue.append(reply)

    # -- builders, also handy inside a responder (defined per API) ----------
    def text(self, text: str) -> Reply:
        raise NotImplementedError

    def tool_calls(self, calls: Iterable[ToolCallSpec], text: str | None = None) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        raise NotImplementedError

    def _usage(self, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    # -- serving --------------------------------------------------------------
    def check(self, request: dict[str, Any]) -> Reply | None:
        """The API's refusal of ``request`` before any reply is used, or None."""
        return None

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        # The responder is test code: call it outside the lock.
        out = self.responder(request) if self.responder else None
        if isinstance(out, Reply):
            return out
        return self.text(out if isinstance(out, str) else "done")

    def render(self, reply: Reply, request: dict[str, Any]) -> Reply:
        if not reply.with_usage or not isinstance(reply.body, dict):
            return reply
        body = dict(reply.body, model=request.get("model", "fake-model"), usage=self._usage(request))
        return Reply(reply.status, body, reply.headers)

    @classmethod
    def _new_id(cls, prefix: str) -> str:
        return f"{prefix}{next(cls._ids)}"

    def _unpack(self, call: ToolCallSpec, prefix: str) -> tuple[str, Any, str]:
        name, args = call[0], call[1]
        call_id = call[2] if len(call) > 2 and call[2] else self._new_id(prefix)
        return name, args, call_id


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class AnthropicScript(_Script):
    """Replies in the Messages API format (``POST /v1/messages``).

    ``thinking`` (``str`` for a signed thinking block, or a block such as
    ``self.thinking.redacted()``) opens a reply with those blocks; with thinking
    on in the request, a reply without any gets one signed block."""

    def __init__(self) -> None:
        super().__init__()
        self.thinking = Thinking()
        self.cache = PromptCache()

    def reply_tool_calls(
        self, calls: Iterable[ToolCallSpec], text: str | None = None, thinking: list[str | dict[str, Any]] | None = None
    ) -> None:
        self._push(self.tool_calls(calls, text=text, thinking=thinking))

    def text(self, text: str) -> Reply:
        return self._message([{"type": "text", "text": text}], "end_turn")

    def tool_calls(
        self, calls: Iterable[ToolCallSpec], text: str | None = None, thinking: list[str | dict[str, Any]] | None = None
    ) -> Reply:
        blocks = [self.thinking.block(t) if isinstance(t, str) else t for t in thinking or []]
        blocks += [{"type": "text", "text": text}] if text else []
        for call in calls:
            name, args, call_id = self._unpack(call, "toolu_fake_")
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
        return self._message(blocks, "tool_use")

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return Reply(status, body, dict(headers or {}))

    def _message(self, content: list[dict[str, Any]], stop_reason: str) -> Reply:
        body = {
            "id": self._new_id("msg_fake_"),
            "type": "message",
            "role": "assistant",
            "model": "fake-model",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
        }
        return Reply(200, body, with_usage=True)

    def check(self, request: dict[str, Any]) -> Reply | None:
        problem = self.cache.problem(request) or self.thinking.problem(request)
        return self.error(400, problem) if problem else None

    def render(self, reply: Reply, request: dict[str, Any]) -> Reply:
        content = reply.body.get("content") if isinstance(reply.body, dict) else None
        if reply.with_usage and isinstance(content, list):
            thinking_on = (request.get("thinking") or {}).get("type") == "enabled"
            if thinking_on and not (content and content[0].get("type") in THINKING):
                content = [self.thinking.block(f"Step {len(request.get('messages') or [])}: what next?"), *content]
                reply = Reply(reply.status, dict(reply.body, content=content), reply.headers, reply.with_usage)
            self.thinking.remember(content)
        return super().render(reply, request)

    def _usage(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**self.cache.usage(request), "output_tokens": OUTPUT_TOKENS}


class OpenAIScript(_Script):
    """Replies in the Chat Completions format (``POST /v1/chat/completions``)."""

    def text(self, text: str) -> Reply:
        return self._completion({"role": "assistant", "content": text, "refusal": None}, "stop")

    def tool_calls(self, calls: Iterable[ToolCallSpec], text: str | None = None) -> Reply:
        wire_calls = []
        for call in calls:
            name, args, call_id = self._unpack(call, "call_fake_")
            # A str is sent verbatim so tests can hand the SDK invalid JSON.
            arguments = args if isinstance(args, str) else json.dumps(args)
            wire_calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        message = {"role": "assistant", "content": text, "refusal": None, "tool_calls": wire_calls}
        return self._completion(message, "tool_calls")

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = "invalid_request_error" if status < 500 else "server_error"
        code = "rate_limit_exceeded" if status == 429 else None
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        return Reply(status, body, dict(headers or {}))

    def _completion(self, message: dict[str, Any], finish_reason: str) -> Reply:
        body = {
            "id": self._new_id("chatcmpl-fake-"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        }
        return Reply(200, body, with_usage=True)

    def _usage(self, request: dict[str, Any]) -> dict[str, Any]:
        prompt = _text_chars(request.get("messages")) // 4
        return {"prompt_tokens": prompt, "completion_tokens": OUTPUT_TOKENS, "total_tokens": prompt + OUTPUT_TOKENS}


class FakeLLMServer:
    """Both APIs on one ``127.0.0.1`` port, served from a daemon thread."""

    def __init__(self) -> None:
        self.anthropic = AnthropicScript()
        self.openai = OpenAIScript()
        from tests.fakes.responses_api import ResponsesScript  # (it builds on this module)

        self.responses = ResponsesScript()
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self.stream_chunk = 4
        """Characters per text delta of a streamed reply."""
        self.stream_delay = 0.0
        """Seconds between the events of a streamed reply."""
        self.streams = True
        """False: every reply is plain JSON, to ``"stream": true`` requests too (a gateway or
        proxy in front of the API that does not stream)."""
        self.streamed: list[list[tuple[float, str]]] = []
        """Per streamed reply, (``time.monotonic()`` when sent, text) of each text delta."""
        self._httpd: _QuietServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd, self._thread = None, None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ----------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not started")
        return self._httpd.server_address[1]

    @property
    def anthropic_base_url(self) -> str:
        """The value for ``ANTHROPIC_BASE_URL`` (the SDK appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The value for ``OPENAI_BASE_URL`` (the SDK appends ``/chat/completions``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- recorded requests -----------------------------------------------------------
    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far as ``{"path", "headers", "body", "status", "reply"}`` (a snapshot
        copy; ``status`` and ``reply`` are what was answered, once it was)."""
        with self._lock:
            return list(self._requests)

    def bodies(self, path: str) -> list[Any]:
        """The bodies of the requests made to ``path`` (e.g. ``"/v1/messages"``)."""
        return [r["body"] for r in self.requests if r["path"] == path]

    def replies(self, path: str) -> list[Any]:
        """The bodies the fake answered the requests to ``path`` with, in order."""
        return [r.get("reply") for r in self.requests if r["path"] == path]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- serving (called from handler threads) -------------------------------------
    def _serve(self, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            body = raw.decode("utf-8", "replace")
        entry: dict[str, Any] = {"path": path, "headers": headers, "body": body}
        with self._lock:
            self._requests.append(entry)
        reply = self._answer(path, body)
        with self._lock:
            entry.update(status=reply.status, reply=reply.body)
        return reply

    def _answer(self, path: str, body: Any) -> Reply:
        scripts = {"/v1/messages": self.anthropic, "/v1/chat/completions": self.openai, "/v1/responses": self.responses}
        script = scripts.get(path)
        if script is None:
            return Reply(404, {"error": {"message": f"no such path {path}", "type": "not_found"}})
        request = body if isinstance(body, dict) else {}
        try:
            reply = script.check(request) or script.render(script.next_reply(request), request)
        except Exception as exc:  # a broken responder should fail the test visibly, not hang it
            return script.error(500, f"fake responder failed: {exc!r}")
        if not self.streams:
            return reply
        return streamed(reply, request, path, self.stream_chunk, script.take_stream_failure)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True  # open keep-alive connections must not block stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (e.g. a timeout test) is not a server bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the SDKs keep connections alive
    fake: FakeLLMServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._send(self.fake._serve(urlsplit(self.path).path, headers, raw))

    def do_GET(self) -> None:
        self._send(Reply(404, {"error": {"message": f"no such path {self.path}", "type": "not_found"}}))

    def _send(self, reply: Reply) -> None:
        if reply.frames is not None:
            return send_frames(self, reply, self.fake)
        payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        data = payload.encode("utf-8")
        headers = {"content-type": "application/json", **{k.lower(): v for k, v in reply.headers.items()}}
        self.send_response(reply.status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output readable
