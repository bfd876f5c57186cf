"""A Temporal application laid out like Temporal's samples (its own ``activities.py``
and ``workflows/`` package) imports durable-agents, builds a worker and runs an
agent: in-process, and through ``durable-agents worker --agent``, from the
editable install (``make``'s) and from the wheel installed into a fresh venv
(tests/installed_wheel.py; tests/test_wheel.py checks that install's contents).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents import AgentClient
from durable_agents.checkpoint import SqliteStore
from durable_agents.contract import SHAPES
from tests.conftest import session_id

ROOT = Path(__file__).resolve().parent.parent

AGENTS_PY = """
from pydantic import BaseModel

import activities  # the application's own modules, not ours
import workflows
from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool

assert activities.OWNER == "app" and workflows.OWNER == "app", "the app's modules were shadowed"


class Order(BaseModel):
    item: str


@tool(safe_to_retry=True)
async def lookup(args: Order, ctx: ToolContext) -> dict:
    return {"item": args.item, "in_stock": activities.in_stock(args.item)}


register_script("app-script", [
    ScriptedTurn(tool_calls=[ScriptedToolCall(name="lookup", arguments={"item": "tea"})]),
    ScriptedTurn(text="Tea is in stock."),
])
shop = Agent(name="shop", model="scripted:app-script", instructions="Check stock.", tools=[lookup])
"""

RUN_IN_PROCESS = """
import asyncio, sys, uuid
from durable_agents import AgentClient, build_worker, connect
from durable_agents.checkpoint import SqliteStore
from app.agents import shop

async def main(address, store_path):
    client = await connect(address)
    store = SqliteStore(store_path)
    queue = f"app-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, agents=[shop], store=store, task_queue=queue):
        result = await AgentClient(client, store, queue).send("shop", "Tea?", session_id=f"app-{uuid.uuid4().hex[:8]}")
    print(result.finish_reason, result.text, sep="|")

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def make_project(base: Path) -> Path:
    """An application whose top-level names are the ones Temporal's samples use."""
    project = base / "project"
    (project / "workflows").mkdir(parents=True)
    (project / "app").mkdir()
    (project / "activities.py").write_text('OWNER = "app"\n\n\ndef in_stock(item):\n    return item == "tea"\n')
    (project / "workflows" / "__init__.py").write_text('OWNER = "app"\n')
    (project / "checkpoint.py").write_text('OWNER = "app"\n')
    (project / "app" / "__init__.py").write_text("")
    (project / "app" / "agents.py").write_text(textwrap.dedent(AGENTS_PY))
    (project / "run_in_process.py").write_text(textwrap.dedent(RUN_IN_PROCESS))
    return project


def address_of(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


class Installs:
    """Where each install's ``python`` and ``durable-agents`` live: the checkout's editable
    install, or the wheel installed into a fresh venv (the session's ``installed`` fixture,
    tests/installed_wheel.py, built once and only when a test asks for it)."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    def __getitem__(self, install: str) -> Path:
        if install == "editable":
            return Path(sys.executable).parent
        return self._request.getfixturevalue("installed").bin


@pytest.fixture
def bins(request: pytest.FixtureRequest) -> Installs:
    return Installs(request)


def app_env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["PYTHONPATH"] = str(project)  # the application first on sys.path
    return env


@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_installed_names_do_not_shadow_the_apps_modules(install: str, bins: Installs, tmp_path: Path):
    project = make_project(tmp_path)
    probe = (
        "import activities, workflows, checkpoint, durable_agents, durable_agents.checkpoint.stores.sqlite;"
        "import durable_agents.workflows as w, durable_agents.activities as a;"
        "assert activities.OWNER == workflows.OWNER == checkpoint.OWNER == 'app';"
        "print(durable_agents.__file__, w.__name__, a.__name__)"
    )
    out = subprocess.run(
        [str(bins[install] / "python"), "-c", probe],
        cwd=project,
        env=app_env(project),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    where, workflows_name, activities_name = out.stdout.split()
    assert (workflows_name, activities_name) == ("durable_agents.workflows", "durable_agents.activities")
    if install == "wheel":
        assert "site-packages" in where and not where.startswith(str(ROOT))


@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_the_app_builds_a_worker_and_runs_an_agent(
    install: str, bins: Installs, tmp_path: Path, env: WorkflowEnvironment
):
    project = make_project(tmp_path)
    out = subprocess.run(
        [str(bins[install] / "python"), "run_in_process.py", address_of(env), str(tmp_path / "store.db")],
        cwd=project,
        env=app_env(project),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "stop|Tea is in stock."


@pytest.mark.parametrize("install", ["editable", "wheel"])
async def test_durable_agents_worker_loads_the_apps_agent(
    install: str, bins: Installs, tmp_path: Path, env: WorkflowEnvironment, task_queue: str
):
    project = make_project(tmp_path)
    store_path = tmp_path / "store.db"
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [
            str(bins[install] / "durable-agents"),
            "--address",
            address_of(env),
            "--task-queue",
            task_queue,
            "--store",
            f"sqlite:///{store_path}",
            "worker",
            "--agent",
            "app.agents:shop",
        ],
        cwd=project,
        env=app_env(project),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        store = SqliteStore(store_path)
        client = AgentClient(env.client, store, task_queue)
        try:
            result = await asyncio.wait_for(client.send("shop", "Tea?", session_id=session_id()), 90)
        except TimeoutError:
            pytest.fail(f"no outcome from the app's worker:\n{(tmp_path / 'worker.log').read_text()}")
        assert (result.finish_reason, result.text) == ("stop", "Tea is in stock.")
        assert [m.tool_name for m in result.messages if m.tool_name] == ["lookup"]
        assert '"in_stock":true' in result.messages[-2].content.replace(" ", "")
        store.close()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()


def test_the_wheel_ships_the_wire_contract(bins: Installs, tmp_path: Path):
    """The contract's reference page and every JSON Schema file are in the installed wheel,
    and they are the models' current schemas."""
    probe = (
        "import durable_agents.contract as c;"
        "assert c.PAGE.is_file(), c.PAGE;"
        "assert not c.stale_schemas(), c.stale_schemas();"
        "print(c.PAGE, len(list(c.SCHEMAS_DIR.glob('*.schema.json'))))"
    )
    out = subprocess.run(
        [str(bins["wheel"] / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    page, count = out.stdout.split()
    assert "site-packages" in page and not page.startswith(str(ROOT))
    assert int(count) == len(SHAPES)
