"""The policy book: where a fleet's approval policies and grants are kept, beside its
checkpoint store, so every worker, client, CLI and web process that uses the store sees
the same ones.

What it keeps:

- **Policies**, one per agent and one per session (:class:`PolicyScope`). Each scope has a
  version that every change bumps by one (a first policy is version 1; clearing one is a
  change too). A writer may say which version it read (``expected_version``): when another
  writer changed the scope since, the write is refused with
  :class:`~durable_agents.checkpoint.errors.PolicyVersionConflictError` and nothing
  changes. Every change is audited (:class:`PolicyChange`: who, when, old → new version,
  both documents and their digests), newest first.
- **Grants** (``approval_grants``): added, listed, revoked, and *used* atomically:
  :meth:`PolicyBook.use_grant` consumes one use of a grant for one gated call, at most once
  per ``call_key`` (a retried activity gets the first answer and consumes nothing more),
  and never beyond ``maxUses``, whichever process asks.

A session's policy does not simply replace its agent's (:func:`effective_policy`): the
deny rules of both apply, and the session's allow rules, ``approveAll`` and auto mode
replace the agent's. A session policy can so widen what is approved in its session but
never lift a deny rule an operator set for the agent.

:meth:`PolicyBook.decision_inputs` reads what ``approval_decision.decide`` needs for one
gated call in one statement: the effective policy and the live grants that could cover it.

Three books, all one class over a small database adapter: :class:`MemoryPolicyBook` (this
process), :class:`SqlitePolicyBook` (every process on the host using one SQLite file) and
:class:`PostgresPolicyBook` (every worker on one PostgreSQL database).
:func:`policy_book_for` picks the one that lives beside a checkpoint store. This module
imports neither Temporal nor an LLM SDK; time is always passed in (``now``, timezone-aware).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import AwareDatetime, Field

from durable_agents.checkpoint.approval_grants import Grant, grant_is_live
from durable_agents.checkpoint.approval_policy import ApprovalPolicy, PolicyModel, parse_policy
from durable_agents.checkpoint.errors import (
    ConfigurationError,
    PolicyVersionConflictError,
    StoreCorruptError,
    StoreUnavailableError,
)
from durable_agents.checkpoint.stores.sqlite import (
    CHECKPOINT_EVERY,
    FALLBACK_AUTOCHECKPOINT,
    checkpoint_thread,
    passive_checkpoints,
)

if TYPE_CHECKING:
    from durable_agents.checkpoint.encryption import EncryptionKeys

__all__ = [
    "BOOK_SUFFIX",
    "FILE_STORE_BOOK",
    "DecisionInputs",
    "GrantRefusal",
    "GrantRevocation",
    "GrantUse",
    "MemoryPolicyBook",
    "PolicyBook",
    "PolicyChange",
    "PolicyScope",
    "PostgresPolicyBook",
    "SqlitePolicyBook",
    "StoredPolicy",
    "effective_policy",
    "policy_book_for",
    "policy_digest",
]

BOOK_SUFFIX = "-policies"
"""The policy book of a SQLite store at ``store.db`` is the SQLite file ``store.db-policies``."""
FILE_STORE_BOOK = "policies.db"
"""The policy book of a file store is this SQLite file in the store's folder."""

PolicyScopeKind = Literal["agent", "session"]
GrantRefusal = Literal["expired", "revoked", "used-up", "not-yet-valid"]
"""Why a grant approved nothing at ``now``: past ``expiresAt``, revoked by then, every use
taken, or made after ``now``."""


# -- the records ------------------------------------------------------------------------------


class PolicyScope(PolicyModel):
    """Whose policy: an agent's (every session of it) or one session's."""

    kind: PolicyScopeKind
    name: str = Field(min_length=1)
    """The agent's name, or the session's id."""

    @classmethod
    def of_agent(cls, agent: str) -> PolicyScope:
        return cls(kind="agent", name=agent)

    @classmethod
    def of_session(cls, session_id: str) -> PolicyScope:
        return cls(kind="session", name=session_id)

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"


class StoredPolicy(PolicyModel):
    """What a scope holds now: its version (0: never set) and its policy (None: none set,
    or cleared), with who changed it last and when."""

    scope: PolicyScope
    version: int = Field(default=0, ge=0)
    policy: ApprovalPolicy | None = None
    digest: str | None = None
    """:func:`policy_digest` of ``policy``."""
    changed_by: str | None = None
    changed_at: AwareDatetime | None = None


class PolicyChange(PolicyModel):
    """One change of a scope's policy, as the audit keeps it."""

    scope: PolicyScope
    from_version: int
    to_version: int
    changed_by: str
    changed_at: AwareDatetime
    old_policy: ApprovalPolicy | None = None
    new_policy: ApprovalPolicy | None = None
    """None: the change cleared the policy."""
    old_digest: str | None = None
    new_digest: str | None = None

    @property
    def cleared(self) -> bool:
        return self.new_policy is None


class GrantUse(PolicyModel):
    """The answer to :meth:`PolicyBook.use_grant`: whether a grant approved the call with
    ``call_key``, and which use of it that was."""

    call_key: str
    grant_id: str
    """The grant that approved the call. A call key that used a grant before keeps that
    grant's answer, even when another grant is asked about now."""
    approved: bool
    use: int | None = None
    """Which use of the grant approved the call (1 is the first)."""
    used_at: AwareDatetime | None = None
    refused: GrantRefusal | None = None
    repeated: bool = False
    """The call key had used a grant already: this is that answer, nothing was consumed now."""


class GrantRevocation(PolicyModel):
    """The answer to :meth:`PolicyBook.revoke_grant`."""

    grant: Grant
    revoked: bool
    """False: the grant was revoked already (its first revocation is kept), nothing changed."""


class DecisionInputs(PolicyModel):
    """What ``approval_decision.decide`` needs for one gated call, read at once."""

    policy: ApprovalPolicy | None
    """The effective policy (:func:`effective_policy`); its ``version`` is the session
    policy's when there is one, else the agent's."""
    grants: list[Grant]
    """The grants live at ``now`` that could cover the call (its session's, its agent's,
    every agent's), oldest first."""
    agent_policy_version: int = 0
    """The agent policy's version (0: never set); what a decision records beside the session's."""
    session_policy_version: int = 0


def policy_digest(policy: ApprovalPolicy | None) -> str | None:
    """``sha256:<hex>`` of the policy's document as canonical JSON, its ``version`` left out
    (the same rules set again have the same digest); None for no policy."""
    if policy is None:
        return None
    document = policy.model_dump(mode="json", by_alias=True, exclude={"version"})
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def effective_policy(
    agent_policy: ApprovalPolicy | None, session_policy: ApprovalPolicy | None
) -> ApprovalPolicy | None:
    """The policy a session's gated calls are decided under.

    No session policy: the agent's. A session policy: the session's, with the agent
    policy's deny rules first in its deny layer (so they cannot be lifted for one session).
    An agent deny rule whose name the session policy uses too is cited as
    ``<name> (agent policy)``. Its ``version`` is the session policy's."""
    if session_policy is None:
        return agent_policy
    if agent_policy is None or not agent_policy.deny:
        return session_policy
    taken = {rule.name for rule in (*session_policy.deny, *session_policy.allow)}
    taken |= {criteria.name for criteria in (session_policy.auto.criteria if session_policy.auto else [])}
    inherited = []
    for rule in agent_policy.deny:
        name, n = rule.name, 1
        while name in taken:
            suffix = " (agent policy)" if n == 1 else f" (agent policy {n})"
            name, n = rule.name[: 200 - len(suffix)] + suffix, n + 1
        taken.add(name)
        inherited.append(rule if name == rule.name else rule.model_copy(update={"name": name}))
    return session_policy.model_copy(update={"deny": [*inherited, *session_policy.deny]})


# -- the database under a book ------------------------------------------------------------------


class _Database(Protocol):
    """A connection the book runs its SQL on (``?`` placeholders), one thread at a time."""

    shared: str
    location: str
    lock_row: str
    """What makes a SELECT lock the rows it reads until the transaction ends (PostgreSQL's
    ``FOR UPDATE``; empty where a write transaction holds the whole database)."""

    def write(self) -> Any:  # a context manager yielding a cursor: one serialized transaction
        ...

    def read(self) -> Any:  # a context manager yielding a cursor: single statements
        ...

    def version(self) -> tuple[int, int] | None:
        """Changes when anything is written to the book, by any connection (None: not known)."""
        ...

    def quiet(self) -> None:
        """The open write transaction changes no call's decision inputs (``version`` stays)."""
        ...

    def close(self) -> None: ...


def _schema(auto_id: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE IF NOT EXISTS da_policies (scope_kind TEXT NOT NULL, scope_name TEXT NOT NULL, "
        "version BIGINT NOT NULL, body TEXT, digest TEXT, changed_by TEXT, changed_at BIGINT, "
        "PRIMARY KEY (scope_kind, scope_name))",
        f"CREATE TABLE IF NOT EXISTS da_policy_changes (id {auto_id}, scope_kind TEXT NOT NULL, "
        "scope_name TEXT NOT NULL, from_version BIGINT NOT NULL, to_version BIGINT NOT NULL, "
        "changed_by TEXT NOT NULL, changed_at BIGINT NOT NULL, old_digest TEXT, new_digest TEXT, "
        "old_body TEXT, new_body TEXT, UNIQUE (scope_kind, scope_name, to_version))",
        "CREATE TABLE IF NOT EXISTS da_grants (id TEXT PRIMARY KEY, kind TEXT NOT NULL, tool TEXT NOT NULL, "
        "agent TEXT, session_id TEXT, created_at BIGINT NOT NULL, expires_at BIGINT, max_uses BIGINT, "
        "uses BIGINT NOT NULL DEFAULT 0, revoked_at BIGINT, revoked_by TEXT, body TEXT NOT NULL, "
        "CHECK (max_uses IS NULL OR uses <= max_uses))",
        "CREATE INDEX IF NOT EXISTS da_grants_scope ON da_grants (kind, agent, session_id, tool)",
        "CREATE INDEX IF NOT EXISTS da_grants_tool ON da_grants (tool)",
        "CREATE TABLE IF NOT EXISTS da_grant_uses (call_key TEXT PRIMARY KEY, grant_id TEXT NOT NULL, "
        "use_number BIGINT NOT NULL, used_at BIGINT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS da_grant_uses_grant ON da_grant_uses (grant_id, use_number)",
    )


class _SqliteDatabase:
    """A SQLite connection: a file (shared by the processes that open it) or ``:memory:``.
    A write is one ``BEGIN IMMEDIATE`` transaction, so writers of every process take turns."""

    lock_row = ""

    def __init__(self, path: str) -> None:
        self.location = "memory:" if path == ":memory:" else str(Path(path).absolute())
        self.shared = "this process" if path == ":memory:" else "every process using this SQLite file"
        self._lock = threading.Lock()
        self.writes = 0
        """This connection's write transactions that may change a call's decision inputs
        (SQLite's ``data_version`` counts the other connections')."""
        self._changes = 1
        self._file = None if path == ":memory:" else self.location
        self._commits = 0
        self._catch_up = False
        self._checkpointing = False
        try:
            if path != ":memory:":
                _create_private_file(Path(path))
            # timeout: how long a writer waits for another process's transaction (they are short)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
            if path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")  # the store's: a commit survives a process crash
                # as the store's: the WAL is copied into the file by a background thread, not by a
                # commit on the worker's event loop (a grant's use is a write); commits only past this
                self._db.execute(f"PRAGMA wal_autocheckpoint={FALLBACK_AUTOCHECKPOINT}")
            with self.write() as cur:
                for statement in _schema("INTEGER PRIMARY KEY AUTOINCREMENT"):
                    cur.execute(statement)
        except sqlite3.Error as e:
            raise StoreCorruptError(
                f"policy book {self.location} cannot be opened ({e}): move it aside to start an empty one, "
                "or restore a backup"
            ) from e

    def write(self) -> _SqliteWrite:
        return _SqliteWrite(self)

    def quiet(self) -> None:
        self._changes = 0

    def _committed(self) -> None:
        """After a commit: every ``CHECKPOINT_EVERY`` commits a background checkpoint (the
        store's thread), and the commit after one copies what was written meanwhile."""
        self._commits += 1
        if self._catch_up:
            self._catch_up = False
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        elif self._commits % CHECKPOINT_EVERY == 0 and not self._checkpointing:
            self._checkpointing = True
            try:
                checkpoint_thread().submit(self._checkpoint)
            except RuntimeError:  # the interpreter is shutting down: commits checkpoint past the fallback
                self._checkpointing = False

    def _checkpoint(self) -> None:
        try:
            assert self._file is not None
            passive_checkpoints(self._file)
            self._catch_up = True
        except sqlite3.Error:  # best effort: the next one, or a commit past the fallback
            pass
        finally:
            self._checkpointing = False

    def version(self) -> tuple[int, int] | None:
        with self._lock:
            try:
                return self._db.execute("PRAGMA data_version").fetchone()[0], self.writes
            except sqlite3.OperationalError as e:
                raise self.typed(e) from e

    @contextmanager
    def read(self) -> Iterator[sqlite3.Cursor]:
        with self._lock, self._typed():
            yield self._db.cursor()

    @contextmanager
    def _typed(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as e:
            raise self.typed(e) from e

    def typed(self, error: sqlite3.OperationalError) -> StoreUnavailableError | StoreCorruptError:
        """The typed error for SQLite's ``error``: a lock or a busy file is an outage."""
        if "locked" in str(error) or "busy" in str(error):
            return StoreUnavailableError(f"policy book {self.location}: {error}")
        return StoreCorruptError(f"policy book {self.location}: {error}")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _SqliteWrite:
    """One write transaction of a :class:`_SqliteDatabase` (``BEGIN IMMEDIATE`` … ``COMMIT``,
    rolled back on an exception), under its lock; SQLite's errors typed. A class rather than
    a generator: a grant's use is one of these in the step of every call a grant approves."""

    __slots__ = ("_database",)

    def __init__(self, database: _SqliteDatabase) -> None:
        self._database = database

    def __enter__(self) -> sqlite3.Cursor:
        database = self._database
        database._lock.acquire()
        try:
            database._db.execute("BEGIN IMMEDIATE")
        except BaseException as e:
            database._lock.release()
            if isinstance(e, sqlite3.OperationalError):
                raise database.typed(e) from e
            raise
        database._changes = 1
        return database._db.cursor()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        database = self._database
        try:
            if error is not None:
                database._db.execute("ROLLBACK")
            else:
                database._db.execute("COMMIT")
                database.writes += database._changes
                if database._file is not None:
                    database._committed()
        except sqlite3.OperationalError as e:
            raise database.typed(e) from e
        finally:
            database._lock.release()
        if isinstance(error, sqlite3.OperationalError):
            raise database.typed(error) from error


def _create_private_file(path: Path) -> None:
    """Like the store's files, the book is readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        path.touch(mode=0o600)


class _PostgresDatabase:
    """A PostgreSQL connection (autocommit; a write is one transaction, its rows locked with
    ``FOR UPDATE``). The tables are created on first use, under an advisory lock so that
    two processes starting at once do not race to create them."""

    shared = "every worker on this database"
    lock_row = " FOR UPDATE"
    _SCHEMA_LOCK = 0x6461_706F_6C69_6379  # "dapolicy"

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        try:
            import psycopg
        except ImportError as e:
            raise ConfigurationError(
                "a PostgreSQL policy book needs psycopg: pip install 'durable-agents[postgres]'"
            ) from e
        self._psycopg = psycopg
        self.url = url
        self.location = "postgresql database"
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._conn: Any = None
        with self.write() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._SCHEMA_LOCK,))
            for statement in _schema("BIGSERIAL PRIMARY KEY"):
                cur.execute(statement)

    def _connect(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        return self._conn

    @contextmanager
    def write(self) -> Iterator[Any]:
        with self._lock, self._typed():
            conn = self._connect()
            with conn.transaction(), conn.cursor() as cur:
                yield _PostgresCursor(cur)

    @contextmanager
    def read(self) -> Iterator[Any]:
        with self._lock, self._typed(), self._connect().cursor() as cur:
            yield _PostgresCursor(cur)

    def version(self) -> tuple[int, int] | None:
        return None  # (every gated call reads the book)

    def quiet(self) -> None:
        pass

    @contextmanager
    def _typed(self) -> Iterator[None]:
        try:
            yield
        except self._psycopg.OperationalError as e:
            self._conn = None
            raise StoreUnavailableError(f"policy book: PostgreSQL failed: {e}") from e

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()


class _PostgresCursor:
    """psycopg's cursor taking the book's ``?`` placeholders (its SQL has no other ``?``)."""

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self._cur.execute(sql.replace("?", "%s"), params)

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)


# -- sealing grants in an encrypted store ---------------------------------------------------------


class _Sealer(Protocol):
    def seal(self, text: str) -> str: ...
    def open(self, text: str, what: str) -> str: ...


class _KeysSealer:
    """Grant bodies sealed as the encrypted store seals its values (the same keys and format)."""

    def __init__(self, keys: EncryptionKeys) -> None:
        from durable_agents.checkpoint.stores.encrypted import SEALED_PREFIX

        self.keys, self.prefix = keys, SEALED_PREFIX

    def seal(self, text: str) -> str:
        key_id, sealed = self.keys.seal_deterministic(text.encode())
        return f"{self.prefix}{key_id}:{base64.urlsafe_b64encode(sealed).decode()}"

    def open(self, text: str, what: str) -> str:
        if not text.startswith(self.prefix):
            return text  # written before encryption was turned on
        key_id, _, data = text[len(self.prefix) :].partition(":")
        return self.keys.open_deterministic(key_id, base64.urlsafe_b64decode(data), what).decode()


class _Plain:
    _SEALED = "durable-agents-sealed:"

    def seal(self, text: str) -> str:
        return text

    def open(self, text: str, what: str) -> str:
        if text.startswith(self._SEALED):
            raise ConfigurationError(
                f"{what} is encrypted: open the policy book through the encrypted store "
                "(policy_book_for(EncryptedStore(...))) with the store's keys"
            )
        return text


# -- time --------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def _micros(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (times compare as integers in SQL)."""
    if moment.tzinfo is None:
        raise ValueError("the policy book needs timezone-aware times (e.g. datetime.now(UTC), workflow.now())")
    return (moment - _EPOCH) // _MICRO


def _moment(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + timedelta(microseconds=micros)


# -- the book ----------------------------------------------------------------------------------

_LIVE = (
    "created_at <= ? AND (expires_at IS NULL OR expires_at > ?) AND (max_uses IS NULL OR uses < max_uses) "
    "AND (revoked_at IS NULL OR revoked_at > ?)"
)
_GRANT_COLUMNS = "id, uses, revoked_at, revoked_by, body"
_NOT_ENDED = "(expires_at IS NULL OR expires_at > ?) AND (max_uses IS NULL OR uses < max_uses) AND (revoked_at IS NULL OR revoked_at > ?)"
_CACHE_LIMIT = 4096


class PolicyBook:
    """The book of approval policies and grants (see the module's docstring). Every method
    is synchronous and thread-safe; activities call it off the event loop."""

    def __init__(self, database: _Database, *, sealer: _Sealer | None = None) -> None:
        self._db = database
        self._sealer: _Sealer = sealer if sealer is not None else _Plain()
        self._policies: dict[tuple[str, int], ApprovalPolicy] = {}
        self._effective: dict[tuple[str | None, int, str | None, int], ApprovalPolicy | None] = {}
        self._grants: dict[str, tuple[str, Grant]] = {}
        self._inputs: dict[tuple[str, str, str | None], tuple[tuple[int, int], datetime, DecisionInputs]] = {}
        """What ``decision_inputs`` read last per (agent, session, tool), with the book's version
        and the time it was read for."""

    @property
    def shared(self) -> str:
        """Who shares it, for humans: ``this process``, ``every process using this SQLite file`` …"""
        return self._db.shared

    @property
    def location(self) -> str:
        return self._db.location

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def close(self) -> None:
        self._db.close()

    # -- policies ------------------------------------------------------------------------------

    def policy(self, scope: PolicyScope) -> StoredPolicy:
        """What ``scope`` holds now (version 0 and no policy when it was never set)."""
        with self._db.read() as cur:
            cur.execute(
                "SELECT version, body, digest, changed_by, changed_at FROM da_policies "
                "WHERE scope_kind = ? AND scope_name = ?",
                (scope.kind, scope.name),
            )
            row = cur.fetchone()
        if row is None:
            return StoredPolicy(scope=scope)
        version, body, digest, changed_by, changed_at = row
        return StoredPolicy(
            scope=scope,
            version=int(version),
            policy=self._parsed(body, digest, int(version)),
            digest=digest,
            changed_by=changed_by,
            changed_at=_moment(changed_at),
        )

    def set_policy(
        self,
        scope: PolicyScope,
        policy: ApprovalPolicy | str | bytes | Mapping[str, Any],
        *,
        by: str,
        now: datetime,
        expected_version: int | None = None,
    ) -> StoredPolicy:
        """Make ``policy`` (validated: ``parse_policy``) the scope's, as its next version; the
        ``version`` in the document given is replaced by the book's.

        ``expected_version``: the version the writer read (0: none was ever set); when the
        scope is at another one, :class:`PolicyVersionConflictError` and nothing changes.
        None: write whatever the scope holds."""
        parsed = policy if isinstance(policy, ApprovalPolicy) else parse_policy(policy)
        return self._change(scope, parsed, by=by, now=now, expected_version=expected_version)

    def clear_policy(
        self, scope: PolicyScope, *, by: str, now: datetime, expected_version: int | None = None
    ) -> StoredPolicy:
        """Remove the scope's policy (a change like any other: audited, next version)."""
        return self._change(scope, None, by=by, now=now, expected_version=expected_version)

    def _change(
        self, scope: PolicyScope, policy: ApprovalPolicy | None, *, by: str, now: datetime, expected_version: int | None
    ) -> StoredPolicy:
        if not by:
            raise ConfigurationError("a policy change names who makes it (by=...)")
        at = _micros(now)
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO da_policies (scope_kind, scope_name, version) VALUES (?, ?, 0) ON CONFLICT DO NOTHING",
                (scope.kind, scope.name),
            )
            cur.execute(
                "SELECT version, body, digest, changed_by, changed_at FROM da_policies "
                f"WHERE scope_kind = ? AND scope_name = ?{self._db.lock_row}",
                (scope.kind, scope.name),
            )
            version, old_body, old_digest, last_by, last_at = cur.fetchone()
            version = int(version)
            if expected_version is not None and expected_version != version:
                raise PolicyVersionConflictError(
                    str(scope), expected_version, version, changed_by=last_by, changed_at=_moment(last_at)
                )
            stored = policy.model_copy(update={"version": version + 1}) if policy is not None else None
            body = stored.to_json() if stored is not None else None
            digest = policy_digest(stored)
            cur.execute(
                "UPDATE da_policies SET version = ?, body = ?, digest = ?, changed_by = ?, changed_at = ? "
                "WHERE scope_kind = ? AND scope_name = ?",
                (version + 1, body, digest, by, at, scope.kind, scope.name),
            )
            cur.execute(
                "INSERT INTO da_policy_changes (scope_kind, scope_name, from_version, to_version, changed_by, "
                "changed_at, old_digest, new_digest, old_body, new_body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (scope.kind, scope.name, version, version + 1, by, at, old_digest, digest, old_body, body),
            )
        return StoredPolicy(
            scope=scope, version=version + 1, policy=stored, digest=digest, changed_by=by, changed_at=_moment(at)
        )

    def policy_changes(self, scope: PolicyScope | None = None, *, limit: int | None = None) -> list[PolicyChange]:
        """The audit of policy changes, newest first: of ``scope``, or of every scope."""
        params: tuple[str, ...]
        where, params = "", ()
        if scope is not None:
            where, params = " WHERE scope_kind = ? AND scope_name = ?", (scope.kind, scope.name)
        sql = (
            "SELECT scope_kind, scope_name, from_version, to_version, changed_by, changed_at, old_digest, "
            f"new_digest, old_body, new_body FROM da_policy_changes{where} ORDER BY id DESC"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._db.read() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
        return [
            PolicyChange(
                scope=PolicyScope(kind=kind, name=name),
                from_version=int(old),
                to_version=int(new),
                changed_by=by,
                changed_at=_moment(at),
                old_policy=self._parsed(old_body, old_digest, int(old)),
                new_policy=self._parsed(new_body, new_digest, int(new)),
                old_digest=old_digest,
                new_digest=new_digest,
            )
            for kind, name, old, new, by, at, old_digest, new_digest, old_body, new_body in rows
        ]

    def _parsed(self, body: str | None, digest: str | None, version: int) -> ApprovalPolicy | None:
        """The policy stored as ``body`` (parsed once per process: a gated call reads it each time)."""
        if body is None:
            return None
        key = (digest or body, version)
        policy = self._policies.get(key)
        if policy is None:
            try:
                policy = ApprovalPolicy.model_validate_json(body)
            except ValueError as e:
                raise StoreCorruptError(f"policy book {self.location}: a stored policy cannot be read: {e}") from e
            if len(self._policies) >= _CACHE_LIMIT:
                self._policies.clear()
            self._policies[key] = policy
        return policy

    # -- grants --------------------------------------------------------------------------------

    def add_grant(self, grant: Grant | Mapping[str, Any]) -> Grant:
        """Keep a new grant (validated; unused and not revoked). Adding the same grant again
        (a retry) changes nothing; another grant under a kept grant's id is refused."""
        try:
            grant = grant if isinstance(grant, Grant) else Grant.model_validate(grant)
        except ValueError as e:
            raise ConfigurationError(f"invalid grant: {e}") from None
        if grant.uses or grant.revoked_at is not None or grant.revoked_by is not None:
            raise ConfigurationError(
                f"grant {grant.id!r} is added unused and not revoked (uses and revocations are the book's to record)"
            )
        scope = grant.scope
        body = grant.to_json()
        with self._db.write() as cur:
            cur.execute(
                "INSERT INTO da_grants (id, kind, tool, agent, session_id, created_at, expires_at, max_uses, uses, "
                "body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT DO NOTHING",
                (
                    grant.id,
                    scope.kind,
                    scope.tool,
                    scope.agent,
                    scope.session_id,
                    _micros(grant.created_at),
                    _micros(grant.expires_at) if grant.expires_at is not None else None,
                    grant.max_uses,
                    self._sealer.seal(body),
                ),
            )
            if cur.rowcount == 1:
                return grant
            cur.execute(f"SELECT {_GRANT_COLUMNS} FROM da_grants WHERE id = ?", (grant.id,))
            kept = self._grant(cur.fetchone())
        if self._base(kept) != grant:
            raise ConfigurationError(f"another grant is kept under the id {grant.id!r}: give this one a new id")
        return kept

    def get_grant(self, grant_id: str) -> Grant | None:
        with self._db.read() as cur:
            cur.execute(f"SELECT {_GRANT_COLUMNS} FROM da_grants WHERE id = ?", (grant_id,))
            row = cur.fetchone()
        return None if row is None else self._grant(row)

    def list_grants(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        tool: str | None = None,
        live_at: datetime | None = None,
    ) -> list[Grant]:
        """The grants that apply to calls of ``agent`` / in ``session_id`` / of ``tool``
        (each filter left out: any), newest first. An ``agent`` filter keeps that agent's
        grants and every agent's (``tool`` grants); a ``session_id`` filter keeps that
        session's and those of no one session. ``live_at``: only the grants live then."""
        where: list[str] = ["1 = 1"]
        params: list[str | int] = []
        if agent is not None:
            where.append("(agent IS NULL OR agent = ?)")
            params.append(agent)
        if session_id is not None:
            where.append("(session_id IS NULL OR session_id = ?)")
            params.append(session_id)
        if tool is not None:
            where.append("tool = ?")
            params.append(tool)
        if live_at is not None:
            at = _micros(live_at)
            where.append(_LIVE)
            params += [at, at, at]
        with self._db.read() as cur:
            cur.execute(
                f"SELECT {_GRANT_COLUMNS} FROM da_grants WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC",
                tuple(params),
            )
            rows = cur.fetchall()
        return [self._grant(row) for row in rows]

    def revoke_grant(self, grant_id: str, *, by: str, now: datetime) -> GrantRevocation:
        """Revoke a grant from ``now`` on: it approves no call after. A grant revoked already
        keeps its first revocation (``revoked`` False says so)."""
        if not by:
            raise ConfigurationError("a revocation names who makes it (by=...)")
        with self._db.write() as cur:
            cur.execute(
                "UPDATE da_grants SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL",
                (_micros(now), by, grant_id),
            )
            revoked = cur.rowcount == 1
            cur.execute(f"SELECT {_GRANT_COLUMNS} FROM da_grants WHERE id = ?", (grant_id,))
            row = cur.fetchone()
        if row is None:
            raise ConfigurationError(f"no grant {grant_id!r} in the policy book ({self.location})")
        return GrantRevocation(grant=self._grant(row), revoked=revoked)

    def use_grant(self, grant_id: str, call_key: str, now: datetime) -> GrantUse:
        """Let the grant approve the gated call ``call_key`` (its session and transcript
        position, or its idempotency key): one use, taken at most once per call key.

        Refused (nothing taken) when the grant is expired, revoked, used up or not yet made
        at ``now``. A call key that used a grant before gets that answer again (``repeated``),
        whichever grant is asked about and whatever ``now``: a retried activity takes nothing
        more. Serialized across processes (one write transaction: SQLite's ``BEGIN
        IMMEDIATE``, PostgreSQL's row lock on the grant), so ``maxUses`` is never exceeded."""
        used = self._use(grant_id, call_key, now)
        return GrantUse(
            call_key=call_key,
            grant_id=used[0],
            approved=used[1],
            use=used[2],
            used_at=used[3],
            refused=used[4],
            repeated=used[5],
        )

    def take_use(self, grant_id: str, call_key: str, now: datetime) -> str | None:
        """:meth:`use_grant`, answering only which grant approved the call (the one asked
        about, or the one the call key used before); None: refused, nothing taken. For the
        step of every call a grant approves: no record of the answer is built."""
        used = self._use(grant_id, call_key, now)
        return used[0] if used[1] else None

    def _use(
        self, grant_id: str, call_key: str, now: datetime
    ) -> tuple[str, bool, int | None, datetime | None, GrantRefusal | None, bool]:
        """:meth:`use_grant`'s answer as (grant id, approved, use, used at, refused, repeated)."""
        at = _micros(now)
        for _ in range(3):  # (PostgreSQL: another grant took this call key meanwhile; then it is answered)
            with self._db.write() as cur:
                cur.execute(
                    f"SELECT uses, max_uses, created_at, expires_at, revoked_at FROM da_grants WHERE id = ?"
                    f"{self._db.lock_row}",
                    (grant_id,),
                )
                row = cur.fetchone()
                if row is None:
                    raise ConfigurationError(f"no grant {grant_id!r} in the policy book ({self.location})")
                cur.execute("SELECT grant_id, use_number, used_at FROM da_grant_uses WHERE call_key = ?", (call_key,))
                used = cur.fetchone()
                if used is not None:
                    self._db.quiet()  # (nothing written)
                    return used[0], True, int(used[1]), _moment(used[2]), None, True
                uses, max_uses, created_at, expires_at, revoked_at = row
                refused = _refusal(int(uses), max_uses, created_at, expires_at, revoked_at, at)
                if refused is not None:
                    self._db.quiet()
                    return grant_id, False, None, None, refused, False
                if max_uses is None:  # its uses count, but it stays live whatever their number
                    self._db.quiet()
                cur.execute(
                    "INSERT INTO da_grant_uses (call_key, grant_id, use_number, used_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (call_key, grant_id, int(uses) + 1, at),
                )
                if cur.rowcount != 1:
                    continue  # (the transaction ends with nothing written)
                cur.execute(
                    "UPDATE da_grants SET uses = uses + 1 WHERE id = ? AND (max_uses IS NULL OR uses < max_uses)",
                    (grant_id,),
                )
                if cur.rowcount != 1:  # the row is locked: cannot happen; never take a use beyond maxUses
                    raise StoreCorruptError(f"policy book {self.location}: grant {grant_id!r} changed under its lock")
                return grant_id, True, int(uses) + 1, now, None, False
        raise StoreUnavailableError(f"policy book {self.location}: call key {call_key!r} kept being taken; try again")

    def grant_uses(self, grant_id: str) -> list[GrantUse]:
        """Every use of the grant: which call it approved and when, newest first."""
        with self._db.read() as cur:
            cur.execute(
                "SELECT call_key, use_number, used_at FROM da_grant_uses WHERE grant_id = ? ORDER BY use_number DESC",
                (grant_id,),
            )
            rows = cur.fetchall()
        return [
            GrantUse(call_key=key, grant_id=grant_id, approved=True, use=int(n), used_at=_moment(at))
            for key, n, at in rows
        ]

    def prune_grants(self, before: datetime) -> int:
        """Forget the grants that stopped approving anything before ``before`` (expired or
        revoked then, or used up by a last use then) and their uses; how many."""
        at = _micros(before)
        with self._db.write() as cur:
            cur.execute(
                "SELECT id FROM da_grants WHERE expires_at <= ? OR revoked_at <= ? OR (uses >= max_uses AND "
                "(SELECT MAX(used_at) FROM da_grant_uses WHERE grant_id = da_grants.id) <= ?)",
                (at, at, at),
            )
            ids = [row[0] for row in cur.fetchall()]
            for grant_id in ids:
                cur.execute("DELETE FROM da_grant_uses WHERE grant_id = ?", (grant_id,))
                cur.execute("DELETE FROM da_grants WHERE id = ?", (grant_id,))
        for grant_id in ids:
            self._grants.pop(grant_id, None)
        return len(ids)

    def _grant(self, row: tuple[Any, ...]) -> Grant:
        grant_id, uses, revoked_at, revoked_by, body = row
        cached = self._grants.get(grant_id)
        if cached is not None and cached[0] == body:
            base = cached[1]
        else:
            try:
                base = Grant.model_validate_json(self._sealer.open(body, f"grant {grant_id!r}"))
            except ValueError as e:
                raise StoreCorruptError(f"policy book {self.location}: grant {grant_id!r} cannot be read: {e}") from e
            if len(self._grants) >= _CACHE_LIMIT:
                self._grants.clear()
            self._grants[grant_id] = (body, base)
        if not uses and revoked_at is None:
            return base
        return base.model_copy(update={"uses": int(uses), "revoked_at": _moment(revoked_at), "revoked_by": revoked_by})

    @staticmethod
    def _base(grant: Grant) -> Grant:
        return grant.model_copy(update={"uses": 0, "revoked_at": None, "revoked_by": None})

    # -- one gated call ------------------------------------------------------------------------

    def decision_inputs(self, agent: str, session_id: str, now: datetime, *, tool: str | None = None) -> DecisionInputs:
        """The effective policy of ``agent`` in ``session_id`` and the grants live at ``now``
        that could cover its calls (of ``tool`` only, when given), read in one statement
        (one snapshot of the book). Runs once per gated call: parsed policies and grants
        are kept per process, so a call costs the read. A SQLite book is not read again for
        the same agent, session and tool while nothing was written to it (SQLite's
        ``data_version`` for other connections, this one's writes but a use of a grant
        without ``maxUses``) and time goes forward: its grants are judged again at ``now``."""
        key = (agent, session_id, tool)
        version = self._db.version()
        kept = self._inputs.get(key) if version is not None else None
        if kept is None or kept[0] != version or now < kept[1]:
            inputs = self._decision_inputs(agent, session_id, now, tool)
            if version is not None:
                if len(self._inputs) >= _CACHE_LIMIT:
                    self._inputs.clear()
                self._inputs[key] = (version, now, inputs)
        else:
            inputs = kept[2]
        if all(grant_is_live(g, now) for g in inputs.grants):
            return inputs
        return inputs.model_copy(update={"grants": [g for g in inputs.grants if grant_is_live(g, now)]})

    def _decision_inputs(self, agent: str, session_id: str, now: datetime, tool: str | None) -> DecisionInputs:
        """The policies, and the grants not ended at ``now`` (expired, used up, revoked) that
        could cover the call: also those made later than ``now`` (``decision_inputs`` judges
        them at its ``now``)."""
        at = _micros(now)
        by_tool, tool_params = (" AND tool = ?", (tool,)) if tool is not None else ("", ())
        grants_of = f"UNION ALL SELECT 'grant', {_GRANT_COLUMNS} FROM da_grants WHERE {{}}{by_tool} AND {_NOT_ENDED} "
        sql = (  # each grant kind a search of the scope index: other sessions' grants are not read
            "SELECT 'policy', scope_kind, version, NULL, digest, body FROM da_policies "
            "WHERE (scope_kind = 'agent' AND scope_name = ?) OR (scope_kind = 'session' AND scope_name = ?) "
            + grants_of.format("kind = 'session' AND agent = ? AND session_id = ?")
            + grants_of.format("kind = 'agent' AND agent = ? AND session_id IS NULL")
            + grants_of.format("kind = 'tool' AND agent IS NULL AND session_id IS NULL")
        )
        live = (*tool_params, at, at)
        with self._db.read() as cur:
            cur.execute(sql, (agent, session_id, agent, session_id, *live, agent, *live, *live))
            rows = cur.fetchall()
        found: dict[str, tuple[int, str | None, str | None]] = {}
        grants = []
        for what, *row in rows:
            if what == "policy":
                kind, version, _, digest, body = row
                found[kind] = (int(version), digest, body)
            else:
                grants.append(self._grant(tuple(row)))
        agent_version, agent_digest, agent_body = found.get("agent", (0, None, None))
        session_version, session_digest, session_body = found.get("session", (0, None, None))
        key = (agent_digest, agent_version, session_digest, session_version)
        if key in self._effective:
            policy = self._effective[key]
        else:
            policy = effective_policy(
                self._parsed(agent_body, agent_digest, agent_version),
                self._parsed(session_body, session_digest, session_version),
            )
            if len(self._effective) >= _CACHE_LIMIT:
                self._effective.clear()
            self._effective[key] = policy
        grants.sort(key=lambda g: (g.created_at, g.id))
        return DecisionInputs.model_construct(
            policy=policy,
            grants=grants,
            agent_policy_version=agent_version,
            session_policy_version=session_version,
        )


def _refusal(
    uses: int, max_uses: int | None, created_at: int, expires_at: int | None, revoked_at: int | None, at: int
) -> GrantRefusal | None:
    """Why a grant with these columns approves nothing at ``at`` (None: it is live): the
    judgement of ``approval_grants.grant_is_live`` (and of ``_LIVE``), on the stored integers."""
    if revoked_at is not None and at >= revoked_at:
        return "revoked"
    if expires_at is not None and at >= expires_at:
        return "expired"
    if max_uses is not None and uses >= max_uses:
        return "used-up"
    if at < created_at:
        return "not-yet-valid"
    return None


class MemoryPolicyBook(PolicyBook):
    """A book in this process only (tests; a worker with a memory store)."""

    def __init__(self) -> None:
        super().__init__(_SqliteDatabase(":memory:"))


class SqlitePolicyBook(PolicyBook):
    """A book in a SQLite file, shared by every process on the host that opens it."""

    def __init__(self, path: str | Path, *, keys: EncryptionKeys | None = None) -> None:
        if str(path) == ":memory:":
            raise ConfigurationError("a SQLite policy book needs a file, not ':memory:': use MemoryPolicyBook")
        super().__init__(_SqliteDatabase(str(path)), sealer=_KeysSealer(keys) if keys is not None else None)
        self.path = str(path)


class PostgresPolicyBook(PolicyBook):
    """A book in a PostgreSQL database (the store's), shared by every worker that uses it."""

    def __init__(self, url: str, *, connect_timeout: int = 10, keys: EncryptionKeys | None = None) -> None:
        super().__init__(
            _PostgresDatabase(url, connect_timeout=connect_timeout),
            sealer=_KeysSealer(keys) if keys is not None else None,
        )


_MEMORY_BOOKS: weakref.WeakKeyDictionary[object, PolicyBook] = weakref.WeakKeyDictionary()
_MEMORY_LOCK = threading.Lock()


def policy_book_for(store: object) -> PolicyBook:
    """The book that lives beside ``store``:

    - ``SqliteStore`` at ``store.db``: the SQLite file ``store.db-policies`` beside it;
    - ``FileStore``: the SQLite file ``policies.db`` in its folder;
    - ``PostgresStore``: its database (tables ``da_policies``, ``da_policy_changes``,
      ``da_grants``, ``da_grant_uses``, created on first use);
    - ``MemoryStore`` (or a SQLite store in memory): one book per store object, in this process;
    - ``EncryptedStore``: its inner store's, with grant bodies sealed by its keys.

    A store of another kind is refused (:class:`ConfigurationError`): a book kept in one
    process would let other processes decide with other policies."""
    from durable_agents.checkpoint.stores.encrypted import EncryptedStore
    from durable_agents.checkpoint.stores.file import FileStore
    from durable_agents.checkpoint.stores.postgres import PostgresStore
    from durable_agents.checkpoint.stores.sqlite import SqliteStore

    keys = None
    while isinstance(store, EncryptedStore):
        keys, store = store.keys, store.inner
    if isinstance(store, PostgresStore):
        return PostgresPolicyBook(store.url, connect_timeout=max(int(store.connect_timeout), 1), keys=keys)
    if isinstance(store, SqliteStore) and store.durable and store.path != ":memory:":
        # a file of its own: a grant's use never waits behind a checkpoint commit, nor one behind it
        return SqlitePolicyBook(store.path + BOOK_SUFFIX, keys=keys)
    if isinstance(store, FileStore):
        return SqlitePolicyBook(store.directory / FILE_STORE_BOOK, keys=keys)
    if isinstance(store, SqliteStore):
        with _MEMORY_LOCK:
            book = _MEMORY_BOOKS.get(store)
            if book is None:
                book = _MEMORY_BOOKS[store] = MemoryPolicyBook()
            return book
    raise ConfigurationError(
        f"no policy book beside {store!r}: open one yourself (SqlitePolicyBook(path), "
        "PostgresPolicyBook(url)) and pass it where a book is asked for"
    )
