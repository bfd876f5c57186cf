"""Fixtures for the budget tests: the rate-limited fake, with the SDKs pointed at it."""

from __future__ import annotations

import pytest

from tests.fakes.rate_limited import RateLimitedServer


@pytest.fixture
def rate_limited(monkeypatch):
    """``rate_limited(**limits)`` -> a started RateLimitedServer the SDKs talk to."""
    servers: list[RateLimitedServer] = []

    def start(**settings) -> RateLimitedServer:
        server = RateLimitedServer(**settings).__enter__()
        servers.append(server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        return server

    yield start
    for server in servers:
        server.__exit__()
