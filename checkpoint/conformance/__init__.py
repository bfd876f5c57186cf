"""The checkpoint-store conformance suite, for the built-in stores and yours.

Every store (``SqliteStore``, ``MemoryStore``, ``FileStore``, ``PostgresStore``)
passes these checks; a store you write for another database can run the same
ones. Subclass :class:`StoreConformance` in a test module (its name must start
with ``Test``) and override the ``make_store`` fixture: it returns a function
``make(history_limit)`` that opens a handle on your store. Every handle one
``make`` opens must reach the same data, like two worker processes opening
one database (a fresh database per test: use ``tmp_path`` or a new schema).
The suite closes the handles it opens.

A store states what it claims beyond the interface in a
:class:`StoreCapabilities` class attribute (the default claims everything):
``history`` (keeps the ring of saves), ``durable`` (a save outlives its
handle and process), ``shared_across_processes`` (handles reach one store),
``concurrent`` (callable from several threads), ``transcript_tokens``
(``load_transcript_tail`` names each transcript, so workers read only new
messages; the default method does not), ``events`` (keeps each session's
event log, which streamed runs write). Checks of a claim the store
does not make are skipped, and the skip names the claim (``pytest -rs``).
Set ``capabilities`` on the test class instead to test a store's claims
without changing the store. Override ``storage_bytes(store)`` to return the
bytes the store keeps, and the suite also checks that history storage grows
linearly with a session (it is skipped otherwise).

Every store has an identity: ``store_id`` (made with the store, the same for
every handle and after a reopen) and ``location``. Override the
``make_other_store`` fixture (like ``make_store``, its handles reaching a
second store) and the suite checks that two stores' ids differ. When
``location`` is a local file or directory, the suite deletes it, or puts the
other store in its place, under a live handle: every write must then raise
``StoreCorruptError`` naming the location, and none may land.

Example, a runnable test module (``pytest -rs test_my_store.py``)::

    import pytest

    from durable_agents.checkpoint import SqliteStore
    from durable_agents.checkpoint.conformance import StoreCapabilities, StoreConformance


    class NoHistoryStore(SqliteStore):
        # A user's store: SQLite that keeps no history ring, and says so.
        capabilities = StoreCapabilities(history=False)

        def __init__(self, path, *, history_limit=0):
            super().__init__(path, history_limit=0)


    class TestNoHistoryStore(StoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            def make(history_limit):
                return NoHistoryStore(tmp_path / "store.db", history_limit=history_limit)

            return make

The checks are ordinary pytest tests (``test_*`` methods), so ``-k``,
``--deselect`` and markers work on them; :func:`requires` marks a check of
your own with the claims it needs. Importing this module imports pytest; the
rest of ``durable_agents.checkpoint`` does not.
"""

from __future__ import annotations

from durable_agents.checkpoint.conformance._base import StoreFactory, StoreHandles, requires
from durable_agents.checkpoint.conformance._events import EventChecks
from durable_agents.checkpoint.conformance._history import HistoryChecks
from durable_agents.checkpoint.conformance._identity import IdentityChecks
from durable_agents.checkpoint.conformance._records import RecordChecks
from durable_agents.checkpoint.conformance._sessions import SessionChecks
from durable_agents.checkpoint.conformance._tokens import TokenChecks
from durable_agents.checkpoint.conformance._tools import ToolChecks
from durable_agents.checkpoint.stores.base import StoreCapabilities


class StoreConformance(
    RecordChecks, HistoryChecks, SessionChecks, ToolChecks, TokenChecks, EventChecks, IdentityChecks
):
    """Subclass with a ``make_store`` fixture to run every check on a store.

    Class attributes and hooks: ``capabilities`` (``None``: the store's own),
    ``storage_bytes(store)`` (``None``: storage growth is not checked).
    Fixtures the checks use: ``stores`` (``stores(history_limit=5)`` opens a
    handle), ``store_capabilities``, and ``make_other_store`` (override it
    like ``make_store``, its handles reaching a second store, for the checks
    that two stores differ; they skip otherwise).
    """


__all__ = ["StoreCapabilities", "StoreConformance", "StoreFactory", "StoreHandles", "requires"]
