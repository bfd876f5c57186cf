"""Sub-agent sessions go with their parent: what ``delete`` and ``prune`` of every store share.

A sub-agent's session is named ``<parent>/<the call's result position>`` (or, when
that is too long, ``<prefix of the parent>~<hash>/<position>``) and records its
parent in ``parentSessionId`` (``subagent_session_id`` below). The
id shape finds the candidates, the header decides: a session a user named
``chat/3`` is nobody's child.

- ``delete(parent)`` deletes its sub-agent sessions (and theirs) too: a child
  is part of its parent's record (``show`` nests it; a resumed parent re-attaches
  to it) and would otherwise outlive it for good.
- ``prune`` treats a parent and all its sub-agent sessions as one tree: it is
  pruned whole or not at all, and kept whole when any of its sessions is kept
  (named in ``keep``, live, waiting for approval, or saved after the cutoff). So
  no child of a live or waiting parent is pruned, whatever its own age. A child
  whose parent is gone is a tree of its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection
from datetime import datetime
from typing import TYPE_CHECKING

from durable_agents.checkpoint.format import CheckpointStatus, SessionSummary

if TYPE_CHECKING:
    from durable_agents.checkpoint.stores.base import CheckpointStore

SESSION_ID_BYTES = 900
"""A sub-agent's session id stays under this, like a new session's (room for its forks' ids)."""


def subagent_session_id(parent_session_id: str, position: int) -> str:
    """``<parent>/<position>``: derived from the parent's session and the call's result
    position (unique in a session), so a retried or resumed parent finds the same child.
    Where that would pass :data:`SESSION_ID_BYTES`, ``<prefix of the parent>~<hash>/<position>``."""
    sid = f"{parent_session_id}/{position}"
    if len(sid.encode()) <= SESSION_ID_BYTES:
        return sid
    digest = hashlib.sha256(parent_session_id.encode()).hexdigest()[:16]
    room = SESSION_ID_BYTES - len(f"~{digest}/{position}")
    prefix = parent_session_id.encode()[:room].decode("utf-8", errors="ignore")  # whole characters only
    return f"{prefix}~{digest}/{position}"


_CHILD_ID = re.compile(r"/\d+$")


def _parents(
    store: CheckpointStore, sessions: list[SessionSummary], maybe_child: Callable[[str], bool] | None = None
) -> dict[str, str]:
    """Each sub-agent session's parent (among ``sessions``), by the headers of sub-agent-shaped ids."""
    found: dict[str, str] = {}
    for sid in (s.session_id for s in sessions):
        if not _CHILD_ID.search(sid) or (maybe_child is not None and not maybe_child(sid)):
            continue
        header = store.load_header(sid)
        parent = header.parent_session_id if header is not None else None
        if parent is not None and parent != sid:
            found[sid] = parent
    return found


def subagent_sessions(store: CheckpointStore, session_id: str) -> list[str]:
    """``session_id``'s sub-agent sessions and theirs, parents before their children."""
    sessions = store.list_sessions()
    if not any(_CHILD_ID.search(s.session_id) for s in sessions):
        return []
    parents = _parents(store, sessions, lambda sid: sid.startswith(f"{session_id}/") or "~" in sid)
    children: dict[str, list[str]] = {}
    for child, parent in sorted(parents.items()):
        children.setdefault(parent, []).append(child)
    found: list[str] = []
    todo = list(children.get(session_id, []))
    while todo:
        sid = todo.pop(0)
        if sid in found or sid == session_id:
            continue
        found.append(sid)
        todo += children.get(sid, [])
    return found


def prune_keep(store: CheckpointStore, cutoff: datetime, keep: Collection[str], include_waiting: bool) -> set[str]:
    """``keep`` and every session of a tree (a parent and its sub-agent sessions) that has a
    session ``prune`` keeps: what a store's ``prune`` must keep so trees go whole."""
    kept = set(keep)
    sessions = store.list_sessions()
    if not any(_CHILD_ID.search(s.session_id) for s in sessions):
        return kept
    parents = _parents(store, sessions)
    present = {s.session_id for s in sessions}

    def root(sid: str) -> str:
        seen = {sid}
        while sid in parents and parents[sid] in present and parents[sid] not in seen:
            sid = parents[sid]
            seen.add(sid)
        return sid

    def protected(s: SessionSummary) -> bool:
        waiting = not include_waiting and s.status == CheckpointStatus.AWAITING_APPROVAL
        return s.session_id in kept or waiting or s.updated_at is None or s.updated_at >= cutoff

    trees: dict[str, list[SessionSummary]] = {}
    for s in sessions:
        trees.setdefault(root(s.session_id), []).append(s)
    for members in trees.values():
        if len(members) > 1 and any(protected(s) for s in members):
            kept |= {s.session_id for s in members}
    return kept
