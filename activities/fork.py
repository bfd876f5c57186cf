"""Fork as an activity, so a fork made from the CLI is recorded in Temporal."""

from __future__ import annotations

from temporalio import activity

from durable_agents.activities.contracts import FORK_SESSION, ForkSessionInput, ForkSessionOutput
from durable_agents.activities.deps import ActivityDeps
from durable_agents.checkpoint.fork import Patch, fork


class ForkActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=FORK_SESSION)
    async def fork_session(self, inp: ForkSessionInput) -> ForkSessionOutput:
        def run() -> ForkSessionOutput:
            made = fork(
                self.deps.store,
                inp.session_id,
                inp.from_step,
                Patch.model_validate(inp.patch),
                inp.new_session_id,
                entry=inp.entry,
            )
            return ForkSessionOutput(
                session_id=made.session_id,
                step=made.step,
                agent=made.checkpoint.agent,
                message_count=len(made.checkpoint.messages),
                entry=made.entry,
            )

        return await self.deps.in_store(run)
