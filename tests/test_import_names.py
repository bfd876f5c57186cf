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
