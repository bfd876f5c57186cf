"""Evaluate a changed agent against recorded runs: replay without side effects, batches, a report.

    from durable_agents.replay import ReplayPolicy, replay

    report = await replay(client, ["chat-1", "chat-2"], against=booker_v2)   # an in-process replay worker
    print(report.table())
    assert report.over("0") is None, report.table()

Each recorded session is driven again from its first user message (or ``from_step``) by
the changed agent, in a new session ``<source>.replay-<tag>``; tool calls are answered
from the recording (:class:`ReplayPolicy`), so no tool with side effects runs unless you
name it. The batch is one Temporal workflow with a child run per session (workers may be
killed: nothing finished is redone). ``AgentClient.replay`` does the same with replay
workers running elsewhere (``durable-agents replay-worker``); see docs/how-to/replay.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.dataset import (
    DatasetRecordings,
    Recordings,
    StoreRecordings,
    export_sessions,
    read_dataset,
)
from durable_agents.checkpoint.fork import Patch
from durable_agents.checkpoint.replay import MatchFn, RecordedCall, ReplayCall, new_tag
from durable_agents.checkpoint.replay_report import ReplayReport, Scorer, SessionReplay
from durable_agents.client.client import AgentClient
from durable_agents.replay.model import RECORDED_MODEL, RecordedModel
from durable_agents.replay.policy import ReplayPolicy, replay_agent
from durable_agents.replay.worker import ReplayBatchPlugin, build_batch_worker, build_replay_worker


async def replay(
    client: AgentClient,
    sessions: Sequence[str] | None = None,
    *,
    against: Agent,
    policy: ReplayPolicy | None = None,
    recordings: Recordings | None = None,
    tag: str | None = None,
    from_step: int = 0,
    model: str | None = None,
    concurrency: int = 8,
    scorers: Mapping[str, Scorer] | None = None,
    **worker_options: Any,
) -> ReplayReport:
    """Replay ``sessions`` (default: every session of ``recordings``, which must then be
    given) against ``against`` with a replay worker in this process, on a task queue of the
    batch's own (``<client's queue>.replay-<tag>``); the report once every session is done.
    ``worker_options`` go to :func:`build_replay_worker` (e.g. ``providers=``)."""
    if sessions is None:
        if recordings is None:
            raise ValueError("name the sessions to replay, or give recordings= to replay all of them")
        sessions = recordings.session_ids()
    tag = tag or new_tag()
    queue = f"{client.task_queue}.replay-{tag}"
    worker = build_replay_worker(
        client.temporal, against=against, store=client.store, task_queue=queue, recordings=recordings,
        policy=policy, **worker_options,
    )  # fmt: skip
    async with worker:
        return await client.replay(
            sessions, agent=against.name, task_queue=queue, tag=tag, from_step=from_step, model=model,
            concurrency=concurrency, recordings=recordings, scorers=scorers,
        )  # fmt: skip


async def fork_batch(
    client: AgentClient,
    sessions: Sequence[str],
    *,
    from_step: int,
    patch: Patch | None = None,
    model: str | None = None,
    tag: str | None = None,
    concurrency: int = 8,
    scorers: Mapping[str, Scorer] | None = None,
) -> ReplayReport:
    """Fork ``sessions`` at ``from_step`` (patched, or with another ``model``) and run the
    forks on the client's task queue (the regular workers: live tools, as any fork's run),
    the batch workflow on a batch worker in this process; the report compares each fork
    with its source."""
    tag = tag or new_tag()
    queue = f"{client.task_queue}.batch-{tag}"
    async with build_batch_worker(client.temporal, store=client.store, task_queue=queue):
        return await client.fork_batch(
            sessions, from_step=from_step, batch_task_queue=queue, patch=patch, model=model, tag=tag,
            concurrency=concurrency, scorers=scorers,
        )  # fmt: skip


__all__ = [
    "RECORDED_MODEL",
    "DatasetRecordings",
    "MatchFn",
    "RecordedCall",
    "RecordedModel",
    "ReplayBatchPlugin",
    "ReplayCall",
    "ReplayPolicy",
    "ReplayReport",
    "Scorer",
    "SessionReplay",
    "StoreRecordings",
    "build_batch_worker",
    "build_replay_worker",
    "export_sessions",
    "fork_batch",
    "read_dataset",
    "replay",
    "replay_agent",
]
