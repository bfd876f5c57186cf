"""The suite's fixtures, claim gate and the checkpoints it writes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

import pytest

from durable_agents.checkpoint.format import (
    Checkpoint,
    CheckpointHeader,
    CheckpointStatus,
    Fingerprint,
    FinishReason,
    Message,
    Role,
    RunConfig,
    ToolCall,
    ToolFingerprint,
    ToolSpec,
    Usage,
)
from durable_agents.checkpoint.parts import ImagePart, OpaquePart
from durable_agents.checkpoint.stores.base import CheckpointStore, StoreCapabilities

StoreFactory = Callable[..., CheckpointStore]
"""``make(history_limit=n)`` -> a new handle on the store under test."""
F = TypeVar("F", bound=Callable[..., Any])
T0 = datetime(2024, 1, 1, tzinfo=UTC)
CLAIMS = frozenset(f.name for f in fields(StoreCapabilities))


def requires(*claims: str) -> Callable[[F], F]:
    """Run the decorated check only for stores that make every one of ``claims``."""
    unknown = set(claims) - CLAIMS
    if unknown:
        raise ValueError(f"unknown store claims {sorted(unknown)}: choose from {sorted(CLAIMS)}")

    def mark(check: F) -> F:
        check.conformance_requires = claims  # type: ignore[attr-defined]
        return check

    return mark


class StoreHandles:
    """Opens handles on the store under test and closes them after the check."""

    def __init__(self, make: StoreFactory) -> None:
        self._make = make
        self._open: list[CheckpointStore] = []

    def __call__(self, history_limit: int = 5) -> CheckpointStore:
        store = self._make(history_limit=history_limit)
        self._open.append(store)
        return store

    def close(self, store: CheckpointStore) -> None:
        self._open = [s for s in self._open if s is not store]
        store.close()

    def close_all(self) -> None:
        while self._open:
            self._open.pop().close()


class ConformanceBase:
    """Fixtures of :class:`StoreConformance`; see the package docstring."""

    capabilities: ClassVar[StoreCapabilities | None] = None
    """What the store claims; ``None`` reads the store's own ``capabilities``."""

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        """Override: return ``make(history_limit=n)``; handles it makes share one store."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the make_store fixture: "
            "return a function make(history_limit) -> CheckpointStore"
        )

    @pytest.fixture
    def stores(self, make_store: StoreFactory) -> Iterator[StoreHandles]:
        handles = StoreHandles(make_store)
        try:
            yield handles
        finally:
            handles.close_all()

    @pytest.fixture
    def store_capabilities(self, make_store: StoreFactory) -> StoreCapabilities:
        if self.capabilities is not None:
            return self.capabilities
        probe = make_store(history_limit=5)
        try:
            return getattr(probe, "capabilities", StoreCapabilities())
        finally:
            probe.close()

    @pytest.fixture(autouse=True)
    def _skip_unclaimed(self, request: pytest.FixtureRequest, store_capabilities: StoreCapabilities) -> None:
        missing = [
            c for c in getattr(request.function, "conformance_requires", ()) if not getattr(store_capabilities, c)
        ]
        if missing:
            claims = ", ".join(f"StoreCapabilities.{c}" for c in missing)
            pytest.skip(f"the store does not claim {claims}")

    def storage_bytes(self, store: CheckpointStore) -> int | None:
        """Override to measure what ``store`` keeps (bytes); ``None`` skips the storage checks."""
        return None

    def measured(self, store: CheckpointStore) -> int:
        size = self.storage_bytes(store)
        if size is None:
            pytest.skip(f"{type(self).__name__}.storage_bytes measures nothing: override it to check storage growth")
        return size


# -- what the checks write and read -------------------------------------------------
def loaded(store: CheckpointStore, sid: str) -> Checkpoint:
    """The session's checkpoint, which must exist."""
    cp = store.load(sid)
    assert cp is not None, f"session {sid!r} is missing"
    return cp


def latest(store: CheckpointStore, sid: str) -> CheckpointHeader:
    """The session's latest header, which must exist."""
    header = store.load_header(sid)
    assert header is not None, f"session {sid!r} is missing"
    return header


def assistant(i: int, size: int = 10) -> Message:
    return Message(
        role=Role.ASSISTANT,
        content=f"turn {i} " + "x" * size,
        tool_calls=[ToolCall(id=f"call_{i}", name="t", arguments={"i": i})],
    )


def grow(store: CheckpointStore, sid: str, steps: int, size: int = 10, at: datetime | None = None) -> None:
    """A first save then ``steps`` appends of one message (the worker's data plane)."""
    store.save(Checkpoint(session_id=sid, messages=[Message.system("sys"), Message.user("go")], updated_at=at))
    for i in range(steps):
        header = latest(store, sid)
        when = at + timedelta(seconds=i + 1) if at else None
        store.append(
            header.model_copy(
                update={"message_count": header.message_count + 1, "step_index": i + 1, "updated_at": when}
            ),
            header.message_count,
            [assistant(i, size)],
        )


def full_checkpoint(sid: str = "a", **update: Any) -> Checkpoint:
    """A checkpoint with every field set (a NUL and non-ASCII text included)."""
    cp = Checkpoint(
        session_id=sid,
        agent="planner",
        step_index=3,
        messages=[
            Message.system("be brief"),
            Message.user(
                "héllo ✓ \x00 nul",
                ImagePart(media_type="image/png", data="aGk="),
                OpaquePart(provider="p", data={"type": "x", "n": [1, "✓"]}),
            ),
            assistant(1),
            Message.tool_result(ToolCall(id="call_1", name="t"), '{"ok": true}', is_error=True),
        ],
        usage=Usage(input_tokens=3, output_tokens=4, requests=1, cache_read_tokens=2, cache_write_tokens=1),
        business_state={"k": [1, 2.5, None, "s"], "nested": {"a": True}},
        status=CheckpointStatus.AWAITING_APPROVAL,
        approval_id="ap-1",
        remaining_tool_calls=[ToolCall(id="c2", name="t", arguments={"x": 1})],
        fingerprint=Fingerprint(
            model="m", tools=[ToolFingerprint(name="t", schema_hash="h")], instructions_hash="ih", digest="d"
        ),
        finish_reason=FinishReason.AWAITING_APPROVAL,
        run_config=RunConfig(agent="planner", model="m", tools=[ToolSpec(name="t")]),
        run_start_index=1,
        run_start_step=0,
        updated_at=T0,
    )
    return cp.model_copy(update=update)


def with_calls(store: CheckpointStore, ids: list[str], sid: str = "a") -> None:
    """A session whose last turn asks for the tool calls ``ids`` (results go at 2…)."""
    store.save(
        Checkpoint(
            session_id=sid,
            messages=[
                Message.user("go"),
                Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id=i, name="t") for i in ids]),
            ],
        )
    )


def in_threads(jobs: Sequence[Callable[[], object]]) -> None:
    """Run every job in a thread of its own; re-raise the first failure."""
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        try:
            job()
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def two_handles(stores: StoreHandles, capabilities: StoreCapabilities) -> tuple[CheckpointStore, CheckpointStore]:
    """Two workers' handles on one store (one handle twice if handles share nothing)."""
    first = stores(history_limit=50)
    return first, stores(history_limit=50) if capabilities.shared_across_processes else first
