"""The rate-limits page's declarations run as written."""

from __future__ import annotations

import re
from pathlib import Path

from durable_agents.providers.budgets import Budget, BudgetCall, FairShare, RateLimiter

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "production" / "rate-limits.md"


def test_the_pages_declarations_run_as_written():
    block = re.search(r"^```\n(from durable_agents.*?)^```", PAGE.read_text(), re.S | re.M)
    assert block is not None, "the page's first block is gone"
    scope: dict = {}
    exec(compile(block.group(1), str(PAGE), "exec"), scope)
    budgets, share = scope["budgets"], scope["share"]
    assert all(isinstance(b, Budget) for b in budgets) and isinstance(share, FairShare)
    limiter = RateLimiter(budgets, fair_share=share)
    assert limiter.budget_for("openai", "gpt-4.1") is not None
    assert share.of(BudgetCall("anthropic", "m", session_id="gold-42")) == "gold" and share.weight("gold") == 3
