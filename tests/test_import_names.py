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
