"""Webhooks: ``approval.requested``, ``run.finished`` and ``run.failed``, signed, retried with
backoff, each with a stable id, delivered from what the checkpoint store records.

Why the store and not the event log: only runs that stream write events, but every run
saves its checkpoint (``awaiting-approval`` with its ``approvalId`` before the run pauses,
``finished`` when it ends, ``lastError`` when it fails), so what a webhook tells is read
from the sessions' headers. A worker that dies right after the pause changes nothing: the
pause is saved. The notifier keeps its own state in a JSON file (mode 0600): per webhook (by
a digest of its URL) a cursor (the newest ``updatedAt`` it has read, minus a margin on
restart), the outbox of events not yet delivered (with their attempts), and the ids
delivered lately. An event is put in the outbox, the file written, then sent; so a notifier
that crashes re-sends after a restart what it may not have delivered (receivers drop
duplicates by ``id``), and finds again what it had not read.

A webhook's first start (no state for it in the file yet) tells what happens from then on:
its cursor starts at the newest save the store holds, never read again below it. ``since``
asks for a backlog instead: ``"all"`` (every event the store holds) or a time (the sessions
saved after it). A webhook no longer given is forgotten (its undelivered events dropped,
with a warning): given again, it starts afresh.

Each request: ``POST`` with the event as JSON (``{"id", "type", "createdAt", "data"}``)
and headers ``Webhook-Id`` (the event's id), ``Webhook-Timestamp`` (unix seconds) and
``Webhook-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>" with the secret>``. A 2xx
answer is a delivery; anything else (or no answer) is retried after 1, 2, 4 … seconds (at
most ``max_delay``), ``max_attempts`` times in all, then dropped with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx

from durable_agents.checkpoint.format import CheckpointHeader, CheckpointStatus
from durable_agents.checkpoint.stores import CheckpointStore

log = logging.getLogger("durable_agents.web.webhooks")

EVENT_TYPES = ("approval.requested", "run.finished", "run.failed")
RESCAN_MARGIN = timedelta(minutes=5)
"""On start, sessions saved up to this long before the cursor are read again (clocks of
several workers; a save that committed late)."""
KEEP_DELIVERED = 10_000
"""How many delivered ids the state keeps (a re-read session's event is known by its id)."""


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """``v1=<hex>``: HMAC-SHA256 over ``b"<timestamp>." + body``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={mac.hexdigest()}"


def verify(secret: str, headers: dict[str, str], body: bytes, *, tolerance: float = 300.0) -> bool:
    """What a receiver checks: the signature (in constant time) and that the timestamp is recent."""
    try:
        timestamp = int(headers["webhook-timestamp"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance:
        return False
    given = headers.get("webhook-signature", "")
    return hmac.compare_digest(given.encode(), sign(secret, timestamp, body).encode())


@dataclass(frozen=True)
class Webhook:
    url: str
    secret: str
    events: frozenset[str] = frozenset(EVENT_TYPES)

    @property
    def id(self) -> str:
        """What the state file knows this webhook by: a digest of its URL (which may hold a token)."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:16]


Since = datetime | Literal["now", "all"]
"""Where a webhook's first start begins: ``"now"`` (what happens from then on), ``"all"``
(every event the store holds) or a time (the events of sessions saved after it)."""


def events_of(header: CheckpointHeader) -> list[dict[str, Any]]:
    """The events a session's latest save stands for, each with an id that is the same however
    often (and by whichever notifier) the save is read."""
    if header.parent_session_id is not None:
        return []  # a sub-agent's pause or end is told through its parent's session
    sid, uid = header.session_id, header.session_uid or ""
    at = (header.updated_at or datetime.now(UTC)).isoformat()
    base = {"sessionId": sid, "agent": header.agent, "step": header.step_index}
    found: list[tuple[str, str, dict[str, Any]]] = []
    if header.status == CheckpointStatus.AWAITING_APPROVAL and header.approval_id:
        found.append(
            ("approval.requested", f"approval-requested:{header.approval_id}", {"approvalId": header.approval_id})
        )
    if header.status == CheckpointStatus.FINISHED:
        reason = header.finish_reason.value if header.finish_reason else None
        key = _digest(sid, uid, header.message_count, reason)
        found.append(("run.finished", f"run-finished:{key}", {"finishReason": reason}))
    if header.last_error is not None:
        error = header.last_error.model_dump(mode="json", by_alias=True, exclude_none=True)
        key = _digest(sid, uid, header.message_count, json.dumps(error, sort_keys=True))
        found.append(("run.failed", f"run-failed:{key}", {"error": error}))
    return [{"id": i, "type": t, "createdAt": at, "data": {**base, **extra}} for t, i, extra in found]


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


class WebhookNotifier:
    """Reads the store every ``poll_seconds`` and delivers each new event to each webhook
    that wants its type. ``run()`` until cancelled; ``state`` is the notifier's file;
    ``since``: where a webhook without state in it starts (see :data:`Since`)."""

    def __init__(
        self,
        store: CheckpointStore,
        webhooks: Sequence[Webhook],
        state: str | Path,
        *,
        since: Since = "now",
        poll_seconds: float = 2.0,
        base_delay: float = 1.0,
        max_delay: float = 300.0,
        max_attempts: int = 12,
        timeout: float = 10.0,
    ) -> None:
        if not (since in ("now", "all") or isinstance(since, datetime)):
            raise ValueError(f"since={since!r}: 'now', 'all' or a datetime")
        if isinstance(since, datetime) and since.tzinfo is None:
            raise ValueError(f"since={since!r}: give a timezone (e.g. datetime.now(UTC))")
        self.store, self.webhooks, self.path = store, list(webhooks), Path(state)
        self.since = since
        self.poll_seconds, self.base_delay, self.max_delay = poll_seconds, base_delay, max_delay
        self.max_attempts, self.timeout = max_attempts, timeout
        self._dirty = False
        self._state = self._load()
        self.new = [hook for hook in self.webhooks if hook.id not in self._state["hooks"]]
        """The webhooks starting for the first time (no state for them in the file): they start at ``since``."""

    # -- state ------------------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        try:
            state = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"version": 2, "hooks": {}, "outbox": [], "delivered": []}
        if "hooks" not in state:
            state = self._from_version_1(state)
        given = {hook.id for hook in self.webhooks}
        dropped = [e for e in state["outbox"] if e["hook"] not in given]
        if dropped:
            log.warning("webhooks: %d undelivered event(s) of a webhook no longer given dropped", len(dropped))
        forgotten = set(state["hooks"]) - given
        if dropped or forgotten:
            state["outbox"] = [e for e in state["outbox"] if e["hook"] in given]
            state["hooks"] = {hid: kept for hid, kept in state["hooks"].items() if hid in given}
            state["delivered"] = [k for k in state["delivered"] if k.split(":", 1)[0] in given]
            self._dirty = True
        for kept in state["hooks"].values():  # read a margin again: what committed late, or on a clock behind
            cursor, start = _time(kept["cursor"]), _time(kept["start"])
            if cursor is not None:  # (never below where the webhook started)
                again = cursor - RESCAN_MARGIN
                kept["cursor"] = (max(again, start) if start is not None else again).isoformat()
        return state

    def _from_version_1(self, old: dict[str, Any]) -> dict[str, Any]:
        """A state file of one cursor for every webhook, known by their place on the command line."""
        ids = [hook.id for hook in self.webhooks]

        def key(old_key: str) -> str | None:
            place, _, event_id = old_key.partition(":")
            return f"{ids[int(place)]}:{event_id}" if place.isdigit() and int(place) < len(ids) else None

        outbox = []
        for entry in old.get("outbox", []):
            new_key = key(entry.get("key", ""))
            if new_key is not None:  # (else: of a webhook no longer given, dropped)
                kept = {k: v for k, v in entry.items() if k != "webhook"}
                outbox.append({**kept, "hook": new_key.split(":", 1)[0], "key": new_key})
        delivered = [k for k in map(key, old.get("delivered", [])) if k is not None]
        hooks = {hid: {"cursor": old.get("cursor"), "start": None} for hid in ids}
        self._dirty = True
        return {"version": 2, "hooks": hooks, "outbox": outbox, "delivered": delivered}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self._state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._dirty = False

    def _start(self, hook: Webhook, newest: datetime | None) -> None:
        """A webhook's first start: its cursor at ``since`` (``newest``, the store's newest save, for "now")."""
        if self.since == "all":
            start = None
        elif self.since == "now":
            start = newest.isoformat() if newest is not None else None
        else:
            start = self.since.isoformat()
        self._state["hooks"][hook.id] = {"cursor": start, "start": start}
        self._dirty = True

    # -- reading the store ----------------------------------------------------------------------
    def scan(self) -> int:
        """Put the events of the sessions saved since the cursors in the outbox; return how many."""
        sessions = [(s, s.updated_at) for s in self.store.list_sessions() if s.updated_at is not None]
        hooks = self._state["hooks"]
        for hook in self.webhooks:
            if hook.id not in hooks:
                self._start(hook, max((at for _, at in sessions), default=None))
        cursors = {h.id: _time(hooks[h.id]["cursor"]) for h in self.webhooks}
        since = None if None in cursors.values() else min(c for c in cursors.values() if c is not None)
        known_ids = set(self._state["delivered"]) | {e["key"] for e in self._state["outbox"]}
        added, newest = 0, since
        for summary, at in sessions:
            if since is not None and at <= since:
                continue
            newest = max(newest, at) if newest else at
            header = self.store.load_header(summary.session_id)
            if header is None:
                continue
            for event in events_of(header):
                for hook in self.webhooks:
                    key, cursor = f"{hook.id}:{event['id']}", cursors[hook.id]
                    if event["type"] not in hook.events or key in known_ids or (cursor is not None and at <= cursor):
                        continue
                    entry = {"hook": hook.id, "key": key, "event": event, "attempts": 0, "due": 0}
                    self._state["outbox"].append(entry)
                    known_ids.add(key)
                    added += 1
        if newest is not None:
            for hook in self.webhooks:
                cursor = cursors[hook.id]
                if cursor is None or newest > cursor:
                    hooks[hook.id]["cursor"] = newest.isoformat()
                    self._dirty = True
        if added or self._dirty:
            self._save()
        return added

    # -- delivering ---------------------------------------------------------------------------
    async def deliver_due(self, http: httpx.AsyncClient, stop: asyncio.Event | None = None) -> None:
        """Post each event that is due, recording each outcome; none after ``stop`` is set."""
        now = time.time()
        for entry in list(self._state["outbox"]):
            if stop is not None and stop.is_set():
                return
            if entry["due"] > now:
                continue
            hook = next((h for h in self.webhooks if h.id == entry["hook"]), None)
            delivered = hook is not None and await self._post(http, hook, entry["event"])
            entry["attempts"] += 1
            if delivered or hook is None or entry["attempts"] >= self.max_attempts:
                if not delivered:
                    log.warning("webhook event %s not delivered after %d attempts", entry["key"], entry["attempts"])
                self._state["outbox"].remove(entry)
                self._state["delivered"] = [*self._state["delivered"], entry["key"]][-KEEP_DELIVERED:]
            else:
                delay = min(self.base_delay * 2 ** (entry["attempts"] - 1), self.max_delay)
                entry["due"] = now + delay
            self._save()

    async def _post(self, http: httpx.AsyncClient, hook: Webhook, event: dict[str, Any]) -> bool:
        body = json.dumps(event, separators=(",", ":")).encode()
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "Webhook-Id": event["id"],
            "Webhook-Timestamp": str(timestamp),
            "Webhook-Signature": sign(hook.secret, timestamp, body),
            "User-Agent": "durable-agents-webhooks",
        }
        try:
            answer = await http.post(hook.url, content=body, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as e:
            log.info("webhook %s: %s", hook.url, e)
            return False
        return 200 <= answer.status_code < 300

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Read and deliver until cancelled, or until ``stop`` is set: then it returns once the
        delivery in flight is answered and recorded (a receiver that took an event is not sent
        it again by the next notifier on this state file)."""
        async with httpx.AsyncClient(follow_redirects=False) as http:
            while stop is None or not stop.is_set():
                try:
                    await asyncio.to_thread(self.scan)
                    await self.deliver_due(http, stop)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a store outage or a full disk: said, and tried again
                    log.exception("webhooks: reading the store or delivering failed; trying again")
                if stop is None:
                    await asyncio.sleep(self.poll_seconds)
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.poll_seconds)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[WebhookNotifier]:
        """``run()`` in a task for the block's duration; at its end, the delivery in flight
        finishes (at most ``timeout`` seconds) before the task stops."""
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(stop))
        try:
            yield self
        finally:
            stop.set()
            try:
                await asyncio.wait({task}, timeout=self.timeout + 1.0)
            finally:
                task.cancel()  # (done by now, unless a post outlived its timeout)
                with contextlib.suppress(asyncio.CancelledError):
                    await task
