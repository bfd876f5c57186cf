"""A worker's transcripts in memory, so a step reads (and parses) only what is new.

Every model turn needs the whole transcript; reading and parsing it from the
store each time makes step ``n`` cost O(n) and a session O(n²). The cache
keeps, per session, the messages read so far together with the store's token
for their transcript (:class:`~durable_agents.checkpoint.stores.base.TranscriptTail`):
a step asks the store, in one read, for the header, the token and the messages
after the cached ones. The same token means the cached messages are still the
store's (saves that only add messages keep it), so the new ones are appended;
another token (a rewrite, a delete and re-create, a fork into the id) drops the
entry and the transcript is read whole once. Another worker's steps on a
shared store only add messages, which this one then reads. A store that
reports no token is never cached (every read is whole, as before).

Bounded: least recently read sessions are dropped past ``max_sessions`` or
past ``max_bytes`` of messages (their JSON size); a transcript larger than
``max_bytes`` alone is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import CheckpointHeader, Message
from durable_agents.checkpoint.stores.base import CheckpointStore

DEFAULT_CACHE_SESSIONS = 1000
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
"""The default bound of a worker's cached transcripts: their messages' JSON bytes
(parsed messages take a few times that in memory)."""


@dataclass
class _Entry:
    token: str
    messages: list[Message]
    """A prefix of the token's transcript; only ever extended (under the cache's lock)."""
    bytes: int


@dataclass
class TranscriptCache:
    """Transcripts by session id, for one store; safe to use from several threads."""

    max_sessions: int = DEFAULT_CACHE_SESSIONS
    max_bytes: int = DEFAULT_CACHE_BYTES
    hits: int = 0
    """Reads that found the session's transcript cached (only new messages were read)."""
    misses: int = 0
    """Reads of a whole transcript (first read, another token, or a store without tokens)."""
    _entries: OrderedDict[str, _Entry] = field(default_factory=OrderedDict, repr=False)
    _bytes: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.max_sessions < 0 or self.max_bytes < 0:
            raise ConfigurationError(
                f"the transcript cache's bounds must be 0 (no cache) or more, got {self.max_sessions} sessions "
                f"and {self.max_bytes} bytes: fix transcript_cache_sessions / transcript_cache_bytes"
            )

    @property
    def sessions(self) -> int:
        return len(self._entries)

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def read(
        self, store: CheckpointStore, session_id: str, check: Callable[[list[Message]], None] | None = None
    ) -> tuple[CheckpointHeader | None, list[Message]]:
        """The session's latest header and its whole transcript (``header.message_count``
        messages; ``(None, [])`` when there is no such session), reading from ``store``
        only the messages this cache does not hold yet. ``check`` sees each message
        once, when it is read from the store (it raises to refuse them)."""
        with self._lock:
            entry = self._entries.get(session_id)
            held = len(entry.messages) if entry else 0
        tail = store.load_transcript_tail(session_id, held)
        if tail is not None and entry is not None and tail.token is not None and tail.token == entry.token:
            if check is not None and tail.messages:
                check(tail.messages)
            return tail.header, self._extended(session_id, entry, tail.start, tail.messages, tail.header.message_count)
        if tail is not None and tail.start:  # cached from another transcript: read this one whole
            tail = store.load_transcript_tail(session_id, 0)
        with self._lock:
            self.misses += 1
        self.forget(session_id)
        if tail is None:
            return None, []
        if check is not None:
            check(tail.messages)
        if tail.token is not None:
            self._keep(session_id, _Entry(tail.token, list(tail.messages), _size(tail.messages)))
        return tail.header, list(tail.messages)

    def forget(self, session_id: str) -> None:
        with self._lock:
            gone = self._entries.pop(session_id, None)
            if gone is not None:
                self._bytes -= gone.bytes

    def _extended(self, session_id: str, entry: _Entry, start: int, new: list[Message], count: int) -> list[Message]:
        """The first ``count`` messages: the cached ones up to ``start``, then ``new``."""
        size = _size(new) if new else 0
        with self._lock:
            self.hits += 1
            if self._entries.get(session_id) is not entry:
                return entry.messages[:start] + new  # dropped or replaced meanwhile: not kept
            self._entries.move_to_end(session_id)
            if new and len(entry.messages) == start:  # (another thread may have extended it already)
                entry.messages.extend(new)
                entry.bytes += size
                self._bytes += size
                self._evict()
            return entry.messages[:start] + new if len(entry.messages) < start + len(new) else entry.messages[:count]

    def _keep(self, session_id: str, entry: _Entry) -> None:
        if entry.bytes > self.max_bytes or self.max_sessions == 0:
            return  # too large to keep alone: read whole each time
        with self._lock:
            gone = self._entries.pop(session_id, None)
            if gone is not None:
                self._bytes -= gone.bytes
            self._entries[session_id] = entry
            self._bytes += entry.bytes
            self._evict()

    def _evict(self) -> None:
        """Drop least recently read sessions past the bounds (the lock held)."""
        while self._entries and (len(self._entries) > self.max_sessions or self._bytes > self.max_bytes):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.bytes


def _size(messages: list[Message]) -> int:
    """The messages' JSON bytes (what bounds the cache)."""
    return sum(len(m.to_json()) for m in messages)
