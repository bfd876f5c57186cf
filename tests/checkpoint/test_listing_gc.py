"""Listing thousands of waiting sessions runs no garbage-collector pass (issue 13, item 5).

Before, each young collection the parse triggered walked every object it kept (and,
in a worker, its whole heap): most of a 10,000-session listing's time. Measured as
collections counted, not time.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from durable_agents.checkpoint import Checkpoint, CheckpointStatus, Message, SqliteStore
from durable_agents.checkpoint.format import Role, ToolCall
from durable_agents.checkpoint.stores._common import gc_paused
from durable_agents.client.approvals import store_approvals

WAITING = 2_000


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of each collection that starts while the test runs."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(count)
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)


def test_listing_two_thousand_waiting_sessions_runs_no_collection(tmp_path: Path, collections: list[int]) -> None:
    store = SqliteStore(tmp_path / "s.db")
    call = ToolCall(id="c0", name="charge", arguments={"amount": 5, "memo": "x" * 200})
    turn = Message(role=Role.ASSISTANT, content="charging", tool_calls=[call])
    start = datetime(2026, 12, 1, tzinfo=UTC)
    for i in range(WAITING):
        store.save(
            Checkpoint(
                session_id=f"s{i}",
                agent="shop",
                status=CheckpointStatus.AWAITING_APPROVAL,
                approval_id=f"ap-{i}",
                messages=[Message.user("charge me"), turn],
                updated_at=start + timedelta(seconds=i),
            )
        )
    assert gc.isenabled()
    collections.clear()
    listed = store_approvals(store)
    assert len(collections) <= 1, collections  # one pass over what it kept, at the end; before: dozens
    assert gc.isenabled()  # and it is on again
    assert len(listed) == WAITING
    assert {p.approval_id for p in listed} == {f"ap-{i}" for i in range(WAITING)}
    assert all(p.tool_name == "charge" and p.arguments == call.arguments for p in listed)
    store.close()


def test_a_pause_keeps_the_collector_off_until_the_last_one_in_any_thread_ends() -> None:
    first_in, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            first_in.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    assert first_in.wait(5)
    assert not gc.isenabled()
    with gc_paused():
        with gc_paused():  # nested
            pass
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still parses
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_the_application_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
