"""Workers for batches: a replay worker (the changed agent, answered from recordings) and a
batch worker (the batch workflow alone, for forks run by the regular workers).

A replay worker serves its own task queue: its agents keep their names (a report
compares like with like), so they must not share a queue with the production workers
that run the unchanged agents. Start as many as you like on one queue (``durable-agents
replay-worker``), on machines sharing the store: the batch's sessions spread over them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from durable_agents.activities.replay import ReplayActivities
from durable_agents.agent.agent import Agent
from durable_agents.checkpoint.dataset import Recordings, StoreRecordings
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.plugin import DurableAgentsPlugin
from durable_agents.providers.base import ModelProvider
from durable_agents.replay.model import RECORDED_PROVIDER, RecordedModel
from durable_agents.replay.policy import ReplayPolicy, replay_agent
from durable_agents.workflows.replay import ReplayBatchWorkflow

REPLAY_PLUGIN_NAME = "durable_agents.ReplayBatchPlugin"


class ReplayBatchPlugin(SimplePlugin):
    """The ``ReplayBatch`` workflow and its activities, bound to ``store`` (where replays
    and forks are written) and ``recordings`` (where sources are read; default: the store)."""

    def __init__(self, store: CheckpointStore, recordings: Recordings | None = None) -> None:
        acts = ReplayActivities(store, recordings or StoreRecordings(store))
        super().__init__(REPLAY_PLUGIN_NAME, activities=acts.all(), workflows=[ReplayBatchWorkflow])


def build_replay_worker(
    client: Client,
    *,
    against: Agent | Sequence[Agent],
    store: CheckpointStore,
    task_queue: str,
    recordings: Recordings | None = None,
    policy: ReplayPolicy | None = None,
    providers: Mapping[str, ModelProvider] | None = None,
    allow_memory_store: bool = False,
    **options: Any,
) -> Worker:
    """A worker for replays of ``against`` (the changed agent or agents) on ``task_queue``:
    each agent wrapped by :func:`replay_agent` under ``policy``, plus the batch workflow.
    ``recordings``: where the sources are (default: ``store``; a
    ``DatasetRecordings(path)`` replays a dataset file). ``providers``: model providers by
    prefix, besides ``recorded:`` (the source's own turns, ``RECORDED_MODEL``). ``options`` go to temporalio's
    ``Worker`` (e.g. ``max_concurrent_activities``). The client must carry our converter
    (``durable_agents.connect``), as for ``build_worker``."""
    agents = [against] if isinstance(against, Agent) else list(against)
    sources = recordings or StoreRecordings(store)
    wrapped = [replay_agent(a, store=store, recordings=sources, policy=policy) for a in agents]
    models = {RECORDED_PROVIDER: RecordedModel(sources), **(providers or {})}
    ours = DurableAgentsPlugin(agents=wrapped, store=store, providers=models, allow_memory_store=allow_memory_store)
    # build_worker's settings for runs (durable_agents.worker): a dead worker's runs move on in seconds
    options.setdefault("max_heartbeat_throttle_interval", timedelta(seconds=1))
    options.setdefault("sticky_queue_schedule_to_start_timeout", timedelta(seconds=5))
    options.setdefault("graceful_shutdown_timeout", timedelta(seconds=10))
    plugins = [ours, *options.pop("plugins", ()), ReplayBatchPlugin(store, sources)]
    return _worker(client, task_queue, plugins, options)


def _worker(client: Client, task_queue: str, plugins: list[Any], options: dict[str, Any]) -> Worker:
    with warnings.catch_warnings():
        # a client connected with DurableAgentsPlugin() hands it to the worker too (harmless twice)
        warnings.filterwarnings("ignore", message=r"The same plugin type .*DurableAgentsPlugin")
        return Worker(client, task_queue=task_queue, plugins=plugins, **options)


def build_batch_worker(client: Client, *, store: CheckpointStore, task_queue: str) -> Worker:
    """A worker for the batch workflow alone (``fork --batch``: its runs go to the regular
    workers' queue). It must have a task queue of its own: it runs no agent."""
    return _worker(client, task_queue, [DurableAgentsPlugin(), ReplayBatchPlugin(store)], {})


__all__ = ["ReplayBatchPlugin", "build_batch_worker", "build_replay_worker"]
