"""Import names that cannot collide with a Temporal application's own modules."""

from __future__ import annotations

import sys

import pytest

from tests import conftest


def test_no_bare_folder_module_is_loaded():
    assert not [m for m in sys.modules if m.partition(".")[0] in conftest.BARE_NAMES]


def test_the_guard_refuses_a_bare_name():
    with pytest.raises(ImportError, match="use durable_agents.checkpoint"):
        __import__("checkpoint")
    conftest.bare_imports.remove("checkpoint")


def test_the_repository_root_is_not_on_sys_path():
    root = str(conftest.Path(__file__).resolve().parent.parent)
    assert root not in [str(conftest.Path(p or ".").resolve()) for p in sys.path]


def test_light_faces_load_no_store_driver_and_no_llm_sdk():
    """The workflow contracts and the checkpoint format import only what their names promise."""
    import subprocess
    import sys

    probe = (
        "import sys, durable_agents.workflows.contracts, durable_agents.activities.contracts, "
        "durable_agents.checkpoint, durable_agents.checkpoint.fork, durable_agents.checkpoint.compare; "
        "print(sorted(m for m in ('sqlite3', 'psycopg', 'anthropic', 'openai', 'httpx', "
        "'durable_agents.checkpoint.stores.sqlite', 'durable_agents.providers.registry') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("durable_agents.activities.definitions", "durable_agents.agent.agent", "Agent"),
        ("durable_agents.activities.subagents", "durable_agents.agent.agent", "SubAgent"),
        ("durable_agents.activities.tool_definitions", "durable_agents.agent.tools", "ToolContext"),
        ("durable_agents.activities.providers.base", "durable_agents.providers.base", "ModelProvider"),
        ("durable_agents.activities.providers.scripted", "durable_agents.providers.scripted", "register_script"),
        ("durable_agents.connection", "durable_agents.client.connection", "connect"),
        ("durable_agents.result", "durable_agents.client.result", "RunResult"),
    ],
)
def test_a_moved_module_still_imports_from_its_old_path_with_a_warning(old: str, new: str, name: str):
    """One release of grace: the old path is the same module object (registries and classes
    are shared), and the warning names where it went."""
    import importlib
    import subprocess

    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        f"assert old is new and getattr(old, {name!r}) is getattr(new, {name!r})\n"
        "print([str(w.message) for w in seen if w.category is DeprecationWarning][-1])\n"
    )
    ran = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert f"{old} moved to {new}" in ran.stdout
    assert importlib.import_module(new).__name__ == new


def test_an_unknown_module_under_an_old_package_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        __import__("durable_agents.activities.no_such_module")
