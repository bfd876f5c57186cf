"""Model strings (``provider:model``) to providers."""

from __future__ import annotations

from durable_agents.activities.providers.base import ModelProvider
from durable_agents.checkpoint.errors import ConfigurationError

PROVIDERS = ("anthropic", "openai", "scripted")


def split_model_string(model: str) -> tuple[str, str]:
    provider, sep, name = (model or "").partition(":")
    return provider, name if sep else ""


def check_model_string(model: str) -> None:
    provider, name = split_model_string(model)
    if provider not in PROVIDERS or not name:
        raise ConfigurationError(
            f"model {model!r} has no known provider: write it as 'anthropic:<model>', "
            "'openai:<model>' or 'scripted:<script name>' (e.g. 'anthropic:claude-sonnet-4-5')"
        )


class ProviderRegistry:
    """One provider instance per kind, built lazily in the worker process.

    SDK clients are created on first use, so API keys are read from the
    worker's environment and never travel through Temporal.
    """

    def __init__(self, overrides: dict[str, ModelProvider] | None = None) -> None:
        self._providers: dict[str, ModelProvider] = dict(overrides or {})

    def get(self, provider: str) -> ModelProvider:
        if provider not in self._providers:
            self._providers[provider] = _build(provider)
        return self._providers[provider]


def _build(provider: str) -> ModelProvider:
    if provider == "scripted":
        from durable_agents.activities.providers.scripted import ScriptedProvider

        return ScriptedProvider()
    if provider == "anthropic":
        from durable_agents.activities.providers.anthropic_messages import AnthropicProvider

        return AnthropicProvider()
    if provider == "openai":
        from durable_agents.activities.providers.openai_chat import OpenAIProvider

        return OpenAIProvider()
    raise ConfigurationError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
