"""Shared fixtures: one real Temporal dev server per test session, fresh task
queues per test, real SQLite stores in tmp dirs.

The suite imports the installed names only (``durable_agents.checkpoint``…):
the repository's folders ``checkpoint/``, ``activities/``, ``workflows/`` would
also import under their bare names from the repository root, and a file
imported under two names is two modules with two sets of classes. The guard
below fails the session if anything imports a bare name.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents import Agent, AgentClient, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.connection import data_converter
from durable_agents.devserver import SEARCH_ATTRIBUTES, dynamic_config_args, find_temporal_binary

BARE_NAMES = frozenset({"checkpoint", "activities", "workflows"})
bare_imports: list[str] = []


class _BareNameGuard(importlib.abc.MetaPathFinder):
    """Records (and refuses) any import of a bare folder name."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in BARE_NAMES:
            bare_imports.append(fullname)
            raise ImportError(f"bare {fullname!r} imported: use durable_agents.{fullname}")
        return None


sys.meta_path.insert(0, _BareNameGuard())


def pytest_configure(config: pytest.Config) -> None:
    """The CLI tests press Ctrl-C (SIGINT) as a terminal does. A shell that starts this run
    in the background (``make test &``, a CI step without job control) ignores SIGINT, and
    every process it starts would inherit that: a CLI under test would then never see the
    Ctrl-C (as under ``nohup``, rightly). The run's children get the default instead."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


SERVER_FIXTURES = frozenset({"env", "skipping", "cli", "make_worker", "postgres_url", "bins", "installed"})
"""Fixtures that start a Temporal server, PostgreSQL or worker processes, or build and install the wheel."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tiers: a test that needs no server or process of its own is ``unit``
    (``pytest -m unit``); modules that start processes themselves say
    ``pytestmark = pytest.mark.integration``."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        needs_server = bool(SERVER_FIXTURES & set(getattr(item, "fixturenames", ())))
        needs_server = needs_server or "postgres" in params.values()
        if not needs_server and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.unit)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    leaked = sorted({*bare_imports, *(m for m in sys.modules if m.partition(".")[0] in BARE_NAMES)})
    if leaked:
        session.config.get_terminal_writer().line(f"bare module names imported: {leaked}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    from temporalio.common import SearchAttributeKey

    keys = {
        "Keyword": SearchAttributeKey.for_keyword,
        "Int": SearchAttributeKey.for_int,
    }
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_binary()),
        data_converter=data_converter(),
        search_attributes=[keys[t](name) for name, t in SEARCH_ATTRIBUTES.items()],
        dev_server_extra_args=dynamic_config_args(),  # as `durable-agents dev` runs it
    ) as environment:
        yield environment


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory):
    """durable-agents built into an sdist and a wheel and installed into a fresh venv
    (tests/installed_wheel.py): what a user has. Built once per test session."""
    from tests.installed_wheel import build_installed

    return build_installed(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server URL for the whole test session (tests/postgres_server.py);
    FAILS (never skips) without one."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("psycopg is not installed: run `make test` (or pip install -e '.[test]')")
    from tests.postgres_server import postgres_server

    try:
        server = postgres_server()
        url = server.__enter__()
    except RuntimeError as e:
        pytest.fail(str(e))
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def run_worker(env: WorkflowEnvironment, store: SqliteStore, task_queue: str):
    """``async with run_worker([agents]) as client:`` runs an in-process worker."""

    @contextlib.asynccontextmanager
    async def running(agents: Sequence[Agent], **kwargs) -> AsyncIterator[AgentClient]:
        worker = build_worker(env.client, agents=agents, store=store, task_queue=task_queue, **kwargs)
        async with worker:
            yield AgentClient(env.client, store, task_queue)

    return running


def session_id() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"
