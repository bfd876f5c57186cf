"""Server-sent-event replies of the fake LLM server: a finished reply body, cut into
the events each streaming API sends (so the real SDKs' stream parsers read them).

- Anthropic Messages (``"stream": true``): ``message_start`` (the message without
  content, input usage), per block ``content_block_start`` / ``content_block_delta``
  (``text_delta``, ``input_json_delta``, ``thinking_delta`` + ``signature_delta``) /
  ``content_block_stop``, then ``message_delta`` (stop reason, output usage) and
  ``message_stop``; a ``ping`` after the start, as the API does.
- OpenAI Chat Completions: ``chat.completion.chunk`` objects (the role first, then
  content and tool-call pieces by index, then the finish reason), a usage chunk
  without choices when ``stream_options.include_usage``, and ``data: [DONE]``.
- OpenAI Responses (``"stream": true``): typed events with a ``sequence_number``,
  from ``response.created`` to ``response.completed`` (see :func:`responses_frames`).

Each frame comes with the text it carries (for the latency figures), "" if none.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

Frame = tuple[bytes, str]


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _frame(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def anthropic_frames(body: dict[str, Any], size: int) -> list[Frame]:
    usage = dict(body.get("usage") or {})
    start_usage = {**usage, "output_tokens": 1}
    message = {**{k: v for k, v in body.items() if k != "content"}, "content": [], "usage": start_usage}
    message.update(stop_reason=None, stop_sequence=None)
    frames: list[Frame] = [
        (_frame({"type": "message_start", "message": message}, "message_start"), ""),
        (_frame({"type": "ping"}, "ping"), ""),
    ]
    for index, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            opening, deltas = (
                {"type": "text", "text": ""},
                [("text_delta", "text", p) for p in pieces(block["text"], size)],
            )
        elif kind == "tool_use":
            opening = {**block, "input": {}}
            raw = json.dumps(block.get("input") or {})
            deltas = [("input_json_delta", "partial_json", p) for p in pieces(raw, size)]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": ""}
            deltas = [("thinking_delta", "thinking", p) for p in pieces(block.get("thinking") or "", size)]
            deltas.append(("signature_delta", "signature", block.get("signature") or ""))
        else:  # redacted thinking, server tool blocks: whole in their start event
            opening, deltas = block, []
        frames.append(
            (
                _frame(
                    {"type": "content_block_start", "index": index, "content_block": opening}, "content_block_start"
                ),
                "",
            )
        )
        for delta_type, field, piece in deltas:
            event = {"type": "content_block_delta", "index": index, "delta": {"type": delta_type, field: piece}}
            frames.append((_frame(event, "content_block_delta"), piece if delta_type == "text_delta" else ""))
        frames.append((_frame({"type": "content_block_stop", "index": index}, "content_block_stop"), ""))
    end = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    final_usage = {k: v for k, v in usage.items() if k != "input_tokens"}
    frames.append((_frame({"type": "message_delta", "delta": end, "usage": final_usage}, "message_delta"), ""))
    frames.append((_frame({"type": "message_stop"}, "message_stop"), ""))
    return frames


def anthropic_error_frame(kind: str, message: str) -> bytes:
    return _frame({"type": "error", "error": {"type": kind, "message": message}}, "error")


def openai_frames(body: dict[str, Any], size: int, include_usage: bool) -> list[Frame]:
    head = {k: body[k] for k in ("id", "created", "model") if k in body}
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    usage_field = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **usage_field,
        }
        return _frame(data)

    frames: list[Frame] = [(chunk({"role": "assistant", "content": "", "refusal": None}), "")]
    if message.get("content"):
        frames += [(chunk({"content": p}), p) for p in pieces(message["content"], size)]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        first = {
            "index": index,
            "id": call.get("id"),
            "type": "function",
            "function": {"name": function.get("name"), "arguments": ""},
        }
        frames.append((chunk({"tool_calls": [first]}), ""))
        for piece in pieces(function.get("arguments") or "", size):
            frames.append((chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), ""))
    frames.append((chunk({}, choice.get("finish_reason") or "stop"), ""))
    if include_usage:
        frames.append(
            (_frame({**head, "object": "chat.completion.chunk", "choices": [], "usage": body.get("usage")}), "")
        )
    frames.append((_frame("[DONE]"), ""))
    return frames


def responses_frames(body: dict[str, Any], size: int) -> list[Frame]:
    """The Responses API's stream of ``body`` (a finished ``response``), as the API sends it:
    ``response.created`` and ``response.in_progress`` (the response without output), then per
    output item ``response.output_item.added`` (the item without its text or arguments), for a
    message ``response.content_part.added`` / ``response.output_text.delta``… /
    ``response.output_text.done`` / ``response.content_part.done``, for a function call
    ``response.function_call_arguments.delta``… / ``…done``, ``response.output_item.done``
    (the item whole: a reasoning item with its ``encrypted_content``), and
    ``response.completed`` with the whole response and its usage."""
    frames: list[Frame] = []

    def add(data: dict[str, Any], text: str = "") -> None:
        data = {**data, "sequence_number": len(frames)}
        frames.append((_frame(data, data["type"]), text))

    pending = {**body, "status": "in_progress", "output": [], "usage": None}
    add({"type": "response.created", "response": pending})
    add({"type": "response.in_progress", "response": pending})
    for index, item in enumerate(body.get("output") or []):
        kind = item.get("type")
        opening = dict(item, status="in_progress")
        if kind == "message":
            opening["content"] = []
        elif kind == "function_call":
            opening["arguments"] = ""
        elif kind == "reasoning":
            opening = {k: v for k, v in item.items() if k != "encrypted_content"} | {"summary": []}
        add({"type": "response.output_item.added", "output_index": index, "item": opening})
        where = {"item_id": item.get("id"), "output_index": index}
        if kind == "message":
            for part_index, part in enumerate(item.get("content") or []):
                at = {**where, "content_index": part_index}
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                add({"type": "response.content_part.added", **at, "part": empty})
                if part.get("type") == "output_text":
                    for piece in pieces(part.get("text") or "", size):
                        add({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []}, piece)
                    add({"type": "response.output_text.done", **at, "text": part.get("text") or "", "logprobs": []})
                add({"type": "response.content_part.done", **at, "part": part})
        elif kind == "function_call":
            for piece in pieces(item.get("arguments") or "", size):
                add({"type": "response.function_call_arguments.delta", **where, "delta": piece})
            add({"type": "response.function_call_arguments.done", **where, "arguments": item.get("arguments") or ""})
        add({"type": "response.output_item.done", "output_index": index, "item": item})
    add({"type": "response.completed", "response": body})
    return frames


def streamed(reply: Any, request: dict[str, Any], path: str, size: int, take_failure: Any) -> Any:
    """``reply`` as a stream when ``request`` asks for one (errors stay plain JSON, as the APIs send them)."""
    if not request.get("stream") or reply.status != 200 or not isinstance(reply.body, dict):
        return reply
    if path == "/v1/messages":
        frames = anthropic_frames(reply.body, size)
    elif path == "/v1/chat/completions":
        frames = openai_frames(reply.body, size, bool((request.get("stream_options") or {}).get("include_usage")))
    elif path == "/v1/responses":
        frames = responses_frames(reply.body, size)
    else:
        return reply
    return replace(reply, frames=frames, fail_after=take_failure())


def send_frames(handler: Any, reply: Any, fake: Any) -> None:
    """Write ``reply.frames`` as a chunked ``text/event-stream`` response, ``fake.stream_delay`` apart."""
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()
    log: list[tuple[float, str]] = []
    with fake._lock:
        fake.streamed.append(log)
    anthropic = b"event: message_start" in reply.frames[0][0]

    def write(data: bytes) -> None:
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()

    for sent, (frame, text) in enumerate(reply.frames):
        if reply.fail_after is not None and sent >= reply.fail_after:
            if anthropic:  # the API's own mid-stream failure: an error event, then the end
                write(anthropic_error_frame("overloaded_error", "Overloaded"))
                break
            handler.close_connection = True  # a dropped connection: no terminating chunk
            return
        if fake.stream_delay and sent:
            time.sleep(fake.stream_delay)
        write(frame)
        if text:
            log.append((time.monotonic(), text))
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()
