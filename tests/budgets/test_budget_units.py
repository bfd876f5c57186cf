"""Budgets without Temporal: declarations, the ledgers (one spec for memory, SQLite and
PostgreSQL), the providers' rate-limit headers, and the fair queue's order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from durable_agents.checkpoint.budget_ledger import (
    PRIORITY_GRACE_SECONDS,
    SEND_MARGIN,
    Amounts,
    Denial,
    Grant,
    Limits,
    MemoryLedger,
    PostgresLedger,
    SqliteLedger,
    ledger_for,
)
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Message, Role, Usage
from durable_agents.checkpoint.stores.sqlite import SqliteStore
from durable_agents.providers import ratelimit_headers
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.budgets import (
    Budget,
    BudgetCall,
    BudgetExceeded,
    FairShare,
    RateLimiter,
    estimate_input_tokens,
)


# -- declarations: bad ones fail at once, naming the field ----------------------------------
@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"model": "claude-sonnet-4-5", "requests_per_minute": 10}, "model='claude-sonnet-4-5'"),
        ({"model": "anthropic:m", "requests_per_minute": 0}, "requests_per_minute=0"),
        ({"model": "anthropic:m", "input_tokens_per_minute": -5}, "input_tokens_per_minute=-5"),
        ({"model": "anthropic:m", "output_tokens_per_minute": 1.5}, "output_tokens_per_minute=1.5"),
        ({"model": "anthropic:m", "tokens_per_minute": True}, "tokens_per_minute=True"),
        ({"model": "anthropic:m"}, "limits nothing"),
        ({"model": "anthropic:m", "requests_per_minute": 5, "window_seconds": 0}, "window_seconds=0"),
    ],
)
def test_a_bad_budget_is_refused_naming_its_field(kwargs, said):
    with pytest.raises(ConfigurationError) as e:
        Budget(**kwargs)
    assert said in str(e.value)


def test_fair_share_and_limiter_refuse_bad_settings():
    with pytest.raises(ConfigurationError, match="key='tenant'"):
        FairShare(key="tenant")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="weights"):
        FairShare(weights={"a": 0})
    with pytest.raises(ConfigurationError, match="two budgets for 'anthropic:m'"):
        RateLimiter([Budget("anthropic:m", requests_per_minute=1), Budget("anthropic:m", requests_per_minute=2)])


def test_a_model_uses_its_own_budget_before_its_providers():
    limiter = RateLimiter([Budget("openai:*", requests_per_minute=1), Budget("openai:gpt-4.1", requests_per_minute=9)])
    assert limiter.budget_for("openai", "gpt-4.1")[1].requests_per_minute == 9  # type: ignore[index]
    key, budget = limiter.budget_for("openai", "gpt-5")  # type: ignore[misc]
    assert (key, budget.requests_per_minute) == ("openai:gpt-5", 1)  # each model its own budget
    assert limiter.budget_for("anthropic", "claude") is None


def test_the_estimate_is_on_the_high_side():
    text = "The quick brown fox jumps over the lazy dog. " * 50
    request = ModelRequest(model="m", messages=[Message(role=Role.USER, content=text)])
    assert estimate_input_tokens(request) >= len(text) / 4  # real text: about 4 characters a token


# -- the ledgers: one spec ------------------------------------------------------------------
@pytest.fixture(params=["memory", "sqlite", "postgres"])
def ledger(request, tmp_path):
    if request.param == "memory":
        yield MemoryLedger()
    elif request.param == "sqlite":
        made = SqliteLedger(str(tmp_path / "store.db"))
        yield made
        made.close()
    else:
        from tests.postgres_server import fresh_schema

        url = request.getfixturevalue("postgres_url")
        with fresh_schema(url) as schema_url:
            made = PostgresLedger(schema_url)
            yield made
            made.close()


LIMITS = Limits(requests=3, input_tokens=1000, output_tokens=500, window=60.0)


def test_reservations_fit_until_a_limit_then_wait_for_the_oldest(ledger):
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 600, 100), "a", 0.0), Grant)
    denied = ledger.reserve("k", LIMITS, Amounts(1, 600, 100), "b", 10.0)
    assert denied == Denial(pytest.approx(50.0 + 60 * SEND_MARGIN), "input tokens")  # the first expires at 61.2
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 400, 100), "b", 10.0), Grant)
    assert isinstance(ledger.reserve("other", LIMITS, Amounts(1, 600, 100), "c", 10.0), Grant)  # its own budget
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 600, 100), "b", 61.2), Grant)


def test_settling_frees_what_was_estimated_too_high(ledger):
    grant = ledger.reserve("k", LIMITS, Amounts(1, 900, 500), "a", 0.0)
    assert isinstance(grant, Grant)
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 300, 1), "b", 1.0), Denial)
    ledger.settle(grant.reservation_id, Amounts(1, 200, 40))
    assert ledger.usage("k", 1.0) == Amounts(1, 200, 40)
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 300, 1), "b", 1.0), Grant)


def test_a_reservation_never_settled_is_freed_after_its_window(ledger):
    """A holder killed mid-call holds its estimate one window at most: its lease."""
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1000, 500), "killed", 0.0), Grant)
    assert ledger.usage("k", 61.1) == Amounts(1, 1000, 500)
    assert ledger.usage("k", 61.2) == Amounts()  # one window and its margin (1.2 s)
    assert ledger.usage("k", 0.5) == Amounts(1, 1000, 500)  # (a look ahead changed nothing)
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1000, 500), "next", 61.2), Grant)


def test_a_call_over_a_limit_alone_can_never_fit(ledger):
    denied = ledger.reserve("k", LIMITS, Amounts(1, 5000, 1), "a", 0.0)
    assert isinstance(denied, Denial) and denied.never and "5000 input tokens" in denied.reason


def test_a_pause_holds_everyone_and_its_caller_goes_first(ledger):
    ledger.pause("k", 10.0, "got-429")
    assert ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "other", 5.0) == Denial(5.0, "a pause after a 429 or overload")
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "got-429", 5.0), Denial)
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "other", 10.5), Denial)  # it goes first
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "got-429", 10.5), Grant)
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "other", 10.6), Grant)


def test_a_caller_that_never_comes_back_holds_the_pause_for_its_grace_only(ledger):
    ledger.pause("k", 10.0, "gone")
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "other", 11.0), Denial)
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 1, 1), "other", 10.0 + PRIORITY_GRACE_SECONDS), Grant)


def test_headers_that_say_less_is_left_book_the_difference_until_won_back(ledger):
    assert isinstance(ledger.reserve("k", LIMITS, Amounts(1, 100, 10), "a", 0.0), Grant)
    ledger.calibrate("k", LIMITS, {"input_tokens": 300}, reset_at=50.0, now=1.0)  # the ledger thought 900 left
    assert ledger.usage("k", 1.0).input_tokens == 700
    # 600 tokens at 1000 a minute come back in 36 s
    assert ledger.usage("k", 36.9).input_tokens == 700
    assert ledger.usage("k", 37.1).input_tokens == 100
    ledger.calibrate("k", LIMITS, {"input_tokens": 950}, reset_at=50.0, now=38.0)  # more left: not believed
    assert ledger.usage("k", 38.0).input_tokens == 100


def test_sqlite_ledgers_on_one_file_share_one_budget(tmp_path):
    first, second = SqliteLedger(str(tmp_path / "s.db")), SqliteLedger(str(tmp_path / "s.db"))
    try:
        assert isinstance(first.reserve("k", LIMITS, Amounts(1, 900, 1), "a", 0.0), Grant)
        assert isinstance(second.reserve("k", LIMITS, Amounts(1, 900, 1), "b", 0.0), Denial)
    finally:
        first.close()
        second.close()


def test_the_ledger_lives_beside_the_store(tmp_path):
    store = SqliteStore(tmp_path / "store.db")
    try:
        found = ledger_for(store)
        assert isinstance(found, SqliteLedger) and found.path == store.path + "-budgets"
        found.close()
    finally:
        store.close()


# -- headers -------------------------------------------------------------------------------
def test_anthropic_and_openai_rate_limit_headers_are_read():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    heard = ratelimit_headers.parse(
        429,
        {
            "retry-after": "7",
            "anthropic-ratelimit-input-tokens-remaining": "120",
            "anthropic-ratelimit-input-tokens-reset": "2026-01-01T12:00:30Z",
            "anthropic-ratelimit-requests-remaining": "3",
        },
        now,
    )
    assert heard.retry_after == 7 and heard.remaining == {"input_tokens": 120, "requests": 3}
    assert heard.reset_in["input_tokens"] == 30
    openai = ratelimit_headers.parse(
        200, {"x-ratelimit-remaining-tokens": "5000", "x-ratelimit-reset-tokens": "1m2.5s"}
    )
    assert openai.remaining == {"tokens": 5000} and openai.reset_in == {"tokens": 62.5}
    assert ratelimit_headers.duration_seconds("20ms") == pytest.approx(0.02)
    assert ratelimit_headers.duration_seconds("6m0s") == 360


# -- the fair queue ------------------------------------------------------------------------
def tenant(call: BudgetCall) -> str:
    return call.session_id.split("-")[0]


async def serve(
    limiter: RateLimiter, sessions: list[str], served: list[str], enough: int, late: list[str] = ()
) -> None:
    """Ask for one call per session (``late`` ones a moment after the others) until ``enough`` were sent."""
    request = ModelRequest(model="m", messages=[Message(role=Role.USER, content="hi")], max_tokens=10)

    async def one(session: str) -> None:
        async def send() -> ModelResponse:
            served.append(session)
            return ModelResponse(message=Message(role=Role.ASSISTANT, content="ok"), usage=Usage(input_tokens=5))

        await limiter.call(BudgetCall("fake", "m", session_id=session), request, send)

    tasks = [asyncio.create_task(one(s)) for s in sessions]
    await asyncio.sleep(0.3)
    tasks += [asyncio.create_task(one(s)) for s in late]
    for _ in range(600):  # 30 s at most
        if len(served) >= enough:
            break
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_burst_of_one_key_does_not_starve_another():
    """30 calls of tenant A wait for a budget of one call a window; then 3 of B come: B's are
    served next, alternating with A's, not after A's 30."""
    limiter = RateLimiter(
        [Budget("fake:m", requests_per_minute=1, window_seconds=0.2)], fair_share=FairShare(key=tenant)
    )
    served: list[str] = []
    await serve(limiter, [f"a-{i}" for i in range(30)], served, 12, late=[f"b-{i}" for i in range(3)])
    order = [s.split("-")[0] for s in served]
    assert order[:12].count("b") == 3, order
    first_b = order.index("b")
    assert order[first_b : first_b + 6].count("b") == 3, order  # interleaved with A's, not last


async def test_weights_give_a_key_a_bigger_share():
    limiter = RateLimiter(
        [Budget("fake:m", requests_per_minute=1, window_seconds=0.2)],
        fair_share=FairShare(key=tenant, weights={"gold": 3}),
    )
    served: list[str] = []
    await serve(limiter, [f"{k}-{i}" for i in range(20) for k in ("gold", "plain")], served, 17)
    order = [s.split("-")[0] for s in served]
    assert order[1:17].count("gold") >= 11, order  # about three to one (the first call: whoever came first)


async def test_a_call_that_can_never_fit_fails_at_once():
    limiter = RateLimiter([Budget("fake:m", input_tokens_per_minute=10)])
    request = ModelRequest(model="m", messages=[Message(role=Role.USER, content="x" * 500)])

    async def send() -> ModelResponse:
        raise AssertionError("not sent")

    with pytest.raises(BudgetExceeded) as e:
        await limiter.call(BudgetCall("fake", "m"), request, send)
    assert e.value.never and "over the limit of 10" in str(e.value)
