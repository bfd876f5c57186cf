"""Import paths of modules that moved, kept working for one release with a
``DeprecationWarning`` naming the new path (docs/design.md §1).

``durable_agents.activities.definitions`` (and the other modules below) moved when what
users define got a package of its own (``durable_agents.agent``), the model providers
theirs (``durable_agents.providers``) and the client its (``durable_agents.client``). An old path imports the module at its new path:
the same module object, so classes and registries are shared, not copied.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "durable_agents.activities.definitions": "durable_agents.agent.agent",
    "durable_agents.activities.subagents": "durable_agents.agent.agent",
    "durable_agents.activities.tool_definitions": "durable_agents.agent.tools",
    "durable_agents.activities.schemas": "durable_agents.agent.schemas",
    "durable_agents.activities.hooks": "durable_agents.agent.hooks",
    "durable_agents.activities.mcp_servers": "durable_agents.agent.mcp",
    "durable_agents.activities.output": "durable_agents.agent.output",
    "durable_agents.activities.providers": "durable_agents.providers",
    "durable_agents.connection": "durable_agents.client.connection",
    "durable_agents.result": "durable_agents.client.result",
}
"""Old module path → new one; a path below a moved package (``…providers.base``) follows it."""


def new_path(old: str) -> str | None:
    """Where the module once imported as ``old`` lives now (None: it did not move)."""
    if old in MOVED:
        return MOVED[old]
    package = old.rpartition(".")[0]
    while package:
        if package in MOVED:
            return f"{MOVED[package]}.{old[len(package) + 1 :]}"
        package = package.rpartition(".")[0]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran already, at its new path."""


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds an old path as the module at its new one, after a ``DeprecationWarning``."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; import it from there (the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        spec = importlib.machinery.ModuleSpec(fullname, _Alias(new))
        return spec


def install() -> None:
    """Once per process: answer the old paths (``durable_agents/__init__`` calls it)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
