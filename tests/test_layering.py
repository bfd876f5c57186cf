"""Dependencies point one way (docs/design.md §1): ``durable_agents -> workflows -> activities
-> agent -> providers -> checkpoint``; ``checkpoint`` imports neither Temporal nor an LLM SDK,
and ``providers`` nothing of ours above ``checkpoint``.

Every import counts, at module level, inside a function or under ``TYPE_CHECKING`` alike:
an import hidden in a function is still a dependency. ``make lint`` runs this file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("checkpoint", "providers", "agent", "activities", "workflows")
"""The layers, bottom first: each may import itself and those before it."""
FOLDERS = {
    "checkpoint": ROOT / "checkpoint",
    "providers": ROOT / "durable_agents" / "providers",
    "agent": ROOT / "durable_agents" / "agent",
    "activities": ROOT / "activities",
    "workflows": ROOT / "workflows",
}
"""Where each layer's source is (installed as ``durable_agents.<layer>``)."""

ALLOWED: dict[str, set[str]] = {layer: set(OURS[: i + 1]) for i, layer in enumerate(OURS)}
"""What each folder (installed as ``durable_agents.<folder>``) may import of ours."""
FORBIDDEN_OUTSIDE: dict[str, tuple[str, ...]] = {
    "checkpoint": ("temporalio", "anthropic", "openai", "mcp"),
    "providers": ("mcp",),
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
    for path in sorted(FOLDERS[folder].rglob("*.py")):
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


# -- the whole package: no import cycle, at most MAX_LEVELS levels -------------------------

MAX_LEVELS = 9
"""A folder (or a module directly under ``durable_agents/``) stands one level above the highest
of what it imports; the package as the wheel installs it has at most this many levels."""


def wheel_modules() -> dict[str, Path]:
    """Every module of the package as the wheel installs it: ``durable_agents.<...>`` → its file."""
    found = {}
    roots = {"durable_agents": ROOT / "durable_agents", **{f"durable_agents.{f}": ROOT / f for f in (
        "workflows", "activities", "checkpoint")}}  # fmt: skip
    for package, folder in roots.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours ``path`` imports, anywhere in it (``from pkg import mod`` names ``pkg.mod``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module in modules and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
            found |= subs or {node.module}
            if len(subs) < len(node.names):
                found.add(node.module)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph() -> dict[str, set[str]]:
    modules = wheel_modules()
    return {name: imported_modules(path, modules) - {name} for name, path in modules.items()}


def room_of(module: str) -> str:
    """A folder under ``durable_agents/`` is one room; so is each module directly in it."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_module_imports_itself_through_others():
    assert cycles(module_graph()) == []


def test_the_package_has_at_most_nine_levels():
    rooms: dict[str, set[str]] = {}
    for module, imported in module_graph().items():
        rooms.setdefault(room_of(module), set()).update(room_of(m) for m in imported)
    for room, imported in rooms.items():
        imported.discard(room)
    assert cycles(rooms) == [], "folders that import each other"
    levels: dict[str, int] = {}

    def level(room: str) -> int:
        if room not in levels:
            levels[room] = 1 + max((level(r) for r in rooms[room]), default=0)
        return levels[room]

    top = max(rooms, key=level)
    assert level(top) <= MAX_LEVELS, sorted(levels.items(), key=lambda kv: kv[1])


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
