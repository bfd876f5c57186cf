"""A recording HTTP proxy in front of the llama server: what went over the wire.

Each request is forwarded as is and recorded with the server's answer, so a test
can read the exact bodies the ``openai`` SDK sent and received, and count them
(e.g. "no second request for a stored turn").

    with RecordingProxy(server.base_url) as proxy:   # OPENAI_BASE_URL=proxy.base_url
        ...
        [exchange] = proxy.chat()
        exchange.request["tool_choice"], exchange.status, exchange.response["usage"]
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    request: Any
    """The request body, decoded from JSON (None without a body)."""
    status: int
    response: Any
    """The server's body, decoded from JSON when it is JSON, else its text."""
    seconds: float
    """How long the server took to answer."""


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


class RecordingProxy:
    def __init__(self, target_base_url: str, *, timeout: float = 300.0) -> None:
        """``target_base_url``: the server's ``…/v1`` URL; the proxy serves the same paths."""
        target = httpx.URL(target_base_url)
        self._origin = f"{target.scheme}://{target.host}:{target.port}"
        self._timeout = timeout
        self._lock = threading.Lock()
        self._exchanges: list[Exchange] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    def chat(self) -> list[Exchange]:
        """The ``POST /v1/chat/completions`` exchanges, in order."""
        return [e for e in self.exchanges() if e.method == "POST" and e.path == CHAT]

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        keep = {k: v for k, v in headers.items() if k.lower() in ("content-type", "accept", "authorization")}
        started = time.monotonic()
        reply = httpx.request(method, self._origin + path, headers=keep, content=body, timeout=self._timeout)
        exchange = Exchange(
            method, path, _decode(body), reply.status_code, _decode(reply.content), time.monotonic() - started
        )
        with self._lock:
            self._exchanges.append(exchange)
        return reply.status_code, reply.headers.get("content-type", "application/json"), reply.content

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    status, content_type, content = proxy._forward(self.command, self.path, dict(self.headers), body)
                except httpx.HTTPError as exc:  # the server is gone: say so, like a gateway
                    status, content_type = 502, "text/plain"
                    content = f"recording proxy: {type(exc).__name__}: {exc}".encode()
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = _relay

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
