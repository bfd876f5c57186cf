"""Agent fingerprints: what a resumed run compares to notice a changed agent."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from checkpoint.format import Fingerprint, ToolFingerprint


def _sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def _schema_hash(schema: dict[str, Any]) -> str:
    return _sha(json.dumps(schema, sort_keys=True, separators=(",", ":")))[:16]


def compute_fingerprint(
    model: str, instructions: str, tools: list[tuple[str, dict[str, Any]]]
) -> Fingerprint:
    """Model id, each tool's name with a hash of its input schema, a hash of the
    instructions, and a short SHA-256 over all of them. Code is not part of it."""
    parts = [ToolFingerprint(name=name, schema_hash=_schema_hash(schema)) for name, schema in tools]
    parts.sort(key=lambda t: t.name)
    instructions_hash = _sha(instructions)[:16]
    whole = json.dumps(
        [model, instructions_hash, [[t.name, t.schema_hash] for t in parts]], separators=(",", ":")
    )
    return Fingerprint(model=model, tools=parts, instructions_hash=instructions_hash, digest=_sha(whole)[:12])
