"""The public API: what ``durable_agents`` exports is exactly what its public modules offer."""

from __future__ import annotations

import importlib
import inspect

import pytest

import durable_agents
from durable_agents import errors
from durable_agents.checkpoint import errors as checkpoint_errors

PUBLIC_MODULES = ["client.client", "client.connection", "client.result", "errors", "plugin", "worker"]
"""Modules whose ``__all__`` is part of the top-level API."""
DEFINITION_NAMES = {
    "Agent",
    "Tool",
    "ToolContext",
    "tool",
    "ApprovalDecision",
    "PendingApproval",
    "Patch",
    "CheckpointStatus",
    "FinishReason",
    "Message",
    "TextPart",
    "ImagePart",
    "DocumentPart",
    "OpaquePart",
    "ToolCall",
    "Usage",
    "ScriptedToolCall",
    "ScriptedTurn",
    "register_script",
    "ModelSettings",
    "UsageLimits",
    "ModelPrice",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "register_provider",
    "MCPServerStdio",
    "MCPServerHTTP",
    "Hooks",
    "Veto",
    "Rewrite",
    "EncryptionCodec",
    "EncryptionKeyError",
    "KeepLastTurns",
    "TokenBudget",
    "SummarizeOlder",
    "ReplayPolicy",
    "ReplayReport",
    "Budget",
    "BudgetCall",
    "BudgetExceeded",
    "FairShare",
    "RateLimiter",
}
"""Names defined in the layers below that the top level re-exports."""


def test_all_is_the_union_of_the_public_modules_and_the_definitions():
    offered = {
        name for module in PUBLIC_MODULES for name in importlib.import_module(f"durable_agents.{module}").__all__
    }
    assert set(durable_agents.__all__) == offered | DEFINITION_NAMES
    assert len(durable_agents.__all__) == len(set(durable_agents.__all__))


def test_every_export_resolves_to_its_definition():
    for name in durable_agents.__all__:
        value = getattr(durable_agents, name)
        module = importlib.import_module(durable_agents._EXPORTS[name])
        assert value is getattr(module, name), name
    assert set(durable_agents._EXPORTS) == set(durable_agents.__all__)
    assert set(durable_agents.__all__) <= set(dir(durable_agents))


def test_every_error_class_is_exported():
    defined = {
        name
        for mod in (errors, checkpoint_errors)
        for name, obj in vars(mod).items()
        if inspect.isclass(obj) and issubclass(obj, Exception) and not name.startswith("_")
    }
    assert defined <= set(errors.__all__) <= set(durable_agents.__all__)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        durable_agents.Nope  # noqa: B018


@pytest.mark.parametrize(
    "package",
    [
        "durable_agents.checkpoint",
        "durable_agents.checkpoint.stores",
        "durable_agents.testing",
        "durable_agents.workflows",
        "durable_agents.activities",
    ],
)
def test_subpackage_exports_resolve(package: str):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
