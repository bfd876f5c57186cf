"""Loading agents named on the command line as ``module:attr``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.errors import ConfigurationError


def load_agents(spec: str) -> list[Agent]:
    """``pkg.module:attr`` where attr is an Agent or a list of Agents."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"--agent {spec!r}: write it as module:attribute, e.g. myapp.agents:booker")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigurationError(f"--agent {spec!r}: cannot import {module_name!r} ({e})") from e
    value = getattr(module, attr, None)
    agents = value if isinstance(value, (list, tuple)) else [value]
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise ConfigurationError(f"--agent {spec!r}: {attr!r} in {module_name} is not an Agent (or a list of Agents)")
    return list(agents)
