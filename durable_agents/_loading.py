"""Loading what the command line names as ``module:attr``: agents, rate-limit budgets."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TypeVar

from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import ConfigurationError

T = TypeVar("T")


def load_agents(spec: str) -> list[Agent]:
    """``pkg.module:attr`` where attr is an Agent or a list of Agents."""
    return load_all("--agent", spec, Agent, "an Agent (or a list of Agents)", "myapp.agents:booker")


def load_all(flag: str, spec: str, kind: type[T], what: str, example: str) -> list[T]:
    """``pkg.module:attr`` where attr is one ``kind`` or a list of them (``what``, said in errors)."""
    value = load_object(flag, spec, example)
    found = value if isinstance(value, (list, tuple)) else [value]
    if not found or not all(isinstance(v, kind) for v in found):
        module_name, _, attr = spec.partition(":")
        raise ConfigurationError(f"{flag} {spec!r}: {attr!r} in {module_name} is not {what}")
    return list(found)


def load_object(flag: str, spec: str, example: str) -> object:
    """The attribute ``pkg.module:attr`` names (the current directory importable)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{flag} {spec!r}: write it as module:attribute, e.g. {example}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigurationError(f"{flag} {spec!r}: cannot import {module_name!r} ({e})") from e
    if not hasattr(module, attr):
        raise ConfigurationError(f"{flag} {spec!r}: {module_name} has no {attr!r}")
    return getattr(module, attr)
