"""An Anthropic agent with extended thinking, for the crash test of thinking blocks
(imported by worker subprocesses; the model is the wire-format fake the test runs,
reached through ANTHROPIC_BASE_URL in the worker's environment)."""

from __future__ import annotations

from durable_agents import Agent, ModelSettings
from tests.crash_agents import HEARTBEAT, safe_work

thinking_agent = Agent(
    name="crash-thinking",
    model="anthropic:claude-test",
    instructions="Think, then work.",
    tools=[safe_work],
    max_tokens=4096,
    model_settings=ModelSettings(thinking_budget_tokens=2048),
    model_heartbeat_timeout=HEARTBEAT,
    model_timeout=30,
)

ALL = [thinking_agent]
