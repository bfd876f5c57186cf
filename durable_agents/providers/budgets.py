"""Provider rate limits shared by every session: budgets, one backoff, fair shares.

A team's sessions share one provider account, and its limits: requests, input tokens and
output tokens per minute, per model. Declare them once for a worker fleet::

    budgets = [
        Budget("anthropic:claude-sonnet-4-5", requests_per_minute=4000,
               input_tokens_per_minute=2_000_000, output_tokens_per_minute=400_000),
        Budget("openai:*", requests_per_minute=500, tokens_per_minute=800_000),
    ]
    worker = build_worker(client, agents=[...], store=store, budgets=budgets,
                          fair_share=FairShare(key="agent"))

and every model call of every worker on that store takes its turn in them:

- **Reserve, then settle.** Before a call is sent it reserves one request, its estimated
  input tokens (:func:`estimate_input_tokens`, on the side of too many) and its
  ``max_tokens`` of output; when the reply comes the reservation is settled with the usage
  the provider reports. The providers' rate-limit headers calibrate what is left.
- **One backoff for the fleet.** A 429 (or a 529 overload) pauses the model's budget for
  every session until its ``retry-after`` ends; the call that got it goes first then.
- **Fair shares.** Calls waiting for a budget are served by their :class:`FairShare` key
  (the agent, the session, or a function of the run, e.g. its tenant): the key that has
  been served least (in tokens, divided by its weight) goes next, so one tenant's burst of
  150 sessions does not starve another's five.

The shared ledger lives in the store's database (:mod:`durable_agents.checkpoint.budget_ledger`).
This module needs no Temporal: :class:`RateLimiter` works around any call; the model
activity (``durable_agents.activities.budget_wait``) adds heartbeats, the run's Current
Details, a metric and a span attribute while a call waits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from durable_agents.checkpoint.budget_ledger import Amounts, BudgetLedger, Denial, Limits, MemoryLedger
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Usage
from durable_agents.providers import ratelimit_headers
from durable_agents.providers.base import ModelRequest

__all__ = [
    "Budget",
    "BudgetCall",
    "BudgetExceeded",
    "FairShare",
    "RateLimiter",
    "WaitObserver",
    "estimate_input_tokens",
]

T = TypeVar("T")

CHARS_PER_TOKEN = 3.0
"""The estimate's divisor: fewer characters per token than real text has (≈ 4 in English),
so estimates run high; the reply's usage settles the difference."""
OVERLOAD_PAUSE_SECONDS = 2.0
"""A 429 or 529 that says no ``retry-after`` pauses the budget this long."""
POLL_SECONDS = 1.0
"""The longest a waiting call sleeps between looks at the ledger (others settle early)."""


@dataclass(frozen=True)
class Budget:
    """The limits of one provider model (``"anthropic:claude-sonnet-4-5"``) or of every model
    of a provider (``"openai:*"``: each model gets these limits of its own, as providers
    count per model). A model matched by both uses its own budget. ``None``: not limited.

    ``tokens_per_minute``: input and output together (OpenAI counts them so).
    ``window_seconds``: the period the limits are per (providers: 60; shorter in tests).
    """

    model: str
    requests_per_minute: int | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    tokens_per_minute: int | None = None
    window_seconds: float = 60.0

    def __post_init__(self) -> None:
        provider, sep, name = self.model.partition(":")
        if not sep or not provider or not name:
            raise ConfigurationError(
                f"Budget(model={self.model!r}): write the model as '<provider>:<model>' "
                "(e.g. 'anthropic:claude-sonnet-4-5') or '<provider>:*' for each of its models"
            )
        limits = {
            "requests_per_minute": self.requests_per_minute,
            "input_tokens_per_minute": self.input_tokens_per_minute,
            "output_tokens_per_minute": self.output_tokens_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
        }
        for name, value in limits.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(
                    f"Budget({self.model!r}, {name}={value!r}): a limit is a whole number, 1 or more"
                )
        if all(value is None for value in limits.values()):
            raise ConfigurationError(
                f"Budget({self.model!r}) limits nothing: give requests_per_minute, input_tokens_per_minute, "
                "output_tokens_per_minute or tokens_per_minute"
            )
        window = self.window_seconds
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not 0 < window < math.inf:
            raise ConfigurationError(f"Budget({self.model!r}, window_seconds={window!r}): a number of seconds over 0")

    def describe(self) -> str:
        """The budget as people read it: ``openai:* 500 requests, 30,000 tokens a minute``."""
        said = [
            f"{value:,} {what}"
            for value, what in (
                (self.requests_per_minute, "requests"),
                (self.input_tokens_per_minute, "input tokens"),
                (self.output_tokens_per_minute, "output tokens"),
                (self.tokens_per_minute, "tokens"),
            )
            if value is not None
        ]
        per = "a minute" if self.window_seconds == 60 else f"per {self.window_seconds:g} s"
        return f"{self.model} {', '.join(said)} {per}"

    @property
    def limits(self) -> Limits:
        return Limits(
            self.requests_per_minute,
            self.input_tokens_per_minute,
            self.output_tokens_per_minute,
            self.tokens_per_minute,
            float(self.window_seconds),
        )


@dataclass(frozen=True)
class BudgetCall:
    """One model call as the fair share sees it."""

    provider: str
    model: str
    agent: str = ""
    session_id: str = ""
    step: int = 0
    holder: str = ""
    """Who holds its reservation, the same on every retry of the call (the model activity:
    its workflow and activity id), so the call that got a 429 is known when it comes back."""


@dataclass(frozen=True)
class FairShare:
    """Who shares a budget fairly: calls with the same key queue behind each other; keys are
    served by what they have spent (tokens divided by their ``weights``, default 1).

    ``key``: ``"agent"``, ``"session"``, or a function of the call (e.g. the tenant a session
    id starts with: ``key=lambda call: call.session_id.split("-")[0]``)."""

    key: Literal["agent", "session"] | Callable[[BudgetCall], str] = "agent"
    weights: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.key) and self.key not in ("agent", "session"):
            raise ConfigurationError(f"FairShare(key={self.key!r}): use 'agent', 'session' or a function of the call")
        for name, weight in self.weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
                raise ConfigurationError(f"FairShare(weights={{{name!r}: {weight!r}}}): a weight is a number over 0")

    def of(self, call: BudgetCall) -> str:
        if self.key == "agent":
            return call.agent
        if self.key == "session":
            return call.session_id
        assert callable(self.key)
        return str(self.key(call))

    def weight(self, key: str) -> float:
        return float(self.weights.get(key, 1.0))


class BudgetExceeded(Exception):
    """A call that can never fit its budget (alone over a limit), or one that waited longer
    than it may (``RateLimiter(max_wait=…)``)."""

    def __init__(self, message: str, *, never: bool, expected: float = 0.0, reason: str = "") -> None:
        super().__init__(message)
        self.never = never
        self.reason = reason
        """What it waited for (``input tokens``, ``a pause after a 429 or overload`` …)."""
        self.expected = expected
        """How long the call would still wait, as the ledger stood (0: not known)."""


class WaitObserver(Protocol):
    """Told about a call's wait while it waits (the model activity heartbeats, shows it)."""

    async def waiting(self, waited: float, expected: float, reason: str) -> None:
        """Called about once a second while the call waits; raising ends the wait."""
        ...

    async def waited(self, seconds: float) -> None:
        """The call got its budget after ``seconds`` of waiting (0: none)."""
        ...

    async def refused(self, status: int) -> None:
        """The provider refused the call (429, 529): the budget pauses for everyone."""
        ...


def estimate_input_tokens(request: ModelRequest) -> int:
    """The request's input tokens, estimated on the high side from its JSON (messages, tools,
    schema): characters / :data:`CHARS_PER_TOKEN`, plus a few per message."""
    chars = sum(len(m.model_dump_json(exclude_none=True)) for m in request.messages)
    chars += sum(len(t.model_dump_json(exclude_none=True)) for t in request.tools)
    if request.output_schema is not None:
        chars += len(json.dumps(request.output_schema))
    return math.ceil(chars / CHARS_PER_TOKEN) + 4 * len(request.messages) + 8


@dataclass
class _Waiter:
    key: str
    amounts: Amounts
    holder: str
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class _FairQueue:
    """The calls of one budget waiting in this process, served by least normalized service:
    each key's virtual time grows by the tokens it was granted over its weight; a key that
    starts waiting starts at the queue's current virtual time (no credit for idle time)."""

    def __init__(self, share: FairShare) -> None:
        self.share = share
        self.vtime: dict[str, float] = {}
        self.now = 0.0
        self.waiting: dict[str, list[tuple[int, _Waiter]]] = {}
        self._order = itertools.count()
        self.first: str | None = None
        """The holder served before anyone (the call that got a 429, when it comes back)."""

    def join(self, waiter: _Waiter) -> None:
        queue = self.waiting.setdefault(waiter.key, [])
        if not queue:
            self.vtime[waiter.key] = max(self.vtime.get(waiter.key, 0.0), self.now)
        heapq.heappush(queue, (next(self._order), waiter))

    def head(self) -> _Waiter | None:
        if self.first is not None:
            for queue in self.waiting.values():
                for _, waiter in queue:
                    if waiter.holder == self.first:
                        return waiter
        keys = [k for k, q in self.waiting.items() if q]
        if not keys:
            return None
        key = min(keys, key=lambda k: (self.vtime[k], self.waiting[k][0][0]))
        return self.waiting[key][0][1]

    def leave(self, waiter: _Waiter, served: bool) -> None:
        queue = self.waiting.get(waiter.key, [])
        for i, (_, w) in enumerate(queue):
            if w is waiter:
                queue.pop(i)
                heapq.heapify(queue)
                break
        if not queue:
            self.waiting.pop(waiter.key, None)
        if served and waiter.holder == self.first:
            self.first = None
        if served:
            cost = max(waiter.amounts.input_tokens + waiter.amounts.output_tokens, 1)
            self.now = self.vtime[waiter.key]
            self.vtime[waiter.key] += cost / self.share.weight(waiter.key)
        if waiter.key not in self.waiting and self.vtime.get(waiter.key, 0.0) <= self.now:
            self.vtime.pop(waiter.key, None)  # idle and owing nothing: forgotten (keys may be per session)
        nxt = self.head()
        if nxt is not None:
            nxt.woken.set()


@dataclass
class Reservation:
    """A call's place in its budget: settle it with the reply's usage, or report its refusal."""

    limiter: RateLimiter
    key: str
    budget: Budget
    holder: str
    reservation_id: str
    waited: float

    async def settle(self, usage: Usage) -> None:
        actual = Amounts(1, usage.input_tokens + (usage.cache_write_tokens or 0), usage.output_tokens)
        await asyncio.to_thread(self.limiter.ledger.settle, self.reservation_id, actual)

    async def refused(self, retry_after: float | None) -> None:
        """The provider answered 429 or 529: it did not count the call; the budget pauses."""
        await asyncio.to_thread(self.limiter.ledger.release, self.reservation_id)
        pause = retry_after if retry_after is not None else OVERLOAD_PAUSE_SECONDS
        await asyncio.to_thread(self.limiter.ledger.pause, self.key, self.limiter.clock() + pause, self.holder)

    async def heard(self, heard: Sequence[ratelimit_headers.Heard]) -> None:
        """Calibrate the budget with what the provider's headers say is left."""
        now = self.limiter.clock()
        for reply in heard:
            if reply.remaining:
                reset = max(reply.reset_in.values(), default=self.budget.window_seconds)
                await asyncio.to_thread(
                    self.limiter.ledger.calibrate, self.key, self.budget.limits, reply.remaining, now + reset, now
                )


class RateLimiter:
    """Budgets for model calls: ``await limiter.call(call, request, send)`` reserves, waits its
    fair turn, sends, settles. Shared by every worker whose ledger is shared (one per worker
    process; the fair queue is this process's, the ledger everyone's).

    ``max_wait``: the longest a call waits here before :class:`BudgetExceeded` (None: no bound
    here; the model activity bounds its own wait and hands longer ones to the workflow)."""

    def __init__(
        self,
        budgets: Sequence[Budget],
        ledger: BudgetLedger | None = None,
        *,
        fair_share: FairShare | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.budgets: dict[str, Budget] = {}
        for budget in budgets:
            if not isinstance(budget, Budget):
                raise ConfigurationError(f"budgets=[…] holds {budget!r}: give Budget(…) declarations")
            if budget.model in self.budgets:
                raise ConfigurationError(f"two budgets for {budget.model!r}: declare each model once")
            self.budgets[budget.model] = budget
        self.ledger: BudgetLedger = ledger if ledger is not None else MemoryLedger()
        self.fair_share = fair_share or FairShare()
        self.clock = clock
        self._queues: dict[str, _FairQueue] = {}

    def budget_for(self, provider: str, model: str) -> tuple[str, Budget] | None:
        """The budget key (``provider:model``) and declaration that govern a model; None: none."""
        budget = self.budgets.get(f"{provider}:{model}") or self.budgets.get(f"{provider}:*")
        return (f"{provider}:{model}", budget) if budget is not None else None

    async def call(
        self,
        call: BudgetCall,
        request: ModelRequest,
        send: Callable[[], Awaitable[T]],
        observer: WaitObserver | None = None,
        max_wait: float | None = None,
    ) -> T:
        """``send()`` within the budget of ``call``'s model (at once when it has none): wait
        for a fair turn and a fit, send, then settle with the reply's ``usage`` (a 429 or 529
        releases the reservation and pauses the budget); headers calibrate it either way.
        Raises :class:`BudgetExceeded` when the call can never fit or waited ``max_wait``."""
        if self.budget_for(call.provider, call.model) is None:
            return await send()
        reservation = await self.reserve(call, request, observer, max_wait)
        with ratelimit_headers.listening() as heard:
            try:
                result = await send()
            except BaseException:
                refusal = next((h for h in heard if h.status in (429, 529)), None)
                if refusal is not None:
                    self._queues[reservation.key].first = reservation.holder  # it goes first when it is back
                    await reservation.refused(refusal.retry_after)
                    if observer is not None:
                        await observer.refused(refusal.status)
                await reservation.heard(heard)
                raise
        usage = getattr(result, "usage", None)
        if isinstance(usage, Usage):
            await reservation.settle(usage)
        await reservation.heard(heard)
        return result

    async def reserve(
        self,
        call: BudgetCall,
        request: ModelRequest,
        observer: WaitObserver | None = None,
        max_wait: float | None = None,
    ) -> Reservation:
        """Wait for the call's fair turn and a fit in its budget, then book it."""
        governed = self.budget_for(call.provider, call.model)
        assert governed is not None, "reserve() is for a model with a budget"
        key, budget = governed
        amounts = Amounts(1, estimate_input_tokens(request), request.max_tokens)
        holder = call.holder or f"{call.session_id}/{call.step}"
        queue = self._queues.setdefault(key, _FairQueue(self.fair_share))
        waiter = _Waiter(self.fair_share.of(call), amounts, holder)
        queue.join(waiter)
        began = time.monotonic()
        expected, reason = 0.0, ""
        served = False
        try:
            while True:
                if queue.head() is waiter:
                    decision = await asyncio.to_thread(
                        self.ledger.reserve, key, budget.limits, amounts, holder, self.clock()
                    )
                    if not isinstance(decision, Denial):
                        served = True
                        waited = time.monotonic() - began
                        if observer is not None:
                            await observer.waited(waited)
                        return Reservation(self, key, budget, holder, decision.reservation_id, waited)
                    if decision.never:
                        raise BudgetExceeded(f"{key}: {decision.reason}", never=True, reason=decision.reason)
                    if decision.first is not None and decision.first != queue.first:
                        queue.first = decision.first  # the call that got the 429 goes first (if it is here)
                        promoted = queue.head()
                        if promoted is not None and promoted is not waiter:
                            promoted.woken.set()
                    expected, reason = decision.wait_seconds, decision.reason
                else:
                    reason = "its turn behind other calls"
                waited = time.monotonic() - began
                if max_wait is not None and waited >= max_wait:
                    raise BudgetExceeded(
                        f"{key}: waited {waited:.0f}s for {reason}", never=False, expected=expected, reason=reason
                    )
                if observer is not None:
                    await observer.waiting(waited, expected, reason)
                waiter.woken.clear()
                pause = min(max(expected, 0.05), POLL_SECONDS)
                if max_wait is not None:
                    pause = min(pause, max(max_wait - waited, 0.01))
                try:
                    await asyncio.wait_for(waiter.woken.wait(), timeout=pause)
                except TimeoutError:
                    pass
        finally:
            queue.leave(waiter, served)
