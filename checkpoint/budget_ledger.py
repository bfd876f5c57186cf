"""The shared ledger of provider rate-limit budgets: what a worker fleet has spent of each
model's per-minute limits, in the same database as its checkpoint store.

A budget is a set of limits per window (``Limits``: requests, input tokens, output tokens,
and optionally input + output tokens together, as OpenAI counts them). Every model call
reserves what it will spend (``reserve``) before it is sent; the reservation counts in the
window until ``window`` seconds after it was made, with its estimate replaced by what the
provider reports once the call is done (``settle``). So a reservation is also a lease: a
holder killed before it settles leaves its estimate in the ledger for one window at most,
never longer (the provider counts a request it received in that window too).

A 429 or an overload with ``retry-after`` pauses the budget for everyone (``pause``); the call
that got it is served first when the pause ends (for :data:`PRIORITY_GRACE_SECONDS`, unless
it comes back sooner). The providers' rate-limit headers calibrate what is left
(``calibrate``): when a provider says less is left than the ledger thinks (another client
on the account, an estimate that was low), the difference is booked for as long as the
provider takes to win it back (at most until its reset time); the ledger never believes a
provider that says more is left than it has booked.

Three ledgers: :class:`MemoryLedger` (one process), :class:`SqliteLedger` (every process on
one host using one SQLite store file; the ledger is a file of its own beside it) and :class:`PostgresLedger` (every worker using one
PostgreSQL store). :func:`ledger_for` picks the one that matches a checkpoint store. This
module imports neither Temporal nor an LLM SDK; time is always passed in (``now``: seconds
since the epoch), so the decisions are pure functions of the rows (:func:`decide`).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from durable_agents.checkpoint.errors import ConfigurationError, StoreUnavailableError

__all__ = [
    "Amounts",
    "BudgetLedger",
    "Denial",
    "Grant",
    "Limits",
    "MemoryLedger",
    "PostgresLedger",
    "SqliteLedger",
    "decide",
    "ledger_for",
]

BUDGETS_SUFFIX = "-budgets"
"""The SQLite ledger of a store at ``store.db`` is ``store.db-budgets``, beside it."""
SEND_MARGIN = 0.02
"""A reservation counts for its window and this share of it more (1.2 s of a minute): the
provider counts the request when it arrives, a moment after it was booked."""
PRIORITY_GRACE_SECONDS = 5.0
"""After a pause, the call that got the 429 is served first for this long (if it comes back)."""

Dimension = Literal["requests", "input_tokens", "output_tokens", "tokens"]
DIMENSIONS: tuple[Dimension, ...] = ("requests", "input_tokens", "output_tokens", "tokens")
_SAID = {"requests": "requests", "input_tokens": "input tokens", "output_tokens": "output tokens", "tokens": "tokens"}


@dataclass(frozen=True)
class Amounts:
    """What a call spends (or is estimated to): one request, its input and output tokens."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def of(self, dimension: Dimension) -> int:
        if dimension == "tokens":
            return self.input_tokens + self.output_tokens
        value: int = getattr(self, dimension)
        return value


@dataclass(frozen=True)
class Limits:
    """A budget's limits per ``window`` seconds; None: that dimension is not limited."""

    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens: int | None = None
    window: float = 60.0

    def of(self, dimension: Dimension) -> int | None:
        value: int | None = getattr(self, dimension)
        return value


@dataclass(frozen=True)
class Grant:
    reservation_id: str


@dataclass(frozen=True)
class Denial:
    wait_seconds: float
    """How long until the call could fit (as the ledger stands now; others may take it first)."""
    reason: str
    """What it waits for: ``input tokens``, ``requests``, ``a pause after a 429`` …"""
    never: bool = False
    """The call alone is over a limit: it can never fit (the limit or the request is wrong)."""
    first: str | None = None
    """The holder that must go first (the call that got the 429), when that is what it waits for."""


@dataclass
class Pause:
    until: float
    holder: str | None
    """The call that got the 429 (served first until ``until + PRIORITY_GRACE_SECONDS``); None: served."""


@dataclass(frozen=True)
class Row:
    expires_at: float
    amounts: Amounts


def decide(
    rows: Iterable[Row], pause: Pause | None, limits: Limits, amounts: Amounts, holder: str, now: float
) -> Denial | None:
    """Whether ``amounts`` fit now beside the live ``rows`` (None: they fit), else how long
    until they would (the earliest time enough rows expire) and what they wait for."""
    if pause is not None:
        if now < pause.until:
            return Denial(pause.until - now, "a pause after a 429 or overload")
        if pause.holder not in (None, holder) and now < pause.until + PRIORITY_GRACE_SECONDS:
            return Denial(0.25, "the call that got the 429 to go first", first=pause.holder)
    live = sorted((r for r in rows if r.expires_at > now), key=lambda r: r.expires_at)
    wait, reason = 0.0, ""
    for dimension in DIMENSIONS:
        limit = limits.of(dimension)
        need = amounts.of(dimension)
        if limit is None or need == 0:
            continue
        if need > limit:
            return Denial(
                math.inf, f"{need} {_SAID[dimension]} in one call, over the limit of {limit} a window", never=True
            )
        used = sum(r.amounts.of(dimension) for r in live)
        if used + need <= limit:
            continue
        for row in live:  # the earliest time enough of the window has expired
            used -= row.amounts.of(dimension)
            if used + need <= limit:
                if row.expires_at - now > wait:
                    wait, reason = row.expires_at - now, _SAID[dimension]
                break
    return Denial(wait, reason) if wait > 0 else None


def booked_for_calibration(
    rows: Iterable[Row], limits: Limits, remaining: Mapping[Dimension, int], now: float
) -> list[Row]:
    """What to book so the ledger leaves no more than the provider says is left: per dimension
    the difference, for as long as the provider takes to win it back at its limit's rate
    (providers refill continuously: a token bucket), so a deficit is never counted twice."""
    live = [r for r in rows if r.expires_at > now]
    booked = []
    for dimension, left in remaining.items():
        limit = limits.of(dimension)
        if limit is None:
            continue
        ours = limit - sum(r.amounts.of(dimension) for r in live)
        if left < ours:
            extra = ours - left  # (input and output together: booked as input)
            field = "input_tokens" if dimension == "tokens" else dimension
            booked.append(Row(now + extra * limits.window / limit, Amounts(**{field: extra})))
    return booked


class BudgetLedger(Protocol):
    """Where a fleet's budgets are booked. Every method is synchronous and thread-safe (the
    limiter calls them off the event loop); ``now`` is seconds since the epoch."""

    shared: str
    """Who shares it, for humans: ``this process``, ``processes on this host``, ``every worker``."""

    def reserve(self, key: str, limits: Limits, amounts: Amounts, holder: str, now: float) -> Grant | Denial: ...
    def settle(self, reservation_id: str, amounts: Amounts) -> None: ...
    def release(self, reservation_id: str) -> None: ...
    def pause(self, key: str, until: float, holder: str | None) -> None: ...
    def calibrate(
        self, key: str, limits: Limits, remaining: Mapping[Dimension, int], reset_at: float, now: float
    ) -> None: ...
    def usage(self, key: str, now: float) -> Amounts:
        """What is booked at ``now`` (any time: a look changes nothing)."""
        ...

    def close(self) -> None: ...


def _sum(rows: Iterable[Row], now: float) -> Amounts:
    live = [r.amounts for r in rows if r.expires_at > now]
    return Amounts(sum(a.requests for a in live), sum(a.input_tokens for a in live), sum(a.output_tokens for a in live))


@dataclass
class _Reservation:
    key: str
    row: Row


@dataclass
class MemoryLedger:
    """A ledger in this process only (a worker with a memory or file store, tests)."""

    shared: str = "this process"
    _rows: dict[str, _Reservation] = field(default_factory=dict)
    _pauses: dict[str, Pause] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _of(self, key: str, now: float) -> list[Row]:
        for rid in [rid for rid, r in self._rows.items() if r.row.expires_at <= now]:
            del self._rows[rid]
        return [r.row for r in self._rows.values() if r.key == key]

    def reserve(self, key: str, limits: Limits, amounts: Amounts, holder: str, now: float) -> Grant | Denial:
        with self._lock:
            pause = self._pauses.get(key)
            denial = decide(self._of(key, now), pause, limits, amounts, holder, now)
            if denial is not None:
                return denial
            if pause is not None and (pause.holder == holder or now >= pause.until + PRIORITY_GRACE_SECONDS):
                del self._pauses[key]
            rid = uuid.uuid4().hex
            self._rows[rid] = _Reservation(key, Row(now + limits.window * (1 + SEND_MARGIN), amounts))
            return Grant(rid)

    def settle(self, reservation_id: str, amounts: Amounts) -> None:
        with self._lock:
            held = self._rows.get(reservation_id)
            if held is not None:
                held.row = Row(held.row.expires_at, amounts)

    def release(self, reservation_id: str) -> None:
        with self._lock:
            self._rows.pop(reservation_id, None)

    def pause(self, key: str, until: float, holder: str | None) -> None:
        with self._lock:
            current = self._pauses.get(key)
            if current is None or until > current.until:
                self._pauses[key] = Pause(until, holder if current is None else current.holder or holder)

    def calibrate(
        self, key: str, limits: Limits, remaining: Mapping[Dimension, int], reset_at: float, now: float
    ) -> None:
        with self._lock:
            if reset_at > now:
                for row in booked_for_calibration(self._of(key, now), limits, remaining, now):
                    self._rows[uuid.uuid4().hex] = _Reservation(key, Row(min(reset_at, row.expires_at), row.amounts))

    def usage(self, key: str, now: float) -> Amounts:
        with self._lock:
            return _sum([r.row for r in self._rows.values() if r.key == key], now)

    def close(self) -> None:
        pass


class _SqlLedger:
    """The SQL ledger: two tables beside the store's own (``da_budget_rows``,
    ``da_budget_pauses``), and one lock row per budget (``da_budget_keys``), so that
    the read-decide-write of a reservation is one serialized transaction per budget."""

    shared = "every worker on this database"
    _param = "?"

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS da_budget_keys (budget_key TEXT PRIMARY KEY)",
        "CREATE TABLE IF NOT EXISTS da_budget_rows (id TEXT PRIMARY KEY, budget_key TEXT NOT NULL, "
        "requests BIGINT NOT NULL, input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL, "
        "expires_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS da_budget_rows_key ON da_budget_rows (budget_key, expires_at)",
        "CREATE TABLE IF NOT EXISTS da_budget_pauses (budget_key TEXT PRIMARY KEY, "
        "until DOUBLE PRECISION NOT NULL, holder TEXT)",
    )

    def _sql(self, text: str) -> str:
        return text.replace("?", self._param)

    def _transaction(self, key: str | None) -> Any:  # a context manager yielding a cursor-like object
        raise NotImplementedError

    def _rows(self, cur: Any, key: str, now: float, purge: bool = True) -> list[Row]:
        if purge:  # (a look at another time than now, as usage() may take, changes nothing)
            cur.execute(self._sql("DELETE FROM da_budget_rows WHERE budget_key = ? AND expires_at <= ?"), (key, now))
        cur.execute(
            self._sql(
                "SELECT expires_at, requests, input_tokens, output_tokens FROM da_budget_rows WHERE budget_key = ?"
            ),
            (key,),
        )
        return [Row(float(e), Amounts(int(r), int(i), int(o))) for e, r, i, o in cur.fetchall()]

    def _insert(self, cur: Any, key: str, expires_at: float, amounts: Amounts) -> str:
        rid = uuid.uuid4().hex
        cur.execute(
            self._sql("INSERT INTO da_budget_rows VALUES (?, ?, ?, ?, ?, ?)"),
            (rid, key, amounts.requests, amounts.input_tokens, amounts.output_tokens, expires_at),
        )
        return rid

    def reserve(self, key: str, limits: Limits, amounts: Amounts, holder: str, now: float) -> Grant | Denial:
        with self._transaction(key) as cur:
            cur.execute(self._sql("SELECT until, holder FROM da_budget_pauses WHERE budget_key = ?"), (key,))
            found = cur.fetchone()
            pause = Pause(float(found[0]), found[1]) if found else None
            denial = decide(self._rows(cur, key, now), pause, limits, amounts, holder, now)
            if denial is not None:
                return denial
            if pause is not None and (pause.holder == holder or now >= pause.until + PRIORITY_GRACE_SECONDS):
                cur.execute(self._sql("DELETE FROM da_budget_pauses WHERE budget_key = ?"), (key,))
            return Grant(self._insert(cur, key, now + limits.window * (1 + SEND_MARGIN), amounts))

    def settle(self, reservation_id: str, amounts: Amounts) -> None:
        with self._transaction(None) as cur:
            cur.execute(
                self._sql("UPDATE da_budget_rows SET requests = ?, input_tokens = ?, output_tokens = ? WHERE id = ?"),
                (amounts.requests, amounts.input_tokens, amounts.output_tokens, reservation_id),
            )

    def release(self, reservation_id: str) -> None:
        with self._transaction(None) as cur:
            cur.execute(self._sql("DELETE FROM da_budget_rows WHERE id = ?"), (reservation_id,))

    def pause(self, key: str, until: float, holder: str | None) -> None:
        with self._transaction(key) as cur:
            cur.execute(self._sql("SELECT until, holder FROM da_budget_pauses WHERE budget_key = ?"), (key,))
            found = cur.fetchone()
            if found is None:
                cur.execute(self._sql("INSERT INTO da_budget_pauses VALUES (?, ?, ?)"), (key, until, holder))
            elif until > float(found[0]):
                cur.execute(
                    self._sql("UPDATE da_budget_pauses SET until = ?, holder = ? WHERE budget_key = ?"),
                    (until, found[1] or holder, key),
                )

    def calibrate(
        self, key: str, limits: Limits, remaining: Mapping[Dimension, int], reset_at: float, now: float
    ) -> None:
        if reset_at <= now:
            return
        with self._transaction(key) as cur:
            for row in booked_for_calibration(self._rows(cur, key, now), limits, remaining, now):
                self._insert(cur, key, min(reset_at, row.expires_at), row.amounts)

    def usage(self, key: str, now: float) -> Amounts:
        with self._transaction(key) as cur:
            return _sum(self._rows(cur, key, now, purge=False), now)


class _SqliteCursor:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._cur = db.cursor()

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self._cur.execute(sql, params)

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()


class SqliteLedger(_SqlLedger):
    """The ledger in a SQLite file (the store's): shared by every process on the host that
    opens it. Each reservation is one ``BEGIN IMMEDIATE`` transaction."""

    shared = "every process using this SQLite file"

    def __init__(self, path: str) -> None:
        if path == ":memory:":
            raise ConfigurationError("a budget ledger needs a SQLite file, not ':memory:': use MemoryLedger")
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        for statement in self._SCHEMA:
            self._db.execute(statement.replace("DOUBLE PRECISION", "REAL"))

    def _transaction(self, key: str | None) -> Any:
        ledger = self

        class _Tx:
            def __enter__(self) -> _SqliteCursor:
                ledger._lock.acquire()
                try:
                    ledger._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as e:
                    ledger._lock.release()
                    raise StoreUnavailableError(f"budget ledger in {ledger.path}: {e}") from e
                return _SqliteCursor(ledger._db)

            def __exit__(self, kind: object, error: object, tb: object) -> None:
                try:
                    ledger._db.execute("COMMIT" if kind is None else "ROLLBACK")
                finally:
                    ledger._lock.release()

        return _Tx()

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresLedger(_SqlLedger):
    """The ledger in a PostgreSQL database (the store's): shared by every worker that uses
    it. A reservation locks its budget's row (``SELECT … FOR UPDATE``) for one transaction."""

    _param = "%s"

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        try:
            import psycopg
        except ImportError as e:
            raise ConfigurationError(
                "a PostgreSQL budget ledger needs psycopg: pip install 'durable-agents[postgres]'"
            ) from e
        self._psycopg = psycopg
        self.url = url
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._conn: Any = None
        with self._transaction(None) as cur:
            for statement in self._SCHEMA:
                cur.execute(statement)

    def _connect(self) -> Any:
        if self._conn is None or self._conn.closed:
            try:
                self._conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
            except self._psycopg.OperationalError as e:
                raise StoreUnavailableError(f"budget ledger: cannot reach PostgreSQL: {e}") from e
        return self._conn

    def _transaction(self, key: str | None) -> Any:
        ledger = self

        class _Tx:
            def __enter__(self) -> Any:
                ledger._lock.acquire()
                try:
                    self.conn = ledger._connect()
                    self.tx = self.conn.transaction()
                    self.tx.__enter__()
                    cur = self.conn.cursor()
                    if key is not None:
                        cur.execute("INSERT INTO da_budget_keys VALUES (%s) ON CONFLICT DO NOTHING", (key,))
                        cur.execute("SELECT budget_key FROM da_budget_keys WHERE budget_key = %s FOR UPDATE", (key,))
                    return cur
                except BaseException as e:
                    ledger._lock.release()
                    if isinstance(e, ledger._psycopg.OperationalError):
                        ledger._conn = None
                        raise StoreUnavailableError(f"budget ledger: PostgreSQL failed: {e}") from e
                    raise

            def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
                try:
                    self.tx.__exit__(kind, error, tb)
                except ledger._psycopg.OperationalError as e:
                    ledger._conn = None
                    raise StoreUnavailableError(f"budget ledger: PostgreSQL failed: {e}") from e
                finally:
                    ledger._lock.release()

        return _Tx()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()


def ledger_for(store: object) -> BudgetLedger:
    """The ledger that lives beside ``store``: its SQLite file, its PostgreSQL database, else
    one in this process (a memory or file store: budgets then hold per worker process)."""
    inner = getattr(store, "inner", None)  # an encrypted store: the store it wraps
    if inner is not None:
        return ledger_for(inner)
    from durable_agents.checkpoint.stores.postgres import PostgresStore
    from durable_agents.checkpoint.stores.sqlite import SqliteStore

    if isinstance(store, PostgresStore):
        return PostgresLedger(store.url, connect_timeout=max(int(store.connect_timeout), 1))
    if isinstance(store, SqliteStore) and store.durable and store.path != ":memory:":
        # a file of its own beside the store's: a reservation's write lock never holds up a checkpoint write
        return SqliteLedger(store.path + BUDGETS_SUFFIX)
    return MemoryLedger()
