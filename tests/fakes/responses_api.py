"""The OpenAI Responses API (``POST /v1/responses``) for :class:`FakeLLMServer`.

Like the real API with ``store: false``, it keeps no conversation: each
request's ``input`` is the whole transcript. With ``reasoning`` on (the
default), every reply opens with a ``reasoning`` item (an id and an opaque
``encrypted_content``), and a request that answers a function call without
sending back, byte-for-byte and right before that call, the reasoning item that
preceded it is refused with 400, as reasoning models' requests are.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterable
from typing import Any

from tests.fakes.llm_server import OUTPUT_TOKENS, Reply, ToolCallSpec, _Script, _text_chars


class ResponsesScript(_Script):
    def __init__(self) -> None:
        super().__init__()
        self.reasoning = True
        self._issued_lock = threading.Lock()
        self._reasoning_for_call: dict[str, dict[str, Any]] = {}
        """call_id -> the reasoning item issued with it."""

    # -- builders --------------------------------------------------------------
    def text(self, text: str) -> Reply:
        return self._response([self._message(text)])

    def tool_calls(self, calls: Iterable[ToolCallSpec], text: str | None = None) -> Reply:
        items = [self._message(text)] if text else []
        for call in calls:
            name, args, call_id = self._unpack(call, "call_resp_")
            arguments = args if isinstance(args, str) else json.dumps(args)
            items.append(
                {
                    "type": "function_call",
                    "id": self._new_id("fc_"),
                    "call_id": call_id,
                    "name": name,
                    "arguments": arguments,
                    "status": "completed",
                }
            )
        return self._response(items)

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return Reply(
            status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, dict(headers or {})
        )

    def _message(self, text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self._new_id("msg_"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def _response(self, items: list[dict[str, Any]]) -> Reply:
        body = {
            "id": self._new_id("resp_"),
            "object": "response",
            "created_at": 1_700_000_000,
            "status": "completed",
            "model": "fake-model",
            "output": items,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        return Reply(200, body, with_usage=True)

    # -- serving ---------------------------------------------------------------
    def render(self, reply: Reply, request: dict[str, Any]) -> Reply:
        rendered = super().render(reply, request)
        if not self.reasoning or rendered.status != 200 or not isinstance(rendered.body, dict):
            return rendered
        reasoning = {
            "type": "reasoning",
            "id": self._new_id("rs_"),
            "summary": [{"type": "summary_text", "text": "Thinking about the tools."}],
            "encrypted_content": secrets.token_urlsafe(24),
        }
        output = [reasoning, *rendered.body["output"]]
        with self._issued_lock:
            for item in output:
                if item.get("type") == "function_call":
                    self._reasoning_for_call[item["call_id"]] = reasoning
        return Reply(rendered.status, dict(rendered.body, output=output), rendered.headers)

    def check(self, request: dict[str, Any]) -> Reply | None:
        items = request.get("input")
        if not isinstance(items, list):
            return None
        with self._issued_lock:
            issued = dict(self._reasoning_for_call)
        for index, item in enumerate(items):
            if not isinstance(item, dict) or item.get("type") != "function_call":
                continue
            reasoning = issued.get(str(item.get("call_id")))
            if reasoning is None:
                continue
            kept = [j for j in range(index) if items[j] == reasoning]  # byte-for-byte, signature included
            between = items[kept[-1] + 1 : index] if kept else []
            if not kept or any(
                isinstance(i, dict) and (i.get("type") == "function_call_output" or i.get("role") == "user")
                for i in between
            ):
                return self.error(
                    400,
                    f"Item '{item.get('id')}' of type 'function_call' was provided without its required "
                    f"'reasoning' item: '{reasoning['id']}'.",
                )
        return None

    def _usage(self, request: dict[str, Any]) -> dict[str, Any]:
        prompt = _text_chars(request.get("input")) // 4
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": prompt + OUTPUT_TOKENS,
        }
