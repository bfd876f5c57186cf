import asyncio
import time
import uuid

from durable_agents.providers.budgets import Budget
from tests.budgets.agents import BUDGETED, OPENAI_BUDGETED


async def test_smoke(rate_limited, run_worker):
    fake = rate_limited(requests_per_window=5, input_tokens_per_window=20000, window=2.0)
    budgets = [
        Budget("anthropic:claude-fake", requests_per_minute=5, window_seconds=2.0),
        Budget("openai:*", requests_per_minute=5, window_seconds=2.0),
    ]
    async with run_worker([BUDGETED, OPENAI_BUDGETED], budgets=budgets) as client:
        t = time.time()
        results = await asyncio.gather(
            *[client.send("budgeted", f"go {i}", session_id=f"s-{uuid.uuid4().hex[:8]}") for i in range(8)],
            *[client.send("budgeted-openai", f"go {i}", session_id=f"o-{uuid.uuid4().hex[:8]}") for i in range(4)],
        )
        print(time.time() - t, [r.finish_reason for r in results], len(fake.admitted), len(fake.refused))
        assert not fake.refused
