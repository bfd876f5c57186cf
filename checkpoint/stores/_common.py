"""Pure logic shared by the store backends (no I/O)."""

from __future__ import annotations

import gc
import secrets
import threading
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from pydantic import TypeAdapter

from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import CheckpointHeader, CheckpointStatus, HistoryEntry, Message

T = TypeVar("T")


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a bulk read parses (thousands of headers):
    each young collection it triggers would otherwise walk every object the parse keeps,
    several times over, and, in a worker, its whole heap (most of a 10,000-session
    listing's time). Reference counting still frees; collection resumes when the last
    pause in any thread ends. Nested and concurrent pauses count."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def now() -> datetime:
    return datetime.now(UTC)


def as_utc(when: datetime) -> datetime:
    """An aware UTC time (a naive one is local time, as ``datetime.timestamp`` reads it)."""
    return datetime.fromtimestamp(when.timestamp(), UTC) if when.tzinfo is None else when.astimezone(UTC)


def cutoff_of(older_than: timedelta | datetime) -> datetime:
    return as_utc(older_than) if isinstance(older_than, datetime) else now() - older_than


def header_key(header: CheckpointHeader) -> str:
    """The header as stored in history, without its timestamp (so retries compare equal)."""
    return header.model_dump_json(by_alias=True, exclude_none=True, exclude={"updated_at"})


_STAMP = TypeAdapter(datetime)
_LAST_FIELD = ',"messageCount":'


def header_texts(header: CheckpointHeader, decisions: list[str] | None = None) -> tuple[str, str]:
    """The header's text as a save stores it (as ``to_json()`` gives it) and its
    :func:`header_key`, from one serialization: a header's size grows with its decisions
    (issue 42), and a save writes both. ``updatedAt`` is the field before ``messageCount``,
    the last one.

    ``decisions``: the header's decisions, each as its ``to_json()`` (a store keeps them apart
    from its history's keys): then the key leaves them out, and the text has them last but one
    (the same header when read)."""
    if decisions is None:
        key = header_key(header)
    else:
        key = header.model_dump_json(by_alias=True, exclude_none=True, exclude={"updated_at", "decisions"})
    stamp = "" if header.updated_at is None else f',"updatedAt":{_STAMP.dump_json(header.updated_at).decode()}'
    if decisions is None and not stamp:
        return key, key
    cut = key.rfind(_LAST_FIELD)
    if type(header) is not CheckpointHeader or cut < 0:  # (a subclass's fields: serialize it again)
        return header.to_json(), key
    listed = "" if decisions is None else f',"decisions":[{",".join(decisions)}]'
    return f"{key[:cut]}{listed}{stamp}{key[cut:]}", key


def transcript_token(header: CheckpointHeader, transcript: int) -> str:
    """A transcript's token (``TranscriptTail.token``): the session's random uid, so a
    deleted and re-created id differs, and the store's id of the transcript, which a
    save that changes an earlier message replaces."""
    return f"{header.session_uid or ''}:{transcript}"


def fresh_transcript_base() -> int:
    """The first transcript id of a session that has none: random, so a session
    deleted and saved again (with the same uid, e.g. an exported one imported) gets
    another token than the transcript it replaces."""
    return secrets.randbelow(1 << 30) + 1


def stamped(header: CheckpointHeader, start: int, messages: list[Message]) -> CheckpointHeader:
    """Check an ``append`` call and give its header the save time."""
    if header.message_count != start + len(messages):
        raise ValueError(f"header.message_count={header.message_count} but start+len(messages)={start + len(messages)}")
    return header.model_copy(update={"updated_at": as_utc(header.updated_at or now())})


def check_in_batch(position: int, batch_start: int, batch_size: int) -> None:
    """A result's position must lie in its batch (``batch_start … batch_start+batch_size-1``)."""
    if not batch_start <= position < batch_start + batch_size:
        raise ValueError(
            f"tool result position {position} is outside its batch "
            f"(positions {batch_start}..{batch_start + batch_size - 1})"
        )


def past_batch(
    session_id: str,
    where: str,
    count: int,
    batch_start: int,
    batch_size: int,
    recorded: Container[int],
) -> bool:
    """True when the checkpoint already holds the whole batch and more.

    That happens when a step re-runs after a crash (a local activity, or a
    retried one whose run moved on): there is nothing to write, and the
    batch ends at ``batch_start + batch_size``.
    """
    if count - batch_start <= batch_size:
        return False
    if all(p in recorded for p in range(batch_start, batch_start + batch_size)):
        return True
    raise StoreCorruptError(
        f"session {session_id!r} in {where}: checkpoint has {count} messages, past the tool "
        f"batch at positions {batch_start}..{batch_start + batch_size - 1}, but not every "
        "position of that batch has a recorded result"
    )


def batch_prefix(
    session_id: str,
    where: str,
    count: int,
    batch_start: int,
    batch_size: int,
    results: Mapping[int, T],
) -> list[T]:
    """The recorded results that extend the transcript, in position order.

    They start at the first position not yet in the transcript (``count``) and
    go only as far as they are contiguous.
    """
    done = count - batch_start
    if done < 0 or done > batch_size:
        raise StoreCorruptError(
            f"session {session_id!r} in {where}: checkpoint has {count} messages, which is not "
            f"inside the tool batch starting at {batch_start}; the store was changed under a live run"
        )
    new: list[T] = []
    for position in range(count, batch_start + batch_size):
        if position not in results:
            break
        new.append(results[position])
    return new


def stale_marker_cut(old_count: int, new_count: int, changed: Iterable[int]) -> int | None:
    """The first position whose tool markers a save makes stale, if any.

    Markers are keyed by transcript position, so a save that removes messages
    (a shorter checkpoint) or changes one the checkpoint held (``changed``:
    positions whose stored message differs from the saved one) leaves markers
    at and after that point belonging to calls no longer in the transcript:
    a later call at the same position must not see them.
    """
    cut = min((p for p in changed if p < old_count), default=None)
    if new_count < old_count:
        cut = new_count if cut is None else min(cut, new_count)
    return cut


def session_list_query(status: str | None, agent: str | None, mark: str) -> tuple[str, list[object]]:
    """The ``list_sessions`` SQL (newest first) and its parameters; ``mark`` is the placeholder."""
    query = (
        "SELECT session_id, agent, status, step_index, message_count, approval_id, updated_at, last_error"
        " FROM sessions WHERE 1=1"
    )
    params: list[object] = []
    if status is not None:
        query += f" AND status = {mark}"
        params.append(CheckpointStatus(status).value)
    if agent is not None:
        query += f" AND agent = {mark}"
        params.append(agent)
    return query + " ORDER BY updated_at DESC", params


def history_entries(
    rows: list[tuple[CheckpointHeader, int, datetime]],
    read: Callable[[int, int], list[Message]],
) -> list[HistoryEntry]:
    """Entries from (header, transcript id, saved at) rows, each transcript read once."""
    longest: dict[int, int] = {}
    for header, transcript_id, _ in rows:
        longest[transcript_id] = max(longest.get(transcript_id, 0), header.message_count)
    transcripts = {t: read(t, n) for t, n in longest.items()}
    entries = []
    for header, transcript_id, saved_at in rows:
        checkpoint = header.model_copy(update={"updated_at": saved_at}).with_messages(
            transcripts[transcript_id][: header.message_count]
        )
        entries.append(
            HistoryEntry(step=header.step_index, saved_at=saved_at, status=header.status, checkpoint=checkpoint)
        )
    return entries
