"""Agent fingerprints: what a resumed run compares to notice a changed agent."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field

from durable_agents.checkpoint.format import Fingerprint, FormatModel, ToolFingerprint


def _sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def _schema_hash(schema: dict[str, Any]) -> str:
    return _sha(json.dumps(schema, sort_keys=True, separators=(",", ":")))[:16]


def compute_fingerprint(model: str, instructions: str, tools: list[tuple[str, dict[str, Any]]]) -> Fingerprint:
    """Model id, each tool's name with a hash of its input schema, a hash of the
    instructions, and a short SHA-256 over all of them. Code is not part of it."""
    parts = [ToolFingerprint(name=name, schema_hash=_schema_hash(schema)) for name, schema in tools]
    parts.sort(key=lambda t: t.name)
    instructions_hash = _sha(instructions)[:16]
    whole = json.dumps([model, instructions_hash, [[t.name, t.schema_hash] for t in parts]], separators=(",", ":"))
    return Fingerprint(model=model, tools=parts, instructions_hash=instructions_hash, digest=_sha(whole)[:12])


class AgentDrift(FormatModel):
    """What changed between the agent a checkpoint was saved with and the one resuming it."""

    model: tuple[str, str] | None = None
    tools_added: list[str] = Field(default_factory=list)
    tools_removed: list[str] = Field(default_factory=list)
    tools_changed: list[str] = Field(default_factory=list)
    instructions: bool = False

    def describe(self) -> str:
        parts = []
        if self.model:
            parts.append(f"model {self.model[0]} → {self.model[1]}")
        for label, names in (
            ("tools added", self.tools_added),
            ("tools removed", self.tools_removed),
            ("tools changed", self.tools_changed),
        ):
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        if self.instructions:
            parts.append("instructions changed")
        return "; ".join(parts)


def compare_fingerprints(saved: Fingerprint | None, current: Fingerprint) -> AgentDrift | None:
    """None when nothing changed, or when the checkpoint predates fingerprints."""
    if saved is None or saved.digest == current.digest:
        return None
    old = {t.name: t.schema_hash for t in saved.tools}
    new = {t.name: t.schema_hash for t in current.tools}
    return AgentDrift(
        model=(saved.model, current.model) if saved.model != current.model else None,
        tools_added=sorted(new.keys() - old.keys()),
        tools_removed=sorted(old.keys() - new.keys()),
        tools_changed=sorted(n for n in old.keys() & new.keys() if old[n] != new[n]),
        instructions=saved.instructions_hash != current.instructions_hash,
    )
