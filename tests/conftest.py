"""Shared fixtures: one real Temporal dev server per test session, fresh task
queues per test, real SQLite stores in tmp dirs."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents import Agent, AgentClient, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.connection import data_converter
from durable_agents.devserver import SEARCH_ATTRIBUTES, find_temporal_binary


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
        dev_server_extra_args=["--dynamic-config-value", "history.transferProcessorMaxPollRPS=100000"],
    ) as environment:
        yield environment


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
