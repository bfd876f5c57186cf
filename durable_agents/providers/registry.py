"""Model strings (``provider:model``) to providers, and the registry of provider names.

Built in: ``anthropic``, ``openai`` (Chat Completions), ``openai-responses``
(the Responses API), ``scripted``. Your own providers are
named by :func:`register_provider` (call it where your agents are defined,
before they are constructed) or by an entry point in the
``durable_agents.providers`` group (``name = "package.module:ProviderClass"``);
``build_worker(providers={"name": instance})`` supplies instances for a worker.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.providers.base import ModelProvider

if TYPE_CHECKING:
    from durable_agents.providers.budgets import RateLimiter

BUILTIN_PROVIDERS = ("anthropic", "openai", "openai-responses", "scripted")
ENTRY_POINT_GROUP = "durable_agents.providers"

ProviderFactory = Callable[[], ModelProvider]
_registered: dict[str, ProviderFactory] = {}
_names: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
"""The name each provider a registry holds is known by (what failures call it)."""


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``name:<model>`` model strings valid; ``factory()`` builds the provider in a worker
    (once, lazily, so its clients read their keys from the worker's environment)."""
    if not name or ":" in name or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigurationError(f"provider name {name!r} must be letters, digits, - or _")
    if name in BUILTIN_PROVIDERS:
        raise ConfigurationError(f"provider name {name!r} is built in; choose another name")
    _registered[name] = factory


def _entry_point_names() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_providers(extra: Mapping[str, object] = {}) -> list[str]:
    names = [*BUILTIN_PROVIDERS, *_registered, *_entry_point_names(), *extra]
    return list(dict.fromkeys(names))


def split_model_string(model: str) -> tuple[str, str]:
    provider, sep, name = (model or "").partition(":")
    return provider, name if sep else ""


def check_model_string(model: str, extra: Mapping[str, object] = {}) -> None:
    provider, name = split_model_string(model)
    known = known_providers(extra)
    if provider not in known or not name:
        raise ConfigurationError(
            f"model {model!r} has no known provider: write it as '<provider>:<model>' "
            f"(e.g. 'anthropic:claude-sonnet-4-6', 'openai:gpt-4.1', 'scripted:<script name>'); "
            f"known providers: {', '.join(known)}. Name your own with "
            "durable_agents.register_provider(name, factory) before the agent is defined, "
            f"or an entry point in the {ENTRY_POINT_GROUP!r} group"
        )


class ProviderRegistry:
    """One provider instance per kind, built lazily in the worker process.

    SDK clients are created on first use, so API keys are read from the
    worker's environment and never travel through Temporal.
    """

    def __init__(
        self, overrides: Mapping[str, ModelProvider] | None = None, budgets: RateLimiter | None = None
    ) -> None:
        self._providers: dict[str, ModelProvider] = dict(overrides or {})
        self.budgets = budgets
        """The worker's rate-limit budgets (``build_worker(budgets=…)``); None: calls are sent at once."""
        for name, provider in self._providers.items():
            _remember(provider, name)

    def names(self) -> list[str]:
        return known_providers(self._providers)

    def get(self, provider: str) -> ModelProvider:
        if provider not in self._providers:
            self._providers[provider] = _build(provider, self.names())
            _remember(self._providers[provider], provider)
        return self._providers[provider]


def _remember(provider: object, name: str) -> None:
    try:
        _names[provider] = name
    except TypeError:  # not weakly referable: its class name will do
        pass


_BUILTIN_CLASSES = {
    "scripted": ("durable_agents.providers.scripted", "ScriptedProvider"),
    "anthropic": ("durable_agents.providers.anthropic_messages", "AnthropicProvider"),
    "openai": ("durable_agents.providers.openai_chat", "OpenAIProvider"),
    "openai-responses": ("durable_agents.providers.openai_responses", "OpenAIResponsesProvider"),
}


def provider_label(provider: object) -> str:
    """What a failure calls ``provider``: the name a worker's registry knows it by (its model
    strings' prefix), else its class's name."""
    try:
        known = _names.get(provider)
    except TypeError:
        known = None
    return known or type(provider).__name__


def preload(providers: Iterable[str]) -> None:
    """Import the SDKs of these built-in providers now: ``import anthropic`` alone takes
    seconds of CPU, and done by a worker's first model call it would stall the worker's
    event loop (every other run's steps and heartbeats) that long. Keys are still read
    at the first call."""
    for provider in providers:
        if provider in _BUILTIN_CLASSES:
            import_module(_BUILTIN_CLASSES[provider][0])


def _build(provider: str, known: list[str]) -> ModelProvider:
    if provider in _BUILTIN_CLASSES:
        module, name = _BUILTIN_CLASSES[provider]
        built: ModelProvider = getattr(import_module(module), name)()
        return built
    if provider in _registered:
        return _registered[provider]()
    entry = _entry_point_names().get(provider)
    if entry is not None:
        loaded = entry.load()
        return loaded() if callable(loaded) else loaded
    raise ConfigurationError(
        f"this worker has no provider {provider!r}; known: {', '.join(known)}. Pass it to "
        "build_worker(providers={...}), register_provider(), or an entry point"
    )
