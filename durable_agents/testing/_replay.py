"""``assert_replay``: a pytest helper that replays a dataset of recorded runs against your agent.

    async def test_the_new_prompt_keeps_behaviour(temporal_client):
        await assert_replay(temporal_client, "tests/fixtures/runs.jsonl", against=booker_v2)

The dataset is a file ``durable-agents export`` wrote (checkpoints, one a line); the replay
runs on a worker in this process with a temporary store, so the test needs a Temporal
server (``WorkflowEnvironment.start_local()``) and nothing else: no store of real runs,
no tool with side effects (calls are answered from the recording).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.dataset import DatasetRecordings
from durable_agents.checkpoint.replay_report import ReplayReport, Scorer
from durable_agents.checkpoint.stores import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.replay import ReplayPolicy, replay


async def assert_replay(
    client: Client | AgentClient,
    dataset: str | Path,
    against: Agent,
    *,
    sessions: Sequence[str] | None = None,
    policy: ReplayPolicy | None = None,
    max_changed: int | str = 0,
    from_step: int = 0,
    scorers: Mapping[str, Scorer] | None = None,
    **worker_options: Any,
) -> ReplayReport:
    """Replay ``dataset`` (every session, or ``sessions``) against ``against`` and raise
    ``AssertionError`` with the report's table (the changed sessions) when more sessions changed than
    ``max_changed`` allows (a count, or a share such as ``"10%"``); returns the report.

    ``client``: a Temporal client with our converter (``durable_agents.connect()``, or a
    test environment's), or an ``AgentClient`` whose store receives the replays (by
    default a temporary SQLite store, deleted afterwards)."""
    recordings = DatasetRecordings(dataset)
    if isinstance(client, AgentClient):
        report = await replay(
            client, sessions, against=against, policy=policy, recordings=recordings, from_step=from_step,
            scorers=scorers, **worker_options,
        )  # fmt: skip
    else:
        with tempfile.TemporaryDirectory(prefix="assert-replay-") as folder:
            store = SqliteStore(Path(folder) / "replays.db")
            try:
                agents = AgentClient(client, store, f"assert-replay-{uuid.uuid4().hex[:8]}")
                report = await replay(
                    agents, sessions, against=against, policy=policy, recordings=recordings, from_step=from_step,
                    scorers=scorers, **worker_options,
                )  # fmt: skip
            finally:
                store.close()
    over = report.over(max_changed)
    if over is not None:
        raise AssertionError(f"replay of {dataset} against {against.name}: {over}\n{report.table(changed_only=True)}")
    return report
