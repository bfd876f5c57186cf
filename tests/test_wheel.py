"""durable-agents as a user installs it (tests/installed_wheel.py): the sdist, the wheel built
from it, installed into a fresh venv. What an editable install cannot show: every module and
data file is in the wheel, every module imports from it, every CLI command starts from it.
The demo and a replay run from it in tests/test_demo.py, the docs' snippets in tests/test_readme.py."""

from __future__ import annotations

import json
import subprocess
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.installed_wheel import MAPPED, Installed, expected_data_files, expected_modules

pytestmark = pytest.mark.integration


def run_installed(installed: Installed, code: str, tmp_path, stdin: str = "") -> str:
    """Python code run by the install's interpreter, isolated (-I: no PYTHONPATH, no user
    site, not the script's folder) in a folder outside the checkout; its stdout."""
    done = subprocess.run(
        [str(installed.python), "-I", "-c", code],
        cwd=tmp_path,
        env=installed.env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_build_says_nothing_is_left_out(installed):
    # setuptools warns "Package '…' is absent from the `packages` configuration" for a folder
    # it would leave out of the wheel, and SetuptoolsDeprecationWarning for configuration that
    # a later setuptools refuses
    for warning in ("absent from the `packages` configuration", "Package would be ignored", "Deprecat"):
        assert warning not in installed.build_log


def test_the_wheel_holds_every_module_and_data_file(installed):
    names = zipfile.ZipFile(installed.wheel).namelist()
    modules = set()
    for name in names:
        if name.endswith(".py"):
            parts = name.removesuffix(".py").split("/")
            modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert expected_modules() - modules == set(), "modules of the checkout missing from the wheel"
    assert "durable_agents.replay" in modules  # the package a wheel once lacked
    data = {name.removeprefix("durable_agents/") for name in names if not name.endswith(".py")}
    assert expected_data_files() - data == set(), "data files missing from the wheel"
    # one import namespace: nothing installs as a bare `workflows`/`activities`/`checkpoint`
    assert {name.split("/")[0] for name in names} == {"durable_agents", "durable_agents-0.1.0.dist-info"}


def test_the_sdist_builds_the_wheel_and_holds_no_test_suite(installed):
    with tarfile.open(installed.sdist) as sdist:
        top = {member.name.split("/")[1] for member in sdist.getmembers() if member.name.count("/") >= 1}
    assert {"setup.py", "pyproject.toml", "README.md", "durable_agents", *MAPPED} <= top
    assert "tests" not in top


def test_every_module_imports_from_the_install_with_the_declared_dependencies_met(installed, tmp_path):
    found = json.loads(
        run_installed(
            installed,
            """
import importlib, importlib.metadata, importlib.util, json, sys
from packaging.requirements import Requirement
from packaging.version import Version

files = {}
for name in json.loads(sys.stdin.read()):
    if name.endswith(".__main__"):  # imported, it would run its command: found, not run
        files[name] = importlib.util.find_spec(name).origin
        continue
    files[name] = importlib.import_module(name).__file__
unmet = []
for text in importlib.metadata.requires("durable-agents"):
    requirement = Requirement(text)
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue  # an extra's requirement
    try:
        version = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        unmet.append(text)
        continue
    if not requirement.specifier.contains(Version(version), prereleases=True):
        unmet.append(f"{text} (found {version})")
print(json.dumps({"files": files, "unmet": unmet}))
""",
            tmp_path,
            stdin=json.dumps(sorted(expected_modules())),
        )
    )
    site = str(installed.site_packages)
    elsewhere = {name: path for name, path in found["files"].items() if path and not path.startswith(site)}
    assert elsewhere == {}, "imported from outside the installed wheel"
    assert found["unmet"] == []


def test_the_public_names_and_data_files_work_from_the_install(installed, tmp_path):
    out = run_installed(
        installed,
        """
from durable_agents import ReplayPolicy, Agent, AgentClient
from durable_agents.testing import assert_replay
from durable_agents.contract import PAGE, stale_schemas
from durable_agents.web.app import STATIC
# the shipped JSON Schemas are read and match the models they are made from
print(sorted(p.name for p in STATIC.iterdir()), stale_schemas(), PAGE.read_text()[:1])
""",
        tmp_path,
    )
    assert out.split() == ["['inbox.css',", "'inbox.js',", "'index.html']", "[]", "#"]


def cli_commands(installed: Installed, tmp_path) -> list[list[str]]:
    """Every command and sub-command of the installed CLI, as argv after ``durable-agents``."""
    return json.loads(
        run_installed(
            installed,
            """
import argparse, json
from durable_agents.cli import build_parser

def walk(parser, prefix):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + [name]
                yield from walk(sub, prefix + [name])

print(json.dumps(list(walk(build_parser(), []))))
""",
            tmp_path,
        )
    )


def test_every_cli_command_answers_help_from_the_install(installed, tmp_path):
    commands = cli_commands(installed, tmp_path)
    assert ["replay"] in commands and ["replay-worker"] in commands and ["demo"] in commands

    def help_of(command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(installed.cli), *command, "--help"],
            cwd=tmp_path,
            env=installed.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    with ThreadPoolExecutor(4) as pool:
        done = dict(zip((" ".join(c) for c in commands), pool.map(help_of, commands)))
    failed = {name: d.stdout + d.stderr for name, d in done.items() if d.returncode != 0}
    assert failed == {}
    for name, answer in done.items():
        assert answer.stdout.startswith(f"usage: durable-agents {name}"), answer.stdout
