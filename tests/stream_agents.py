"""Agents on the Anthropic and OpenAI fakes for the streaming crash tests (worker subprocesses
import them; keys and base URLs come from the worker's environment)."""

from __future__ import annotations

from durable_agents import Agent
from tests.agents import get_weather

anthropic_streamer = Agent(
    name="anthropic-streamer", model="anthropic:test-model", tools=[get_weather], model_heartbeat_timeout=5.0
)
openai_streamer = Agent(
    name="openai-streamer", model="openai:test-model", tools=[get_weather], model_heartbeat_timeout=5.0
)
ALL = [anthropic_streamer, openai_streamer]
