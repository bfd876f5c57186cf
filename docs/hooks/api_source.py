"""A MkDocs hook: the package tree as the wheel installs it, for mkdocstrings.

``pyproject.toml`` maps the repository's ``workflows/``, ``activities/`` and ``checkpoint/``
folders to ``durable_agents.workflows`` … (``[tool.setuptools.package-dir]``). mkdocstrings
reads source files (and follows symlinks back to their folders), so it gets a copy of
the Python sources laid out as those import names
(``.durable-agents/api-source/durable_agents/…``), made when MkDocs loads this hook, before
any page is read. Nothing is imported and nothing is fetched."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / ".durable-agents" / "api-source"


def build_tree() -> Path:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(TREE, ignore_errors=True)
    package = TREE / "durable_agents"
    copy = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "durable_agents", package, ignore=copy)
    for name, folder in mapping.items():
        parts = name.split(".")
        if parts[0] == "durable_agents" and len(parts) == 2:
            shutil.copytree(ROOT / folder, package / parts[1], ignore=copy)
    return TREE


build_tree()


def on_pre_build(**kwargs: object) -> None:
    """Copy again on each build, so `mkdocs serve` shows edited docstrings after a reload."""
    build_tree()
