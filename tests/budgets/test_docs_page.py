"""The rate-limits page's blocks run as written: the declarations, and the limiter without Temporal."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from durable_agents.providers.budgets import Budget, BudgetCall, BudgetExceeded, FairShare, RateLimiter

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "production" / "rate-limits.md"


def page_blocks() -> list[str]:
    """The page's plain blocks of Python (they start with an import from durable_agents)."""
    return re.findall(r"^```\n(from durable_agents.*?)^```", PAGE.read_text(), re.S | re.M)


def run_block(code: str) -> dict:
    scope: dict = {}
    exec(compile(code, str(PAGE), "exec"), scope)
    return scope


def test_the_pages_declarations_run_as_written():
    blocks = page_blocks()
    assert len(blocks) == 2, "the page's declarations and its limiter without Temporal"
    scope = run_block(blocks[0])
    budgets, share = scope["budgets"], scope["share"]
    assert all(isinstance(b, Budget) for b in budgets) and isinstance(share, FairShare)
    limiter = RateLimiter(budgets, fair_share=share)
    assert limiter.budget_for("openai", "gpt-4.1") is not None
    assert share.of(BudgetCall("anthropic", "m", session_id="gold-42")) == "gold" and share.weight("gold") == 3


def test_the_pages_limiter_without_temporal_books_and_settles():
    from durable_agents import Message, ModelRequest, ModelResponse, Usage

    scope = run_block(page_blocks()[1])
    limiter, ask = scope["limiter"], scope["ask"]

    class Provider:  # any object with generate(), as the page says
        async def generate(self, request: ModelRequest) -> ModelResponse:
            reply = Message(role="assistant", content=f"You said: {request.messages[-1].content}")
            return ModelResponse(message=reply, usage=Usage(input_tokens=12, output_tokens=5, requests=1))

    reply = asyncio.run(ask(Provider(), "A table for 2", "s1"))
    assert reply.message.content == "You said: A table for 2"
    used = limiter.ledger.usage("anthropic:claude-sonnet-4-5", time.time())
    assert (used.requests, used.input_tokens, used.output_tokens) == (1, 12, 5)  # settled: not 1024 booked

    too_big = ModelRequest(model="claude-sonnet-4-5", messages=[Message.user("hi")], max_tokens=9_000)
    with pytest.raises(BudgetExceeded):  # its max_tokens alone is over the output limit: it can never fit
        asyncio.run(
            limiter.call(BudgetCall("anthropic", "claude-sonnet-4-5"), too_big, lambda: Provider().generate(too_big))
        )


def test_the_pages_blocks_run_from_the_installed_wheel(installed, tmp_path):
    """As a reader runs them after ``pip install durable-agents``: each block in the installed
    package's Python (isolated: nothing of the checkout importable), in a folder of their own."""
    import subprocess

    for code in page_blocks():
        ran = subprocess.run(
            [str(installed.python), "-I", "-c", code],
            cwd=tmp_path,
            env=installed.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, f"{code}\n{ran.stderr}"
