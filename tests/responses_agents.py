"""An agent on the OpenAI Responses API for crash tests (imported by worker subprocesses)."""

from __future__ import annotations

from durable_agents import Agent
from tests.crash_agents import HEARTBEAT, once_work, safe_work

responses_agent = Agent(
    name="responses-agent",
    model="openai-responses:o4-mini",
    instructions="You do the work.",
    tools=[safe_work, once_work],
    model_heartbeat_timeout=HEARTBEAT,
    model_timeout=30,
)

ALL = [responses_agent]
