"""A MkDocs hook: the package tree as the wheel installs it, for mkdocstrings.

``setup.py`` maps the repository's ``workflows/``, ``activities/`` and ``checkpoint/``
folders to ``durable_agents.workflows`` … (its ``MAPPED``, read here without running it). mkdocstrings
reads source files (and follows symlinks back to their folders), so it gets a copy of
the Python sources laid out as those import names
(``.durable-agents/api-source/durable_agents/…``), made when MkDocs loads this hook, before
any page is read. Nothing is imported and nothing is fetched."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / ".durable-agents" / "api-source"


def mapped_folders() -> tuple[str, ...]:
    """setup.py's ``MAPPED``: the top-level folders installed as ``durable_agents.<folder>``."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["MAPPED"]:
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError("setup.py has no MAPPED = (...) assignment")


def build_tree() -> Path:
    shutil.rmtree(TREE, ignore_errors=True)
    package = TREE / "durable_agents"
    copy = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "durable_agents", package, ignore=copy)
    for folder in mapped_folders():
        shutil.copytree(ROOT / folder, package / folder, ignore=copy)
    return TREE


build_tree()


def on_pre_build(**kwargs: object) -> None:
    """Copy again on each build, so `mkdocs serve` shows edited docstrings after a reload."""
    build_tree()
