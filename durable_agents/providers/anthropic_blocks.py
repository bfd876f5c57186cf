"""The neutral transcript as Messages API content blocks, and back.

- Parts map to blocks one to one: text, image (base64 or URL source), document
  (base64 PDF, plain text or URL source); ``opaque`` parts from ``anthropic``
  (thinking, redacted thinking, server tool blocks) go back exactly as the API
  sent them, in their place before the turn's ``tool_use`` blocks. Opaque parts
  of other providers are dropped: no other API's blocks mean anything here.
- Prompt caching: ``cache_control`` breakpoints (at most 4, the API's limit) on
  the last tool, the system prompt, the end of the turn the previous request
  ended with (where this one's cached prefix is read) and the last turn's last
  block (where the next request will read). Stored blocks are never modified:
  a breakpoint is set on a copy.
"""

from __future__ import annotations

from typing import Any

from durable_agents.checkpoint.format import Message, Role, ToolSpec
from durable_agents.checkpoint.parts import DocumentPart, ImagePart, OpaquePart, TextPart

PROVIDER = "anthropic"
EPHEMERAL = {"type": "ephemeral"}
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""Blocks that cannot carry ``cache_control`` (and must open a tool-use turn when thinking is on)."""
_EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}

Block = dict[str, Any]
Turn = dict[str, Any]


# -- request ----------------------------------------------------------------------
def to_turns(messages: list[Message]) -> list[Turn]:
    """Neutral transcript -> Messages API turns, content as block lists (system messages go elsewhere).

    Consecutive user-side items (tool results, then perhaps new user input)
    are merged into ONE user turn: the API requires every tool_result of an
    assistant turn to sit in the single user turn right after it.
    """
    turns: list[Turn] = []
    for message in messages:
        if message.role == Role.SYSTEM:
            continue
        if message.role == Role.ASSISTANT:
            blocks = assistant_blocks(message)
            if blocks:  # the API rejects empty assistant turns; an empty one says nothing
                turns.append({"role": "assistant", "content": blocks})
            continue
        new = [tool_result_block(message)] if message.role == Role.TOOL else user_blocks(message)
        if turns and turns[-1]["role"] == "user":
            turns[-1]["content"].extend(new)
        else:
            turns.append({"role": "user", "content": new})
    return turns


def user_blocks(message: Message) -> list[Block]:
    if message.parts is None:
        return [text_block(message.content or "")]
    return [b for p in message.parts if (b := part_block(p)) is not None] or [text_block("")]


def assistant_blocks(message: Message) -> list[Block]:
    if message.parts is None:
        blocks = [text_block(message.content)] if message.content else []
    else:
        blocks = [b for p in message.parts if (b := part_block(p)) is not None]
    for call in message.tool_calls or []:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return blocks


def part_block(part: Any) -> Block | None:
    """One part as a block; None for what this API does not take (empty text, other providers' blocks)."""
    if isinstance(part, TextPart):
        return text_block(part.text) if part.text else None
    if isinstance(part, OpaquePart):
        return dict(part.data) if part.provider == PROVIDER else None
    if isinstance(part, ImagePart):
        source = (
            {"type": "url", "url": part.url}
            if part.url is not None
            else {"type": "base64", "media_type": part.media_type, "data": part.data}
        )
        return {"type": "image", "source": source}
    if isinstance(part, DocumentPart):
        return _document_block(part)
    return None


def _document_block(part: DocumentPart) -> Block:
    if part.url is not None:
        source: Block = {"type": "url", "url": part.url}
    elif part.text is not None:
        source = {"type": "text", "media_type": "text/plain", "data": part.text}
    else:
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    block: Block = {"type": "document", "source": source}
    if part.title:
        block["title"] = part.title
    return block


def text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def tool_result_block(message: Message) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": message.tool_call_id or "", "content": message.content or ""}
    if message.is_error:
        block["is_error"] = True
    return block


def tool_param(tool: ToolSpec) -> Block:
    # The API requires an object schema even for tools without arguments.
    schema = tool.input_schema or _EMPTY_OBJECT_SCHEMA
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


# -- prompt caching -------------------------------------------------------------------
def mark_cache_breakpoints(turns: list[Turn]) -> None:
    """Breakpoints at the end of the turn before the last assistant turn (what the
    previous request sent: read from the cache) and at the last turn's end (written)."""
    last_assistant = next((i for i in range(len(turns) - 1, -1, -1) if turns[i]["role"] == "assistant"), None)
    ends = {len(turns) - 1}
    if last_assistant is not None and last_assistant > 0:
        ends.add(last_assistant - 1)
    for index in sorted(i for i in ends if i >= 0):
        content = turns[index]["content"]
        at = next((i for i in range(len(content) - 1, -1, -1) if _cacheable(content[i])), None)
        if at is not None:
            content[at] = {**content[at], "cache_control": dict(EPHEMERAL)}


def _cacheable(block: Block) -> bool:
    if block.get("type") in THINKING_BLOCKS:
        return False
    return not (block.get("type") == "text" and not block.get("text"))


def simplified(turn: Turn) -> Turn:
    """A user turn of one plain text block as a plain string (the API's most common shape)."""
    content = turn["content"]
    lone = content[0] if len(content) == 1 else {}
    if turn["role"] == "user" and lone.keys() == {"type", "text"} and lone["type"] == "text":
        return {"role": "user", "content": lone["text"]}
    return turn


# -- thinking ----------------------------------------------------------------------------
def thinking_can_continue(turns: list[Turn]) -> bool:
    """False when the request continues a tool-use turn that has no thinking block (it came
    from another provider, or from a run without thinking): the API refuses thinking then,
    so such a request is sent without it (thinking resumes with the next turn)."""
    if len(turns) < 2 or turns[-1]["role"] != "user" or turns[-2]["role"] != "assistant":
        return True
    if not any(b.get("type") == "tool_result" for b in turns[-1]["content"]):
        return True
    return turns[-2]["content"][0].get("type") in THINKING_BLOCKS


# -- reply ----------------------------------------------------------------------------------
def reply_part(block: Any) -> TextPart | OpaquePart:
    """A reply block other than ``tool_use`` (an SDK object or its JSON) as a part:
    text as text, the rest verbatim."""
    kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
    if kind == "text":
        text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
        return TextPart(text=text if isinstance(text, str) else "")
    return OpaquePart(provider=PROVIDER, data=block_json(block))


def block_json(block: Any) -> dict[str, Any]:
    """The block as the API sent it (every field it set, unknown ones included)."""
    if isinstance(block, dict):
        return dict(block)
    to_dict = getattr(block, "to_dict", None)
    if callable(to_dict):
        data = to_dict(mode="json")
        if isinstance(data, dict):
            return data
    return {"type": str(getattr(block, "type", "unknown"))}
