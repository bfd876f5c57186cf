"""Checks of a store's identity: an id created with the store, a location, and
the refusal to write once the store's files are deleted or replaced under it."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable

import pytest

from durable_agents.checkpoint.conformance._base import (
    ConformanceBase,
    StoreFactory,
    StoreHandles,
    grow,
    latest,
    loaded,
    requires,
    with_calls,
)
from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import Message
from durable_agents.checkpoint.stores.base import CheckpointStore


def _local_path(store: CheckpointStore) -> str:
    """The store's location when it is a local file or directory (the replacement checks need one)."""
    location = store.location
    if not (os.path.isabs(location) and os.path.exists(location)):
        pytest.skip(f"the store's location {location!r} is not a local file or directory")
    return location


def _remove(location: str) -> None:
    """Delete a store's file or directory, and its sidecar files (``<file>-wal``…)."""
    if os.path.isdir(location):
        shutil.rmtree(location)
    else:
        os.unlink(location)
    for sidecar in glob.glob(glob.escape(location) + "-*"):
        os.unlink(sidecar)


def _writes(store: CheckpointStore) -> list[Callable[[], object]]:
    """One call of every kind of write, on session ``a`` (which has a pending call at 2);
    what they write is read now, before the store's files go."""
    header, copy = latest(store, "a"), loaded(store, "a").model_copy(update={"session_id": "b", "updated_at": None})
    return [
        lambda: store.append(header.model_copy(update={"message_count": 3}), 2, [Message.user("lost")]),
        lambda: store.save(copy),
        lambda: store.tool_started("a", 2),
        lambda: store.record_tool_result("a", 2, Message.user("lost"), 2, 1),
        lambda: store.delete("a"),
    ]


class IdentityChecks(ConformanceBase):
    @pytest.fixture
    def make_other_store(self) -> StoreFactory:
        """Override: like ``make_store``, but its handles reach a second store of the same kind."""
        pytest.skip(f"{type(self).__name__} does not override make_other_store: a second store is needed")

    def test_a_store_has_an_id_and_a_location(self, stores: StoreHandles) -> None:
        store = stores()
        assert isinstance(store.store_id, str) and len(store.store_id) >= 16, store.store_id
        assert store.store_id == store.store_id  # read once, not made up on each call
        assert isinstance(store.location, str) and store.location
        assert "password" not in store.location.lower() or "***" in store.location

    @requires("durable")
    def test_the_id_is_stable_across_reopen(self, stores: StoreHandles) -> None:
        first = stores()
        store_id, location = first.store_id, first.location
        grow(first, "a", 1)
        stores.close(first)
        again = stores()
        assert (again.store_id, again.location) == (store_id, location)

    @requires("shared_across_processes")
    def test_handles_on_one_store_share_its_id(self, stores: StoreHandles) -> None:
        assert stores().store_id == stores().store_id

    def test_two_stores_have_different_ids(self, stores: StoreHandles, make_other_store: StoreFactory) -> None:
        other = make_other_store(history_limit=5)
        try:
            assert stores().store_id != other.store_id
        finally:
            other.close()

    def test_a_store_whose_files_are_deleted_refuses_every_write(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["c1"])
        location, writes = _local_path(store), _writes(store)
        _remove(location)
        for write in writes:
            with pytest.raises(StoreCorruptError, match=location):
                write()

    def test_a_store_whose_files_are_replaced_refuses_every_write(
        self, stores: StoreHandles, make_other_store: StoreFactory
    ) -> None:
        store = stores()
        with_calls(store, ["c1"])
        location, writes = _local_path(store), _writes(store)
        other = make_other_store(history_limit=5)
        grow(other, "x", 1)
        other_id, other_location = other.store_id, other.location
        other.close()
        _remove(location)
        os.rename(other_location, location)  # another store now lives where this one did
        for write in writes:
            with pytest.raises(StoreCorruptError, match=location):
                write()
        fresh = stores()  # nothing this handle tried to write reached the store now there
        assert fresh.store_id == other_id
        assert [s.session_id for s in fresh.list_sessions()] == ["x"]
