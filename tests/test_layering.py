"""Dependencies point one way (docs/design.md §1): ``durable_agents -> workflows -> activities
-> checkpoint``, and ``checkpoint`` imports neither Temporal nor an LLM SDK.

Every import counts, at module level, inside a function or under ``TYPE_CHECKING`` alike:
an import hidden in a function is still a dependency. ``make lint`` runs this file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("checkpoint", "activities", "workflows")

ALLOWED: dict[str, set[str]] = {
    "checkpoint": {"checkpoint"},
    "activities": {"activities", "checkpoint"},
    "workflows": {"workflows", "activities", "checkpoint"},
}
"""What each folder (installed as ``durable_agents.<folder>``) may import of ours."""
FORBIDDEN_OUTSIDE: dict[str, tuple[str, ...]] = {
    "checkpoint": ("temporalio", "anthropic", "openai", "mcp"),
}
"""Third-party packages a folder must not import: the store layer works without Temporal."""


def imports_of(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def layer_of(module: str) -> str | None:
    """``durable_agents.activities.x`` → ``activities``; any other ``durable_agents.*`` → ``durable_agents``."""
    parts = module.split(".")
    if parts[0] != "durable_agents":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in OURS else "durable_agents"


@pytest.mark.parametrize("folder", OURS)
def test_each_folder_imports_only_the_layers_below_it(folder: str):
    wrong = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, module in imports_of(path):
            layer = layer_of(module)
            if layer is not None and layer not in ALLOWED[folder]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            if module.split(".")[0] in FORBIDDEN_OUTSIDE.get(folder, ()):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert wrong == [], "imports that run back up:\n" + "\n".join(wrong)


def test_the_check_sees_a_hidden_import(tmp_path):
    sample = tmp_path / "tools.py"
    sample.write_text("def f():\n    from durable_agents.errors import PropagatingToolError\n")
    assert [layer_of(m) for _, m in imports_of(sample)] == ["durable_agents"]
