"""The raw Temporal loop the benches compare against: the least a Temporal agent loop does.

Per step one model-like activity (in: the last tool result, ~1 KB; out: a ~1 KB
turn with a tool call) and one tool-like activity (out: a ~1 KB result), as
regular or local activities. No store, no checkpoint, no guarantees beyond
Temporal's own. A module of its own so the workflow sandbox can import it.

``RawRun(stored=True)``: the same loop plus the store work our guarantees rest on and
nothing else (``compare.py``'s floor with a store): per step one read and three durable
SQLite commits, as durable-agents makes them (docs/design.md §3) — the model turn reads
the session and stores its turn with the session's header, the tool call records its
start before it runs, then its result with the header. Same SQLite settings as
``SqliteStore`` (WAL, ``synchronous=NORMAL``), on the worker's event loop as it does; no
history ring, no event log, no pydantic, no typed errors.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow

PAD = "x" * 1000


@dataclass
class RawRun:
    steps: int
    local: bool
    model_seconds: float = 0.0
    """The model-like activity's latency (``capacity.py``); 0: instant."""
    stored: bool = False
    """Each step's turn, tool start and tool result written to the floor's store (``use_floor_store``)."""


@dataclass
class RawTurn:
    text: str
    tool_call: int | None


@activity.defn(name="raw-model-turn")
async def raw_model_turn(last_result: str) -> RawTurn:
    n = json.loads(last_result)["n"] + 1 if last_result.startswith("{") else 0
    return RawTurn(text=f"step {n} {PAD}", tool_call=n)


SLOW_MODEL_CALLS: list[tuple[str, float]] = []
"""(workflow id, ``time.time()``) of each ``raw_slow_model_turn`` in this process (``capacity.py``'s timeline)."""


@activity.defn(name="raw-slow-model-turn")
async def raw_slow_model_turn(last_result: str, seconds: float) -> RawTurn:
    """``raw_model_turn`` after ``seconds`` of waiting (a provider's latency)."""
    SLOW_MODEL_CALLS.append((activity.info().workflow_id, time.time()))
    await asyncio.sleep(seconds)
    return await raw_model_turn(last_result)


@activity.defn(name="raw-tool-call")
async def raw_tool_call(n: int) -> str:
    return json.dumps({"n": n, "pad": PAD})


class _FloorStore:
    """One SQLite file: a session row with its header, messages by position, tool markers."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, header TEXT NOT NULL,"
            " message_count INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS messages (session_id TEXT NOT NULL, position INTEGER NOT NULL,"
            " body TEXT NOT NULL, PRIMARY KEY (session_id, position));"
            "CREATE TABLE IF NOT EXISTS markers (session_id TEXT NOT NULL, position INTEGER NOT NULL,"
            " starts INTEGER NOT NULL, result TEXT, PRIMARY KEY (session_id, position));"
        )

    def read(self, sid: str) -> tuple[dict, str | None]:
        """The session's header and its last message (one snapshot)."""
        self.db.execute("BEGIN")
        try:
            row = self.db.execute("SELECT header, message_count FROM sessions WHERE session_id = ?", (sid,)).fetchone()
            if row is None:
                return {"sessionId": sid, "messageCount": 0, "stepIndex": 0, "pad": PAD}, None
            last = self.db.execute(
                "SELECT body FROM messages WHERE session_id = ? AND position = ?", (sid, row[1] - 1)
            ).fetchone()
            return json.loads(row[0]), last[0]
        finally:
            self.db.execute("COMMIT")

    def append(self, sid: str, header: dict, body: str, marker: tuple[int, str] | None = None) -> int:
        """``body`` appended with the header that counts it (and a call's result kept), in one commit."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT message_count FROM sessions WHERE session_id = ?", (sid,)).fetchone()
            position = row[0] if row else 0
            if marker is not None:
                self.db.execute(
                    "UPDATE markers SET result = COALESCE(result, ?) WHERE session_id = ? AND position = ?",
                    (marker[1], sid, marker[0]),
                )
            self.db.execute("INSERT INTO messages VALUES (?, ?, ?)", (sid, position, body))
            header = {**header, "messageCount": position + 1, "updatedAt": time.time()}
            self.db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?) ON CONFLICT (session_id)"
                " DO UPDATE SET header = excluded.header, message_count = excluded.message_count",
                (sid, json.dumps(header), position + 1),
            )
            self.db.execute("COMMIT")
            return position
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def started(self, sid: str) -> tuple[dict, int, int]:
        """Read the session and record the next call's start before it runs, in one commit: the
        header, the call's result position and how many starts came before."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            header, position = self.db.execute(
                "SELECT header, message_count FROM sessions WHERE session_id = ?", (sid,)
            ).fetchone()
            (starts,) = self.db.execute(
                "INSERT INTO markers VALUES (?, ?, 1, NULL) ON CONFLICT (session_id, position)"
                " DO UPDATE SET starts = starts + 1 RETURNING starts",
                (sid, position),
            ).fetchone()
            self.db.execute("COMMIT")
            return json.loads(header), position, starts - 1
        except BaseException:
            self.db.execute("ROLLBACK")
            raise


_FLOOR: list[_FloorStore] = []


def use_floor_store(path: str) -> None:
    """Where ``RawRun(stored=True)`` loops keep their steps (this process's workers)."""
    _FLOOR[:] = [_FloorStore(path)]


@activity.defn(name="raw-model-turn-stored")
async def raw_model_turn_stored(last_result: str) -> RawTurn:
    """``raw_model_turn`` between a read of the session and its turn's durable write."""
    store, sid = _FLOOR[0], activity.info().workflow_id
    header, _ = store.read(sid)
    turn = await raw_model_turn(last_result)
    header["stepIndex"] += 1
    store.append(sid, header, json.dumps({"role": "assistant", "content": turn.text, "call": turn.tool_call}))
    return turn


@activity.defn(name="raw-tool-call-stored")
async def raw_tool_call_stored(n: int) -> str:
    """``raw_tool_call`` with its start recorded before it runs and its result after."""
    store, sid = _FLOOR[0], activity.info().workflow_id
    header, position, _ = store.started(sid)
    result = await raw_tool_call(n)
    store.append(sid, header, json.dumps({"role": "tool", "content": result}), (position, result))
    return result


def keep_input(path: str, workflow_id: str) -> None:
    """What our client does before it starts a run, and nothing more (``capacity.py``'s
    ``raw-local-start``): the run's ~1 KB input written to a SQLite file, one durable commit."""
    db = _INPUTS.get(path)
    if db is None:
        db = _INPUTS[path] = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=10000")
        db.execute("CREATE TABLE IF NOT EXISTS floor_inputs (workflow_id TEXT PRIMARY KEY, body TEXT NOT NULL)")
    with _INPUTS_LOCK:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO floor_inputs VALUES (?, ?)", (workflow_id, json.dumps({"input": PAD})))
        db.execute("COMMIT")


_INPUTS: dict[str, sqlite3.Connection] = {}
_INPUTS_LOCK = threading.Lock()


@workflow.defn(name="RawAgentLoop")
class RawAgentLoop:
    def __init__(self) -> None:
        self._turns: int | None = None

    @workflow.update(name="wait_end")
    async def wait_end(self) -> int:
        """The run's model turns once it ends: what update-with-start waits for (``raw-local-start``)."""
        await workflow.wait_condition(lambda: self._turns is not None)
        assert self._turns is not None
        return self._turns

    @workflow.run
    async def run(self, run: RawRun) -> int:
        """``run.steps`` tool steps, then a last model turn; returns the model turns (steps + 1)."""
        self._turns = await self._loop(run)
        return self._turns

    async def _loop(self, run: RawRun) -> int:
        last = "go"
        for step in range(run.steps + 1):
            if run.model_seconds:
                turn = await self._call(raw_slow_model_turn, [last, run.model_seconds], run.local)
            else:
                turn = await self._call(raw_model_turn_stored if run.stored else raw_model_turn, [last], run.local)
            if step == run.steps:
                return step + 1
            last = await self._call(raw_tool_call_stored if run.stored else raw_tool_call, [turn.tool_call], run.local)
        return run.steps + 1

    @staticmethod
    async def _call(fn, args: list, local: bool):  # type: ignore[no-untyped-def]
        timeout = timedelta(seconds=60)
        if local:
            return await workflow.execute_local_activity(fn, args=args, start_to_close_timeout=timeout)
        return await workflow.execute_activity(fn, args=args, start_to_close_timeout=timeout)
