"""Format version 2 (content parts, cache tokens) and the records version 1 wrote.

``format_v1_record.json`` was written by the format-1 code (``checkpoint/format.py``
before version 2), with every field a finished two-step session has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durable_agents.checkpoint import FORMAT_VERSION, Checkpoint, FileStore, MemoryStore, SqliteStore
from durable_agents.checkpoint.format import Message, Role, Usage
from durable_agents.checkpoint.parts import ImagePart, OpaquePart, TextPart

V1 = (Path(__file__).parent / "format_v1_record.json").read_text()


def test_the_version_is_2():
    assert FORMAT_VERSION == 2
    assert json.loads(Checkpoint(session_id="new").to_json())["formatVersion"] == 2


def test_a_version_1_record_loads_and_writes_back_unchanged():
    cp = Checkpoint.model_validate_json(V1)
    assert cp.format_version == 1 and all(m.parts is None for m in cp.messages)
    assert cp.usage == Usage(input_tokens=120, output_tokens=14, requests=2)
    assert cp.usage.cache_read_tokens is None  # not reported is not zero
    assert kept(json.loads(V1), cp.to_dict())  # every field it had, as it had it
    assert cp.to_dict()["messages"] == json.loads(V1)["messages"]  # and no message grew parts


def kept(old: object, new: object) -> bool:
    """``new`` has everything ``old`` has (newer fields with defaults may be added)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and kept(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(kept, old, new))
    return old == new


@pytest.mark.parametrize("kind", ["sqlite", "file", "memory"])
def test_a_version_1_record_in_every_store(kind, tmp_path):
    store = {
        "sqlite": lambda: SqliteStore(tmp_path / "s.db"),
        "file": lambda: FileStore(tmp_path / "files"),
        "memory": lambda: MemoryStore(),
    }[kind]()
    store.save(Checkpoint.model_validate_json(V1))
    loaded = store.load("v1-session")
    assert loaded is not None and loaded.format_version == 1
    assert [m.content for m in loaded.messages][-1] == "Take an umbrella."
    assert loaded.messages[2].tool_calls[0].arguments == {"city": "Paris"}


def test_parts_are_a_discriminated_union_in_camel_case():
    raw = {
        "role": "assistant",
        "content": "Hi.",
        "parts": [
            {
                "type": "opaque",
                "provider": "anthropic",
                "data": {"type": "thinking", "thinking": "t", "signature": "s"},
            },
            {"type": "text", "text": "Hi."},
            {"type": "image", "mediaType": "image/png", "data": "aGk="},
        ],
    }
    message = Message.model_validate(raw)
    assert [type(p) for p in message.parts] == [OpaquePart, TextPart, ImagePart]
    assert message.to_dict() == raw


def test_content_is_filled_from_the_parts_when_absent():
    message = Message.model_validate(
        {"role": "user", "parts": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    )
    assert message.content == "ab" and message.role == Role.USER


def test_usage_sums_cache_tokens_and_keeps_unreported_as_none():
    a = Usage(input_tokens=100, output_tokens=5, requests=1, cache_read_tokens=80, cache_write_tokens=20)
    b = Usage(input_tokens=50, output_tokens=5, requests=1)
    assert a + b == Usage(input_tokens=150, output_tokens=10, requests=2, cache_read_tokens=80, cache_write_tokens=20)
    assert (a + b) - a == Usage(input_tokens=50, output_tokens=5, requests=1, cache_read_tokens=0, cache_write_tokens=0)
    assert (b + b).cache_read_tokens is None and "cacheReadTokens" not in (b + b).to_json()
