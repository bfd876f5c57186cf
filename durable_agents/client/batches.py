"""Batches from the client: start a ``ReplayBatch`` workflow, wait for it, build its report.

The batch runs on workers (replay workers for a replay, a batch worker for forks); the
client only starts it, follows it and reads the store for the report: the sources from
their recordings (the store or a dataset file), the new sessions from the store, and
runs your scoring functions here, where they are defined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from durable_agents.checkpoint.dataset import Recordings, require
from durable_agents.checkpoint.errors import CheckpointNotFoundError, ConfigurationError, DurableAgentsError
from durable_agents.checkpoint.replay import REPLAY_MARK, check_tag, new_tag
from durable_agents.checkpoint.replay_report import ReplayPair, ReplayReport, Scorer, build_report, working_seconds
from durable_agents.checkpoint.stores.base import CheckpointStore
from durable_agents.workflows.replay import (
    MAX_BATCH_SESSIONS,
    REPLAY_BATCH_WORKFLOW,
    BatchItem,
    BatchMode,
    ReplayBatchInput,
    ReplayBatchOutput,
    SessionOutcome,
)

FORK_MARK = ".fork-"


@dataclass
class Batch:
    """A started batch: its tag, what it does, and its workflows (one per MAX_BATCH_SESSIONS sessions)."""

    tag: str
    mode: BatchMode
    items: list[BatchItem]
    handles: list[WorkflowHandle[Any, ReplayBatchOutput]]

    async def outcomes(self) -> list[SessionOutcome]:
        found: list[SessionOutcome] = []
        for handle in self.handles:
            try:
                found += (await handle.result()).outcomes
            except WorkflowFailureError as e:
                raise DurableAgentsError(f"batch workflow {handle.id} failed: {e.cause or e}") from e
        return found

    async def progress(self) -> tuple[int, int]:
        """(sessions done, sessions in all) over the batch's workflows."""
        from durable_agents.workflows.replay import BatchProgress

        done = 0
        for handle in self.handles:
            progress = await handle.query("progress", result_type=BatchProgress)
            done += progress.done
        return done, len(self.items)


def target_id(mode: BatchMode, source: str, tag: str) -> str:
    return f"{source}{REPLAY_MARK if mode == 'replay' else FORK_MARK}{check_tag(tag)}"


def batch_workflow_id(tag: str, part: int) -> str:
    return f"replay-batch-{tag}" if part == 0 else f"replay-batch-{tag}-{part}"


async def start_batch(
    temporal: Client,
    store: CheckpointStore,
    sources: Sequence[str],
    *,
    mode: BatchMode,
    task_queue: str,
    recordings: Recordings,
    agent: str | None = None,
    tag: str | None = None,
    from_step: int = 0,
    patch: dict[str, Any] | None = None,
    model: str | None = None,
    concurrency: int = 8,
    run_task_queue: str | None = None,
    search_attributes: bool | None = None,
) -> Batch:
    """Check the sources (an unknown one is refused, naming it, before anything starts) and
    start the batch's workflows on ``task_queue``. A tag already used goes on with that batch
    (the same workflows, or new ones that find what it made)."""
    tag = check_tag(tag or new_tag())
    names = list(dict.fromkeys(sources))
    if not names:
        raise ConfigurationError("no sessions to replay: name some, or select them (--agent, --status, --since)")
    if concurrency < 1:
        raise ConfigurationError(f"concurrency {concurrency}: at least 1")
    for name in names:
        source = require(recordings, name)
        if from_step and len([m for m in source.messages if m.role == "assistant"]) < from_step:
            raise ConfigurationError(
                f"session {name!r} has fewer than {from_step} steps: it cannot start from step {from_step}"
            )
    items = [BatchItem(source_session_id=s, target_session_id=target_id(mode, s, tag)) for s in names]
    handles = []
    for part, start in enumerate(range(0, len(items), MAX_BATCH_SESSIONS)):
        inp = ReplayBatchInput(
            tag=tag,
            mode=mode,
            items=items[start : start + MAX_BATCH_SESSIONS],
            agent=agent,
            from_step=from_step,
            patch=patch,
            model=model,
            concurrency=concurrency,
            run_task_queue=run_task_queue,
            store_id=store.store_id,
            store_location=store.location,
            search_attributes=search_attributes,
        )
        handles.append(
            await temporal.start_workflow(
                REPLAY_BATCH_WORKFLOW,
                inp,
                id=batch_workflow_id(tag, part),
                task_queue=task_queue,
                result_type=ReplayBatchOutput,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"{mode} of {len(inp.items)} sessions ({tag})",
            )
        )
    return Batch(tag=tag, mode=mode, items=items, handles=handles)


def _seconds(store: CheckpointStore, session_id: str) -> float | None:
    """The session's working time, from its kept saves (None: one save or none kept)."""
    try:
        entries = store.history(session_id)
    except NotImplementedError:
        return None
    return working_seconds(entries)


def batch_report(
    store: CheckpointStore,
    batch: Batch,
    outcomes: Sequence[SessionOutcome],
    recordings: Recordings,
    scorers: Mapping[str, Scorer] | None = None,
    *,
    timed_sources: bool = True,
) -> ReplayReport:
    """The batch's report: each source (from ``recordings``) against its new session (from
    ``store``). ``timed_sources``: the sources' durations are read from ``store``'s history
    (False for a dataset: unknown)."""
    said = {o.source_session_id: o for o in outcomes}
    pairs = []
    for item in batch.items:
        source = recordings.load(item.source_session_id)
        if source is None:
            raise CheckpointNotFoundError(
                f"no recorded session {item.source_session_id!r} in {recordings!r}", session_id=item.source_session_id
            )
        outcome = said.get(item.source_session_id)
        replay = store.load(item.target_session_id)
        error = outcome.error if outcome is not None and outcome.status == "failed" else None
        if outcome is not None and outcome.status == "awaiting-approval":
            error = "the run waits for an approval"
        pairs.append(
            ReplayPair(
                source=source,
                replay=replay,
                replay_session_id=item.target_session_id,
                error=error,
                source_seconds=_seconds(store, item.source_session_id) if timed_sources else None,
                replay_seconds=_seconds(store, item.target_session_id),
            )
        )
    return build_report(batch.tag, pairs, scorers)


__all__ = ["FORK_MARK", "Batch", "batch_report", "batch_workflow_id", "start_batch", "target_id"]
