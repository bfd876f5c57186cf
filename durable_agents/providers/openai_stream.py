"""A streamed Chat Completion put back together from its chunks.

Chunks carry ``choices[0].delta`` pieces: ``content`` (and ``refusal``) text,
and ``tool_calls`` pieces by ``index`` (the first piece of a call has its id
and name, the rest add to its ``arguments`` string); the last choice chunk
has ``finish_reason``, and with ``stream_options.include_usage`` a final chunk
without choices has the usage. :meth:`StreamedCompletion.completion` is shaped
like the SDK's ``ChatCompletion`` for ``from_openai_reply``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


@dataclass
class _Call:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedCompletion:
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    chunks: int = 0

    def add(self, chunk: Any) -> str:
        """Take one chunk; return the content text it adds (what the caller streams on)."""
        self.chunks += 1
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return ""
        choice = choices[0]
        self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
        delta = getattr(choice, "delta", None)
        if delta is None:
            return ""
        for piece in getattr(delta, "tool_calls", None) or []:
            call = self.calls.setdefault(getattr(piece, "index", None) or 0, _Call())
            call.id = getattr(piece, "id", None) or call.id
            function = getattr(piece, "function", None)
            call.name = getattr(function, "name", None) or call.name
            arguments = getattr(function, "arguments", None)
            if isinstance(arguments, str):
                call.arguments.append(arguments)
        if isinstance(getattr(delta, "refusal", None), str):
            self.refusal.append(delta.refusal)
        text = getattr(delta, "content", None)
        if isinstance(text, str) and text:
            self.content.append(text)
            return text
        return ""

    def completion(self) -> Any:
        calls = [
            SimpleNamespace(
                id=call.id,
                type="function",
                function=SimpleNamespace(name=call.name, arguments="".join(call.arguments)),
            )
            for _, call in sorted(self.calls.items())
        ]
        message = SimpleNamespace(
            role="assistant",
            content="".join(self.content) if self.content else None,
            refusal="".join(self.refusal) if self.refusal else None,
            tool_calls=calls or None,
        )
        choices = [SimpleNamespace(index=0, message=message, finish_reason=self.finish_reason)] if self.chunks else []
        return SimpleNamespace(choices=choices, usage=self.usage)
