"""Idempotency keys: what a tool's side effects should be keyed by."""

from __future__ import annotations

import hashlib

from durable_agents.checkpoint.format import CheckpointHeader


def idempotency_key(header: CheckpointHeader, position: int) -> str:
    """Stable for one call across retries and resumes (its session and result position
    do not change); unique across sessions, turns and forks (each session has its own
    ``sessionUid``, and every call of a session its own position)."""
    uid = header.session_uid or f"session:{header.session_id}"
    return "da_" + hashlib.sha256(f"{uid}/{position}".encode()).hexdigest()[:40]
