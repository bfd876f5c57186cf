"""The activities of a replay or fork batch: plan one session's replay, keep each run's input.

They run on the worker that holds the batch (``durable_agents.replay``'s worker), which
holds the store the replays are written to and the recordings they are read from (the
same store, or a dataset file). Names are stable: never rename them after deploy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.dataset import Recordings, require
from durable_agents.checkpoint.errors import DurableAgentsError, FailureType
from durable_agents.checkpoint.fork import Patch, fork
from durable_agents.checkpoint.format import CheckpointStatus, FormatModel
from durable_agents.checkpoint.replay import input_groups, replay_plan, step_end
from durable_agents.checkpoint.stores.base import CheckpointStore

PLAN_SESSION_REPLAY = "plan_session_replay"
KEEP_REPLAY_INPUT = "keep_replay_input"

T = TypeVar("T")
BatchMode = Literal["replay", "fork"]


class PlanReplayInput(FormatModel):
    mode: BatchMode = "replay"
    source_session_id: str
    target_session_id: str
    from_step: int = 0
    patch: dict[str, Any] | None = None
    """Fork mode: the patch (``Patch`` as JSON) applied to the fork."""


class PlanReplayOutput(FormatModel):
    runs: int
    """How many runs the replay makes in all (run ``i`` sends the source's ``i``-th input)."""
    first: int = 0
    """The first run still to make (a batch restarted after some of this session's runs)."""
    agent: str | None = None
    """Fork mode: the agent the fork runs (the source's)."""


class KeepInputInput(FormatModel):
    source_session_id: str
    target_session_id: str
    from_step: int = 0
    run: int
    token: str


class ReplayActivities:
    """Bound to the store replays are written to and the recordings they are read from."""

    def __init__(self, store: CheckpointStore, recordings: Recordings) -> None:
        self.store, self.recordings = store, recordings

    def all(self) -> list[Callable[..., Any]]:
        return [self.plan_session_replay, self.keep_replay_input]

    @activity.defn(name=PLAN_SESSION_REPLAY)
    async def plan_session_replay(self, inp: PlanReplayInput) -> PlanReplayOutput:
        """Seed the replay (or make the fork) unless an earlier batch did; say which runs remain."""
        if inp.mode == "fork":
            return await _typed(self._plan_fork, inp)
        return await _typed(self._plan_replay, inp)

    def _plan_replay(self, inp: PlanReplayInput) -> PlanReplayOutput:
        source = require(self.recordings, inp.source_session_id)
        plan = replay_plan(source, inp.target_session_id, inp.from_step)
        runs = len(plan.runs)
        header = self.store.load_header(inp.target_session_id)
        if header is None:
            if plan.seed is not None:
                self.store.save(plan.seed)
            return PlanReplayOutput(runs=runs)
        # made by an earlier batch of this tag: go on where it stopped, never again from the start
        messages = self.store.load_messages(inp.target_session_id, 0, header.message_count)
        start = step_end(messages, inp.from_step) if inp.from_step else 0
        sent = len(input_groups(messages, start)) + (1 if inp.from_step else 0)
        finished = header.status == CheckpointStatus.FINISHED
        return PlanReplayOutput(runs=runs, first=min(sent if finished else max(sent - 1, 0), runs))

    def _plan_fork(self, inp: PlanReplayInput) -> PlanReplayOutput:
        header = self.store.load_header(inp.target_session_id)
        if header is None:
            made = fork(
                self.store,
                inp.source_session_id,
                inp.from_step,
                Patch.model_validate(inp.patch or {}),
                inp.target_session_id,
            )
            return PlanReplayOutput(runs=1, agent=made.checkpoint.agent)
        done = header.status != CheckpointStatus.IN_PROGRESS  # an earlier batch of this tag ran it
        return PlanReplayOutput(runs=1, first=1 if done else 0, agent=header.agent)

    @activity.defn(name=KEEP_REPLAY_INPUT)
    async def keep_replay_input(self, inp: KeepInputInput) -> str | None:
        """Keep run ``run``'s input (the source's input of that run) in the store under
        ``token``, for the run to read: the batch's history holds no transcript. None: the
        run sends no input (a replay from a step resumes its seeded session first)."""

        def keep() -> str | None:
            source = require(self.recordings, inp.source_session_id)
            plan = replay_plan(source, inp.target_session_id, inp.from_step)
            messages = plan.runs[inp.run]
            if not messages:
                return None
            self.store.put_run_input(inp.target_session_id, inp.token, messages)
            return inp.token

        return await _typed(keep)


async def _typed(fn: Callable[..., T], *args: Any) -> T:
    """``fn`` off the event loop; our typed errors cross Temporal as their type, not retried
    unless they are retryable (a store outage)."""
    try:
        return await asyncio.to_thread(fn, *args)
    except DurableAgentsError as e:
        raise ApplicationError(
            e.message, *e.failure_details(), type=e.failure_type, non_retryable=not e.retryable
        ) from e


__all__ = [
    "KEEP_REPLAY_INPUT",
    "PLAN_SESSION_REPLAY",
    "BatchMode",
    "FailureType",
    "KeepInputInput",
    "PlanReplayInput",
    "PlanReplayOutput",
    "ReplayActivities",
]
