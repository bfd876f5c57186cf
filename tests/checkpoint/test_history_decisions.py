"""A session's history keeps each save's decisions, without writing them all again per save.

A header carries every decision of its session (issue 42: with an approval policy, a busy
session gathers one per gated call), and each save adds an entry to the history ring. The
SQL stores keep a history entry's decisions as rows of a list the next entry extends, so a
save that adds one decision writes one row, not the whole list again; what any reader sees
(``history``, ``load_header``, a fork from an entry) is as before, on every backend.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from durable_agents.checkpoint import Checkpoint, Message
from durable_agents.checkpoint.format import CheckpointHeader, Decision
from tests.checkpoint.conftest import StoreFactory, backend

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def decision(i: int) -> Decision:
    return Decision(
        approval_id=f"a{i}",
        tool_call_id=f"call_{i}",
        tool_name="book",
        approved=i % 3 != 0,
        decided_at=T0 + timedelta(seconds=i),
        source="allow-rule",
        reason=f"allow rule 'small' (amount_cents <= {i})",
        position=2 * i + 2,
    )


def save(store, header: CheckpointHeader, messages: list[Message]) -> CheckpointHeader:  # type: ignore[no-untyped-def]
    count = header.message_count
    grown = header.model_copy(update={"message_count": count + len(messages), "updated_at": None})
    store.append(grown, count, messages)
    return store.load_header(header.session_id)


def grow(store, sid: str, lists: list[list[Decision] | None]) -> None:  # type: ignore[no-untyped-def]
    """One save per entry of ``lists``: a message and the session's decisions then."""
    store.save(Checkpoint(session_id=sid, messages=[Message.user("go")]))
    header = store.load_header(sid)
    for i, decisions in enumerate(lists):
        header = save(store, header.model_copy(update={"decisions": decisions}), [Message.user(f"m{i}")])


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store_factory(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    pg_url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with backend(request.param, tmp_path, pg_url) as make:
        yield make


def rows(store, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    if store.backend == "postgres":
        with store._open(write=False) as cur:
            return list(cur.execute(sql).fetchall())
    return list(store._db.execute(sql).fetchall())


def test_each_history_entry_has_the_decisions_of_its_save(store_factory: StoreFactory) -> None:
    store = store_factory(history_limit=50)
    d = [decision(i) for i in range(8)]
    # more decisions, the same ones, fewer (a decision taken back), others as many or more
    lists = [
        None,
        [],
        d[:1],
        d[:2],
        d[:2],
        d[:3],
        d[:2],
        [d[0], d[1], d[5]],
        [*d[:2], d[5], d[6], d[7]],
        d[3:5],
        [d[7], d[6], d[5]],
    ]
    grow(store, "s", lists)
    entries = list(reversed(store.history("s")))[1:]  # oldest first, after the first save
    assert [e.checkpoint.decisions for e in entries] == lists
    assert store.load_header("s").decisions == lists[-1]
    assert store.load("s").decisions == lists[-1]
    # a fork from an entry carries that entry's decisions
    assert [e.checkpoint.header().decisions for e in entries] == lists


def test_a_second_handle_extends_the_list_another_wrote(store_factory: StoreFactory) -> None:
    if store_factory.kind == "memory":  # type: ignore[attr-defined]
        pytest.skip("a memory store has no second handle on its data")
    one, two = store_factory(history_limit=50), store_factory(history_limit=50)
    d = [decision(i) for i in range(6)]
    store = one
    header = None
    one.save(Checkpoint(session_id="s", messages=[Message.user("go")]))
    for i in range(1, 7):
        store = two if i % 2 else one  # two workers taking turns on one session
        header = store.load_header("s")
        header = save(store, header.model_copy(update={"decisions": d[:i]}), [Message.user(f"m{i}")])
    assert [e.checkpoint.decisions for e in reversed(one.history("s"))][1:] == [d[:i] for i in range(1, 7)]
    assert [e.checkpoint.decisions for e in reversed(two.history("s"))][1:] == [d[:i] for i in range(1, 7)]


def test_a_save_that_adds_a_decision_writes_one_row_and_no_decisions_in_its_entry(sql_store_factory) -> None:  # type: ignore[no-untyped-def]
    store = sql_store_factory(history_limit=50)
    d = [decision(i) for i in range(40)]
    grow(store, "s", [d[: i + 1] for i in range(40)])
    [(entries, longest)] = rows(store, "SELECT COUNT(*), MAX(LENGTH(header)) FROM checkpoint_history")
    [(decision_rows,)] = rows(store, "SELECT COUNT(*) FROM history_decisions")
    assert entries == 41 and decision_rows == 40  # one row a decision, not one a decision per entry
    assert longest < 1000  # each entry's header without its 40 decisions (~200 bytes each)
    assert '"decisions"' not in rows(store, "SELECT header FROM checkpoint_history ORDER BY seq DESC")[0][0]
    assert len(store.load_header("s").decisions) == 40  # the session's own row keeps them
    # the same save again (a retried activity) adds neither an entry nor rows
    header = store.load_header("s")
    store.append(header.model_copy(update={"updated_at": None}), header.message_count, [])
    assert rows(store, "SELECT COUNT(*) FROM checkpoint_history")[0][0] == 41
    assert rows(store, "SELECT COUNT(*) FROM history_decisions")[0][0] == 40


def test_lists_nothing_points_at_are_dropped_with_their_entries_and_the_session(sql_store_factory) -> None:  # type: ignore[no-untyped-def]
    store = sql_store_factory(history_limit=3)
    d = [decision(i) for i in range(6)]
    grow(store, "s", [d[:2], d[:3], [d[0], d[4]], d[4:6], d[4:6], [*d[4:6], d[1]]])
    # the ring holds the last 3 saves: lists [d4, d5] (+ d1) only; the older lists are gone
    assert [e.checkpoint.decisions for e in reversed(store.history("s"))] == [d[4:6], d[4:6], [*d[4:6], d[1]]]
    assert rows(store, "SELECT COUNT(DISTINCT list_id), COUNT(*) FROM history_decisions") == [(1, 3)]
    store.delete("s")
    assert rows(store, "SELECT COUNT(*) FROM history_decisions") == [(0,)]


def test_pruned_history_takes_its_lists_along(sql_store_factory) -> None:  # type: ignore[no-untyped-def]
    store = sql_store_factory(history_limit=50)
    d = [decision(i) for i in range(3)]
    grow(store, "s", [d[:1], d[:2], d[:3]])
    store.delete("s", keep_history=True)
    assert rows(store, "SELECT COUNT(*) FROM history_decisions") == [(3,)]  # kept with the history
    assert [e.checkpoint.decisions for e in reversed(store.history("s"))][1:] == [d[:1], d[:2], d[:3]]
    store.prune(datetime.now(UTC) + timedelta(seconds=1))
    assert store.history("s") == []
    assert rows(store, "SELECT COUNT(*) FROM history_decisions") == [(0,)]


def test_entries_written_with_their_decisions_in_their_header_read_as_before(sql_store_factory) -> None:  # type: ignore[no-untyped-def]
    """A store written before lists existed: its entries' headers hold their decisions."""
    store = sql_store_factory(history_limit=50)
    d = [decision(i) for i in range(3)]
    grow(store, "s", [d[:1], d[:2]])
    old_style = store.load_header("s").model_copy(update={"updated_at": None}).to_json()
    with store._open() as _:
        store._run(
            "UPDATE checkpoint_history SET header = ?, decision_list = NULL, decision_count = NULL"
            " WHERE seq = (SELECT MAX(seq) FROM checkpoint_history)",
            (old_style,),
        )
    store._lists.clear()
    header = store.load_header("s")
    save(store, header.model_copy(update={"decisions": d[:3]}), [Message.user("next")])
    assert [e.checkpoint.decisions for e in reversed(store.history("s"))][1:] == [d[:1], d[:2], d[:3]]


def test_a_save_that_failed_leaves_nothing_remembered_of_its_decisions(sql_store_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A store keeps in memory what it wrote of a session's decision list only once its write
    committed: after a failed save, another writer's rows in that list are read, not assumed."""
    one, two = sql_store_factory(history_limit=50), sql_store_factory(history_limit=50)
    d = [decision(i) for i in range(4)]
    other = decision(9)
    grow(one, "s", [d[:2]])
    header = one.load_header("s")
    run = one._run

    def failing(query: str, params=()):  # type: ignore[no-untyped-def]
        if query.startswith("INSERT INTO checkpoint_history"):
            raise RuntimeError("disk went away")
        return run(query, params)

    monkeypatch.setattr(one, "_run", failing)
    with pytest.raises(RuntimeError):
        save(one, header.model_copy(update={"decisions": d[:4]}), [Message.user("lost")])
    monkeypatch.setattr(one, "_run", run)
    save(two, two.load_header("s").model_copy(update={"decisions": [*d[:2], other]}), [Message.user("two")])
    save(one, one.load_header("s").model_copy(update={"decisions": d[:4]}), [Message.user("one")])
    assert [e.checkpoint.decisions for e in reversed(one.history("s"))][1:] == [d[:2], [*d[:2], other], d[:4]]
