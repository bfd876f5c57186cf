"""``show`` of a session that called sub-agents: each sub-agent's turns, nested.

A sub-agent call's result names its session (``subagentSessionId``); a call
still without a result (the sub-agent runs, or waits for approval) has its
session at ``<session>/<position>``. Both are read from the store and
rendered indented under the call, recursively.
"""

from __future__ import annotations

import json

from durable_agents.checkpoint.format import Checkpoint, Role
from durable_agents.checkpoint.stores._subagents import subagent_session_id
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.cli._render import approval_marks, decision_lines, pending_positions, render_transcript
from durable_agents.client.outcomes import pending_from_store

PAD = "      │ "
MAX_NESTING = 6


def linked_session(content: str | None) -> str | None:
    """The sub-agent session a tool result links to, if any."""
    try:
        body = json.loads(content or "")
    except ValueError:
        return None
    found = body.get("subagentSessionId") if isinstance(body, dict) else None
    return found if isinstance(found, str) else None


def subagent_lines(store: CheckpointStore, checkpoint: Checkpoint, depth: int = 1) -> dict[int, list[str]]:
    """Lines to print after message positions: each sub-agent call's session and its turns."""
    nested: dict[int, list[str]] = {}
    if depth > MAX_NESTING:
        return nested
    for position, message in enumerate(checkpoint.messages):
        child = linked_session(message.content) if message.role == Role.TOOL else None
        if child is not None:
            nested[position] = _session_lines(store, child, depth)
    subagents = {t.name for t in (checkpoint.run_config.tools if checkpoint.run_config else []) if t.subagent}
    pending = pending_positions(checkpoint.messages)
    for at, call in pending:  # no result yet: shown after the turn's results so far
        child = subagent_session_id(checkpoint.session_id, at)
        if call.name in subagents and store.load_header(child) is not None:
            nested.setdefault(pending[0][0] - 1, []).extend(_session_lines(store, child, depth))
    return nested


def _session_lines(store: CheckpointStore, session_id: str, depth: int) -> list[str]:
    child = store.load(session_id)
    if child is None:
        return [f"{PAD}↳ sub-agent session {session_id} (not in this store)"]
    status = child.status.value + (f" ({child.finish_reason.value})" if child.finish_reason else "")
    marks = {c.id: "… no result yet" for _, c in pending_positions(child.messages)}
    pending = pending_from_store(store, session_id)
    marks.update(approval_marks(pending))
    after, _ = decision_lines(child.messages, child.decisions)
    for position, extra in subagent_lines(store, child, depth + 1).items():
        after.setdefault(position, []).extend(extra)
    body = render_transcript(child.messages, steps=True, marks=marks, after=after)
    return [f"{PAD}↳ sub-agent {child.agent or '-'} · session {session_id} · {status}"] + [
        PAD + line for line in body.splitlines()
    ]
