"""The policy book (``checkpoint.policy_book``): where approval policies and grants are kept.

One spec for every book (memory, SQLite, PostgreSQL) through one parametrized fixture:
versions and the refused stale write, the audit, grants added, listed, revoked and used at
most once per call key, expiry judged by the time given. Then what only real processes
show: two processes racing for a grant's last uses never take more than ``maxUses``, and a
new process sees everything that was written."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durable_agents.checkpoint import ApprovalPolicy, ConfigurationError, FileStore, MemoryStore, PolicyCall, decide
from durable_agents.checkpoint.approval_grants import Grant, GrantScope, grant_is_live
from durable_agents.checkpoint.encryption import EncryptionKeys, new_key
from durable_agents.checkpoint.errors import PolicyVersionConflictError, StoreUnavailableError
from durable_agents.checkpoint.policy_book import (
    BOOK_SUFFIX,
    FILE_STORE_BOOK,
    MemoryPolicyBook,
    PolicyBook,
    PolicyScope,
    PostgresPolicyBook,
    SqlitePolicyBook,
    _refusal,
    effective_policy,
    policy_book_for,
    policy_digest,
)
from durable_agents.checkpoint.stores.encrypted import EncryptedStore
from durable_agents.checkpoint.stores.sqlite import SqliteStore
from tests.checkpoint.conftest import backend

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
AGENT = PolicyScope.of_agent("support")
SESSION = PolicyScope.of_session("chat-42")

SMALL_REFUNDS = {
    "allow": [
        {"name": "small-refunds", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}
    ]
}
NO_HUGE_REFUNDS = {
    "deny": [
        {"name": "huge-refunds", "tools": ["refund"], "when": [{"arg": "amount_cents", "op": ">", "value": 100000}]}
    ]
}

BookOpener = Callable[[], PolicyBook]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def open_book(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BookOpener]:
    """``open_book()`` -> a handle on one book, as a worker of the backend gets it from its
    store (``policy_book_for``); each call a new handle, as another process would have
    (the memory book: the same one, there is no other). ``open_book.url``: the store's URL."""
    kind = request.param
    pg_url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    with backend(kind, tmp_path, pg_url) as make_store:
        first = make_store()
        books: list[PolicyBook] = []

        def opener() -> PolicyBook:
            book = policy_book_for(first if kind == "memory" else make_store())
            books.append(book)
            return book

        opener.kind = kind  # type: ignore[attr-defined]
        opener.url = (  # type: ignore[attr-defined]
            f"sqlite:///{tmp_path / 'store.db'}" if kind == "sqlite" else getattr(first, "url", "memory:")
        )
        try:
            yield opener
        finally:
            for book in {id(b): b for b in books}.values():
                book.close()


def grant(grant_id: str = "g1", *, kind: str = "session", tool: str = "refund", **fields: Any) -> Grant:
    scope: dict[str, Any] = {"kind": kind, "tool": tool}
    if kind in ("session", "agent"):
        scope["agent"] = fields.pop("agent", "support")
    if kind == "session":
        scope["session_id"] = fields.pop("session_id", "chat-42")
    scope["when"] = fields.pop("when", [])
    fields.setdefault("created_at", T0)
    return Grant(id=grant_id, scope=GrantScope(**scope), created_by="alice", **fields)


# -- policies: versions, stale writes, the audit --------------------------------------------------


def test_each_change_is_the_next_version_and_the_document_says_it(open_book):
    book = open_book()
    assert book.policy(AGENT).version == 0 and book.policy(AGENT).policy is None
    first = book.set_policy(AGENT, {**SMALL_REFUNDS, "version": 41}, by="alice", now=T0)
    assert (first.version, first.policy.version, first.changed_by, first.changed_at) == (1, 1, "alice", T0)
    second = book.set_policy(AGENT, {**SMALL_REFUNDS, **NO_HUGE_REFUNDS}, by="bob", now=T0 + timedelta(hours=1))
    assert second.version == 2
    assert open_book().policy(AGENT) == second
    assert second.digest == policy_digest(second.policy) and second.digest != first.digest
    assert book.policy(SESSION).version == 0  # scopes are counted apart


def test_a_stale_write_is_refused_and_changes_nothing(open_book):
    alice, bob = open_book(), open_book()
    alice.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
    read_by_alice, read_by_bob = alice.policy(AGENT).version, bob.policy(AGENT).version
    alice.set_policy(AGENT, NO_HUGE_REFUNDS, by="alice", now=T0 + timedelta(minutes=1), expected_version=read_by_alice)
    with pytest.raises(PolicyVersionConflictError) as refused:
        bob.set_policy(
            AGENT, {"approveAll": True}, by="bob", now=T0 + timedelta(minutes=2), expected_version=read_by_bob
        )
    error = refused.value
    assert (error.code, error.expected_version, error.actual_version) == ("POLICY_VERSION_CONFLICT", 1, 2)
    assert error.changed_by == "alice" and "agent 'support'" in str(error) and "read it again" in str(error)
    kept = bob.policy(AGENT)
    assert kept.version == 2 and not kept.policy.approve_all and kept.policy.deny[0].name == "huge-refunds"
    assert [c.to_version for c in bob.policy_changes(AGENT)] == [2, 1]
    with pytest.raises(PolicyVersionConflictError):  # "create it if nobody has": version 0
        bob.clear_policy(AGENT, by="bob", now=T0, expected_version=0)
    with pytest.raises(PolicyVersionConflictError):
        bob.set_policy(SESSION, SMALL_REFUNDS, by="bob", now=T0, expected_version=3)
    assert bob.set_policy(SESSION, SMALL_REFUNDS, by="bob", now=T0, expected_version=0).version == 1


def test_clearing_is_a_change_and_an_invalid_policy_none(open_book):
    book = open_book()
    book.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
    cleared = book.clear_policy(AGENT, by="bob", now=T0 + timedelta(minutes=1), expected_version=1)
    assert (cleared.version, cleared.policy, cleared.digest) == (2, None, None)
    assert book.policy(AGENT).policy is None and book.policy(AGENT).version == 2
    with pytest.raises(ConfigurationError, match="approveAll"):  # an allow-everything rule, not said by name
        book.set_policy(AGENT, {"allow": [{"name": "all", "tools": ["*"]}]}, by="eve", now=T0)
    with pytest.raises(ConfigurationError, match="allwo"):  # unknown fields are refused
        book.set_policy(AGENT, {"allwo": []}, by="eve", now=T0)
    assert book.set_policy(AGENT, NO_HUGE_REFUNDS, by="carol", now=T0 + timedelta(minutes=2)).version == 3
    assert [c.to_version for c in book.policy_changes(AGENT)] == [3, 2, 1]


def test_the_audit_says_who_when_and_what_changed_newest_first(open_book):
    book = open_book()
    book.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
    book.set_policy(SESSION, NO_HUGE_REFUNDS, by="bob", now=T0 + timedelta(minutes=1))
    book.set_policy(AGENT, NO_HUGE_REFUNDS, by="carol", now=T0 + timedelta(minutes=2))
    book.clear_policy(AGENT, by="dave", now=T0 + timedelta(minutes=3))
    changes = open_book().policy_changes(AGENT)
    assert [(c.changed_by, c.from_version, c.to_version) for c in changes] == [
        ("dave", 2, 3),
        ("carol", 1, 2),
        ("alice", 0, 1),
    ]
    cleared, replaced, created = changes
    assert cleared.cleared and cleared.new_policy is None and cleared.new_digest is None
    assert cleared.old_policy == replaced.new_policy and cleared.old_digest == replaced.new_digest
    assert replaced.old_policy.allow[0].name == "small-refunds" and replaced.new_policy.deny[0].name == "huge-refunds"
    assert replaced.new_policy.version == 2 and replaced.changed_at == T0 + timedelta(minutes=2)
    assert created.old_policy is None and created.old_digest is None
    every = book.policy_changes()
    assert [(c.scope.kind, c.changed_by) for c in every] == [
        ("agent", "dave"),
        ("agent", "carol"),
        ("session", "bob"),
        ("agent", "alice"),
    ]
    assert [c.changed_by for c in book.policy_changes(limit=2)] == ["dave", "carol"]
    assert json.loads(every[0].to_json())["scope"] == {"kind": "agent", "name": "support"}


# -- the effective policy -----------------------------------------------------------------------


def test_a_session_policy_replaces_the_agents_but_keeps_its_deny_rules():
    agent = ApprovalPolicy.model_validate({**NO_HUGE_REFUNDS, "approveAll": True, "version": 7})
    session = ApprovalPolicy.model_validate(
        {**SMALL_REFUNDS, "deny": [{"name": "huge-refunds", "tools": ["wire"]}], "version": 3}
    )
    assert effective_policy(agent, None) is agent
    assert effective_policy(None, session) is session
    merged = effective_policy(agent, session)
    assert merged is not None and merged.version == 3 and not merged.approve_all
    assert [r.name for r in merged.deny] == ["huge-refunds (agent policy)", "huge-refunds"]
    assert ApprovalPolicy.model_validate(merged.model_dump()) == merged  # still a valid policy

    def outcome(**arguments: Any) -> str:
        return decide(
            merged, [], PolicyCall(agent="support", session_id="chat-42", tool="refund", arguments=arguments), T0
        ).reason

    assert outcome(amount_cents=500_000).startswith("deny rule 'huge-refunds (agent policy)'")
    assert outcome(amount_cents=100).startswith("allow rule 'small-refunds'")
    assert outcome(amount_cents=50_000) == "no rule matched"  # the agent's approveAll is replaced


def test_decision_inputs_reads_the_effective_policy_and_the_grants_that_could_apply(open_book):
    book = open_book()
    book.set_policy(AGENT, NO_HUGE_REFUNDS, by="alice", now=T0)
    book.set_policy(AGENT, {**NO_HUGE_REFUNDS, "approveAll": True}, by="alice", now=T0)
    mine = [
        book.add_grant(grant("session-g")),
        book.add_grant(grant("agent-g", kind="agent")),
        book.add_grant(grant("tool-g", kind="tool")),
    ]
    book.add_grant(grant("other-session", session_id="chat-7"))
    book.add_grant(grant("other-agent", kind="agent", agent="sales"))
    book.add_grant(grant("other-tool", kind="agent", tool="wire"))
    book.add_grant(grant("expired", expires_at=T0 + timedelta(minutes=1)))
    now = T0 + timedelta(minutes=5)
    inputs = open_book().decision_inputs("support", "chat-42", now, tool="refund")
    assert (inputs.agent_policy_version, inputs.session_policy_version) == (2, 0)
    assert inputs.policy == book.policy(AGENT).policy
    assert sorted(g.id for g in inputs.grants) == sorted(g.id for g in mine)
    every_tool = book.decision_inputs("support", "chat-42", now)
    assert {g.id for g in every_tool.grants} == {"session-g", "agent-g", "tool-g", "other-tool"}

    book.set_policy(SESSION, SMALL_REFUNDS, by="bob", now=now)
    inputs = book.decision_inputs("support", "chat-42", now, tool="refund")
    assert (inputs.agent_policy_version, inputs.session_policy_version) == (2, 1)
    assert inputs.policy is not None and not inputs.policy.approve_all
    assert [r.name for r in inputs.policy.deny] == ["huge-refunds"]
    assert book.decision_inputs("support", "chat-7", now).policy == book.policy(AGENT).policy
    assert book.decision_inputs("sales", "chat-9", now).policy is None

    call = PolicyCall(agent="support", session_id="chat-42", tool="refund", arguments={"amount_cents": 9000})
    decision = decide(inputs.policy, inputs.grants, call, now)
    assert decision.layer == "grant" and decision.grant_id in {"session-g", "agent-g", "tool-g"}


# -- grants ---------------------------------------------------------------------------------


def test_grants_are_added_once_listed_and_refused_when_not_new(open_book):
    book = open_book()
    g = grant("g1", max_uses=3, note="refund desk")
    assert book.add_grant(g) == g
    assert book.add_grant(g.to_dict()) == g  # a retry adds nothing
    with pytest.raises(ConfigurationError, match="another grant is kept under the id 'g1'"):
        book.add_grant(grant("g1", max_uses=4))
    with pytest.raises(ConfigurationError, match="unused and not revoked"):
        book.add_grant(grant("g2", max_uses=3, uses=1))
    with pytest.raises(ConfigurationError, match="invalid grant"):
        book.add_grant({"id": "g3", "scope": {"kind": "session", "tool": "refund"}})
    assert open_book().get_grant("g1") == g and book.get_grant("nope") is None
    assert book.grant_uses("g1") == []


def test_grants_are_listed_by_what_they_apply_to(open_book):
    book = open_book()
    book.add_grant(grant("s", created_at=T0))
    book.add_grant(grant("a", kind="agent", created_at=T0 + timedelta(seconds=1)))
    book.add_grant(grant("t", kind="tool", tool="wire", created_at=T0 + timedelta(seconds=2)))
    book.add_grant(grant("x", kind="agent", agent="sales", created_at=T0 + timedelta(seconds=3)))
    book.add_grant(grant("e", kind="agent", created_at=T0 + timedelta(seconds=4), expires_at=T0 + timedelta(minutes=1)))
    assert [g.id for g in book.list_grants()] == ["e", "x", "t", "a", "s"]  # newest first
    assert [g.id for g in book.list_grants(agent="support")] == ["e", "t", "a", "s"]
    assert [g.id for g in book.list_grants(session_id="chat-7")] == ["e", "x", "t", "a"]
    assert [g.id for g in book.list_grants(tool="wire")] == ["t"]
    assert [g.id for g in book.list_grants(agent="support", live_at=T0 + timedelta(minutes=2))] == ["t", "a", "s"]
    book.revoke_grant("a", by="bob", now=T0 + timedelta(minutes=1))
    assert [g.id for g in book.list_grants(agent="support", live_at=T0 + timedelta(minutes=2))] == ["t", "s"]


def test_a_revoked_grant_stops_and_revoking_again_says_so(open_book):
    book = open_book()
    book.add_grant(grant())
    first = book.revoke_grant("g1", by="bob", now=T0 + timedelta(minutes=5))
    assert first.revoked and (first.grant.revoked_by, first.grant.revoked_at) == ("bob", T0 + timedelta(minutes=5))
    again = open_book().revoke_grant("g1", by="carol", now=T0 + timedelta(hours=1))
    assert not again.revoked and again.grant == first.grant  # the first revocation is kept
    assert book.use_grant("g1", "chat-42#7", T0 + timedelta(minutes=5)).refused == "revoked"
    assert book.use_grant("g1", "chat-42#8", T0 + timedelta(minutes=4)).approved  # before the revocation
    with pytest.raises(ConfigurationError, match="no grant 'nope'"):
        book.revoke_grant("nope", by="bob", now=T0)
    with pytest.raises(ConfigurationError, match="no grant 'nope'"):
        book.use_grant("nope", "chat-42#9", T0)


def test_a_grant_is_used_at_most_once_per_call_key(open_book):
    book, retry = open_book(), open_book()
    book.add_grant(grant("g1", max_uses=2))
    book.add_grant(grant("g2", kind="agent"))
    first = book.use_grant("g1", "chat-42#7", T0 + timedelta(seconds=1))
    assert (first.approved, first.use, first.repeated, first.used_at) == (True, 1, False, T0 + timedelta(seconds=1))
    again = retry.use_grant("g1", "chat-42#7", T0 + timedelta(hours=9))  # a retried activity, much later
    assert (again.approved, again.use, again.repeated, again.used_at) == (True, 1, True, T0 + timedelta(seconds=1))
    # a retry that picked another grant (the first looks used up now) gets the first answer
    other = retry.use_grant("g2", "chat-42#7", T0 + timedelta(hours=9))
    assert (other.grant_id, other.use, other.repeated) == ("g1", 1, True)
    assert book.get_grant("g2").uses == 0 and book.get_grant("g1").uses == 1
    assert book.use_grant("g1", "chat-42#9", T0).use == 2
    used_up = book.use_grant("g1", "chat-42#11", T0)
    assert (used_up.approved, used_up.refused, used_up.use) == (False, "used-up", None)
    assert book.get_grant("g1").uses == 2
    assert [(u.call_key, u.use) for u in book.grant_uses("g1")] == [("chat-42#9", 2), ("chat-42#7", 1)]


def test_take_use_answers_as_use_grant_does(open_book):
    """``take_use`` (the step of a call a grant approves) takes the same use ``use_grant``
    would, and answers only which grant approved: a retry gets the first grant's answer,
    a refusal is None and takes nothing."""
    book, retry = open_book(), open_book()
    book.add_grant(grant("g1", max_uses=1))
    book.add_grant(grant("g2", kind="agent"))
    assert book.take_use("g1", "chat-42#7", T0 + timedelta(seconds=1)) == "g1"
    assert retry.take_use("g2", "chat-42#7", T0 + timedelta(hours=9)) == "g1"  # a retry, another grant
    assert book.take_use("g1", "chat-42#9", T0) is None  # used up
    assert book.get_grant("g1").uses == 1 and book.get_grant("g2").uses == 0
    assert [(u.call_key, u.use) for u in book.grant_uses("g1")] == [("chat-42#7", 1)]
    assert book.take_use("g2", "chat-42#9", T0) == "g2"
    assert (book.get_grant("g2").uses, book.use_grant("g2", "chat-42#9", T0).repeated) == (1, True)
    with pytest.raises(ConfigurationError, match="no grant 'nope'"):
        book.take_use("nope", "chat-42#10", T0)


def test_a_book_locked_by_another_process_is_a_retryable_error_and_then_works(tmp_path):
    """A grant's use that cannot get the book's write lock (another process holds it past the
    wait) fails as a store outage (retryable), rolls nothing in, and leaves this handle
    working once the lock is gone."""
    book = SqlitePolicyBook(tmp_path / "book.db")
    book.add_grant(grant("g1"))
    book._db._db.execute("PRAGMA busy_timeout = 50")  # (the handle waits 30 s; the test does not)
    holder = sqlite3.connect(tmp_path / "book.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailableError, match="locked"):
        book.take_use("g1", "chat-42#7", T0)
    with pytest.raises(StoreUnavailableError, match="locked"):
        book.use_grant("g1", "chat-42#7", T0)
    holder.execute("ROLLBACK")
    holder.close()
    assert book.take_use("g1", "chat-42#7", T0) == "g1"
    assert book.get_grant("g1").uses == 1


def test_expiry_is_judged_by_the_time_given(open_book):
    book = open_book()
    book.add_grant(grant(created_at=T0, expires_at=T0 + timedelta(minutes=10)))
    assert book.use_grant("g1", "k-before", T0 - timedelta(seconds=1)).refused == "not-yet-valid"
    assert book.use_grant("g1", "k-in-time", T0 + timedelta(minutes=9, seconds=59, microseconds=999999)).approved
    late = book.use_grant("g1", "k-late", T0 + timedelta(minutes=10))  # expiry is exclusive, to the microsecond
    assert (late.approved, late.refused) == (False, "expired")
    assert [g.id for g in book.decision_inputs("support", "chat-42", T0 + timedelta(minutes=9)).grants] == ["g1"]
    assert book.decision_inputs("support", "chat-42", T0 + timedelta(minutes=10)).grants == []
    with pytest.raises(ValueError, match="timezone-aware"):
        book.use_grant("g1", "k-naive", datetime(2026, 12, 3, 9, 5))


def test_decision_inputs_see_every_change_at_once_and_time_going_forward(open_book):
    """A book may keep what it read for a call (a SQLite book does, while nothing is written to
    it): the next call still sees every change, by this handle or another process's, and each
    grant judged at its own time."""
    book, other = open_book(), open_book()
    book.set_policy(AGENT, NO_HUGE_REFUNDS, by="alice", now=T0)
    book.add_grant(grant("g1", expires_at=T0 + timedelta(minutes=10)))

    def ids(minutes: int) -> list[str]:
        now = T0 + timedelta(minutes=minutes)
        return [g.id for g in book.decision_inputs("support", "chat-42", now, tool="refund").grants]

    assert ids(1) == ["g1"]
    other.revoke_grant("g1", by="bob", now=T0 + timedelta(minutes=2))  # another process's change
    assert ids(1) == ["g1"] and ids(3) == []
    other.add_grant(grant("g2", kind="agent", max_uses=1))
    assert ids(3) == ["g2"]
    book.use_grant("g2", "chat-42#5", T0 + timedelta(minutes=3))  # this handle's change: its last use
    assert ids(3) == []
    book.add_grant(grant("later", created_at=T0 + timedelta(minutes=20)))  # made "in the future"
    assert ids(4) == [] and ids(20) == ["later"]
    book.add_grant(grant("short", expires_at=T0 + timedelta(minutes=30), created_at=T0 + timedelta(minutes=20)))
    assert ids(25) == ["later", "short"]
    other.add_grant(grant("unrelated", kind="agent", agent="sales"))
    assert ids(30) == ["later"]  # read at 30: "short" had expired
    assert ids(21) == ["later", "short"]  # an earlier time than the last read: judged at it
    other.set_policy(AGENT, SMALL_REFUNDS, by="carol", now=T0 + timedelta(minutes=31))
    inputs = book.decision_inputs("support", "chat-42", T0 + timedelta(minutes=31), tool="refund")
    assert inputs.agent_policy_version == 2 and inputs.policy is not None and inputs.policy.allow


def test_a_sqlite_book_reads_a_calls_inputs_once_while_nothing_changes(tmp_path):
    book = policy_book_for(SqliteStore(tmp_path / "store.db"))
    book.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
    book.add_grant(grant("g1", kind="agent"))
    statements: list[str] = []
    book._db._db.set_trace_callback(statements.append)
    for minute in range(1, 6):
        book.decision_inputs("support", "chat-42", T0 + timedelta(minutes=minute), tool="refund")
        book.use_grant("g1", f"chat-42#{minute}", T0 + timedelta(minutes=minute))  # no maxUses: stays live
    reads = [s for s in statements if "FROM da_policies" in s]
    assert len(reads) == 1, reads
    assert book.get_grant("g1").uses == 5


def test_the_stored_judgement_is_grant_is_live():
    moments = [T0 - timedelta(seconds=1), T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=10)]
    for expires in (None, T0 + timedelta(minutes=10)):
        for revoked in (None, T0 + timedelta(minutes=5)):
            for uses, max_uses in ((0, None), (1, 2), (2, 2)):
                g = grant(expires_at=expires, max_uses=max_uses, uses=uses, revoked_at=revoked)
                for now in moments:
                    micros = [None if t is None else (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
                              for t in (T0, expires, revoked, now)]  # fmt: skip
                    refused = _refusal(uses, max_uses, micros[0], micros[1], micros[2], micros[3])
                    assert (refused is None) == grant_is_live(g, now), (g, now, refused)


def test_pruning_forgets_grants_that_stopped_before(open_book):
    book = open_book()
    book.add_grant(grant("expired", expires_at=T0 + timedelta(minutes=1)))
    book.add_grant(grant("revoked"))
    book.add_grant(grant("used-up", max_uses=1))
    book.add_grant(grant("live", max_uses=5))
    book.revoke_grant("revoked", by="bob", now=T0 + timedelta(minutes=2))
    book.use_grant("used-up", "k1", T0 + timedelta(minutes=3))
    book.use_grant("live", "k2", T0 + timedelta(minutes=3))
    assert book.prune_grants(T0 + timedelta(minutes=2, seconds=30)) == 2
    assert sorted(g.id for g in book.list_grants()) == ["live", "used-up"]
    assert book.prune_grants(T0 + timedelta(days=1)) == 1
    assert [g.id for g in book.list_grants()] == ["live"] and book.grant_uses("used-up") == []


# -- where each store keeps its book --------------------------------------------------------------


def test_each_store_has_its_book_beside_it(tmp_path):
    with contextlib.ExitStack() as stack:
        store = SqliteStore(tmp_path / "store.db")
        stack.callback(store.close)
        book = policy_book_for(store)
        stack.callback(book.close)
        assert isinstance(book, SqlitePolicyBook) and book.path == store.path + BOOK_SUFFIX
        assert book.shared == "every process using this SQLite file"
        assert (Path(book.path).stat().st_mode & 0o777) == 0o600

        files = [FileStore(tmp_path / "files"), FileStore(tmp_path / "files")]
        books = [policy_book_for(f) for f in files]
        for b in books:
            stack.callback(b.close)
        assert books[0].location == str(tmp_path / "files" / FILE_STORE_BOOK)
        books[0].set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
        assert books[1].policy(AGENT).version == 1  # one book for every handle on the folder

        memory = MemoryStore()
        assert policy_book_for(memory) is policy_book_for(memory)  # one per store object
        assert policy_book_for(MemoryStore()) is not policy_book_for(memory)
        assert isinstance(policy_book_for(memory), MemoryPolicyBook)
        with pytest.raises(ConfigurationError, match="no policy book beside"):
            policy_book_for(object())
        with pytest.raises(ConfigurationError, match="MemoryPolicyBook"):
            SqlitePolicyBook(":memory:")


def test_an_encrypted_store_seals_its_grants_not_its_policies(tmp_path):
    keys = EncryptionKeys.parse(new_key("k1"))
    store = EncryptedStore(SqliteStore(tmp_path / "store.db"), keys)
    book = policy_book_for(store)
    secret = "refund-for-jane.doe@example.com"
    g = grant(when=[{"arg": "reason", "op": "==", "value": secret}], note=secret)
    try:
        book.add_grant(g)
        book.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
        assert book.get_grant("g1") == g and book.add_grant(g) == g
        assert [x.id for x in book.decision_inputs("support", "chat-42", T0).grants] == ["g1"]
        raw = (tmp_path / f"store.db{BOOK_SUFFIX}").read_bytes() + (
            tmp_path / f"store.db{BOOK_SUFFIX}-wal"
        ).read_bytes()
        assert secret.encode() not in raw and b"small-refunds" in raw  # policies are configuration
        plain = SqlitePolicyBook(tmp_path / f"store.db{BOOK_SUFFIX}")
        with pytest.raises(ConfigurationError, match="encrypted"):
            plain.get_grant("g1")
        plain.close()
    finally:
        book.close()
        store.close()


# -- real processes ---------------------------------------------------------------------------

RACER = """
import json, os, sys, time
from datetime import datetime, timedelta
from durable_agents.checkpoint import open_store
from durable_agents.checkpoint.policy_book import policy_book_for

url, grant_id, keys, now = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), datetime.fromisoformat(sys.argv[4])
book = policy_book_for(open_store(url))
warm = book.use_grant(grant_id, f"warm-up-{os.getpid()}", now - timedelta(days=1))  # the whole path, nothing taken
assert warm.refused == "not-yet-valid"
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    pass
answers = []
for key in keys:
    answers.append(book.use_grant(grant_id, key, now).to_dict())
    time.sleep(0.0002)  # (SQLite's busy wait favours the process holding the lock: let the other in)
print(json.dumps(answers), flush=True)
"""

READER = """
import json, sys
from datetime import datetime
from durable_agents.checkpoint import open_store
from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for

book = policy_book_for(open_store(sys.argv[1]))
now = datetime.fromisoformat(sys.argv[2])
print(json.dumps({
    "policy": book.policy(PolicyScope.of_agent("support")).to_dict(),
    "changes": [c.to_dict() for c in book.policy_changes()],
    "grants": [g.to_dict() for g in book.list_grants()],
    "uses": [u.to_dict() for u in book.grant_uses("g1")],
    "inputs": book.decision_inputs("support", "chat-42", now).to_dict(),
}))
"""


def _race(url: str, grant_id: str, key_lists: list[list[str]]) -> list[list[dict[str, Any]]]:
    """Each key list used by a process of its own, all let go at once."""
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, url, grant_id, json.dumps(keys), T0.isoformat()],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for keys in key_lists
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        start = time.time() + 0.3  # all let go at one moment, each spinning until then
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write(f"{start}\n")
            racer.stdin.flush()
        answers = []
        for racer in racers:
            out, _ = racer.communicate(timeout=120)
            assert racer.returncode == 0
            answers.append(json.loads(out))
        return answers
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()


def _processes_share_it(open_book: BookOpener) -> None:
    if open_book.kind == "memory":  # type: ignore[attr-defined]
        pytest.skip("a memory book lives in one process")


def test_two_processes_racing_for_the_last_uses_never_exceed_max_uses(open_book):
    _processes_share_it(open_book)
    book = open_book()
    book.add_grant(grant("g1", max_uses=101))
    book.use_grant("g1", "before", T0)
    keys = [[f"a{i}" for i in range(100)], [f"b{i}" for i in range(100)]]
    answers = _race(open_book.url, "g1", keys)  # type: ignore[attr-defined]
    approved = [a for mine in answers for a in mine if a["approved"]]
    assert len(approved) == 100 and book.get_grant("g1").uses == 101
    assert sorted(a["use"] for a in approved) == list(range(2, 102))  # each use given once
    assert all(a["refused"] == "used-up" for mine in answers for a in mine if not a["approved"])
    assert all(any(a["approved"] for a in mine) for mine in answers), "the processes raced: each took some"
    assert len(book.grant_uses("g1")) == 101


def test_two_processes_using_the_same_call_keys_take_each_once(open_book):
    _processes_share_it(open_book)
    book = open_book()
    book.add_grant(grant("g1", max_uses=100))
    keys = [f"chat-42#{i}" for i in range(60)]
    first, second = _race(open_book.url, "g1", [keys, list(reversed(keys))])  # type: ignore[attr-defined]
    assert book.get_grant("g1").uses == 60
    by_key = {a["callKey"]: a["use"] for a in first}
    assert {a["callKey"]: a["use"] for a in second} == by_key  # the same answer in both
    assert sorted(by_key.values()) == list(range(1, 61))
    assert all(a["approved"] for a in first + second)
    assert sum(not a["repeated"] for a in first + second) == 60
    assert all(any(not a["repeated"] for a in mine) for mine in (first, second)), "the processes raced"


def test_a_new_process_sees_everything(open_book):
    _processes_share_it(open_book)
    book = open_book()
    book.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
    book.set_policy(AGENT, NO_HUGE_REFUNDS, by="bob", now=T0 + timedelta(minutes=1), expected_version=1)
    book.add_grant(grant("g1", max_uses=3, expires_at=T0 + timedelta(hours=1)))
    book.add_grant(grant("g2", kind="tool"))
    book.use_grant("g1", "chat-42#3", T0 + timedelta(minutes=2))
    book.revoke_grant("g2", by="carol", now=T0 + timedelta(minutes=3))
    now = T0 + timedelta(minutes=4)
    out = subprocess.run(
        [sys.executable, "-c", READER, open_book.url, now.isoformat()],  # type: ignore[attr-defined]
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    seen = json.loads(out)
    assert seen["policy"] == book.policy(AGENT).to_dict()
    assert seen["changes"] == [c.to_dict() for c in book.policy_changes()]
    assert seen["grants"] == [g.to_dict() for g in book.list_grants()]
    assert seen["grants"][0]["revokedBy"] == "carol" and seen["grants"][1]["uses"] == 1
    assert seen["uses"] == [u.to_dict() for u in book.grant_uses("g1")]
    assert seen["inputs"] == book.decision_inputs("support", "chat-42", now).to_dict()
    assert [g["id"] for g in seen["inputs"]["grants"]] == ["g1"]


def test_the_postgres_tables_are_made_once_by_processes_starting_together(postgres_url):
    from tests.checkpoint.conftest import fresh_schema

    with fresh_schema(postgres_url) as url:
        opener = "import sys; from durable_agents.checkpoint.policy_book import PostgresPolicyBook; PostgresPolicyBook(sys.argv[1]).close()"
        starts = [subprocess.Popen([sys.executable, "-c", opener, url], cwd=ROOT) for _ in range(4)]
        assert [p.wait(timeout=120) for p in starts] == [0, 0, 0, 0]
        book = PostgresPolicyBook(url)
        assert book.policy(AGENT).version == 0
        book.close()


def test_the_sqlite_book_is_a_file_of_its_own(tmp_path):
    store = SqliteStore(tmp_path / "store.db")
    book = policy_book_for(store)
    try:
        book.set_policy(AGENT, SMALL_REFUNDS, by="alice", now=T0)
        with sqlite3.connect(tmp_path / "store.db") as db:  # the store's own file holds none of it
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not {t for t in tables if t.startswith("da_")}
    finally:
        book.close()
        store.close()
