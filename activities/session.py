"""Run start and end: load the session, apply the input, mark the outcome."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.contracts import (
    APPEND_INPUT,
    BEGIN_RUN,
    FINISH_RUN,
    AppendInputInput,
    AppendInputOutput,
    BeginRunInput,
    BeginRunOutput,
    FinishRunInput,
    RunState,
)
from activities.deps import ActivityDeps
from activities.transcript import new_input_after, pending_tool_calls, strip_system
from checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    FinishReason,
    Fingerprint,
    Message,
    RunConfig,
)


class SessionActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=BEGIN_RUN)
    async def begin_run(self, inp: BeginRunInput) -> BeginRunOutput:
        agent = self.deps.agent(inp.agent)
        config = agent.run_config(inp.model)
        fingerprint = agent.fingerprint(inp.model)
        return await self.deps.in_store(self._begin, inp, config, fingerprint)

    def _begin(self, inp: BeginRunInput, config: RunConfig, fp: Fingerprint) -> BeginRunOutput:
        store = self.deps.store
        header = store.load_header(inp.session_id)
        if header is None:
            return self._start_session(inp, config, fp)
        if header.status == CheckpointStatus.AWAITING_APPROVAL:
            raise ApplicationError(
                f"session {inp.session_id!r} is waiting for approval {header.approval_id}; "
                "approve or reject it before sending new input",
                header.approval_id,
                type="SessionAwaitingApprovalError",
                non_retryable=True,
            )
        messages = store.load_messages(inp.session_id, 0, header.message_count)
        if header.status == CheckpointStatus.FINISHED:
            return self._continue_session(header, messages, inp, config, fp)
        return self._resume_session(header, messages, inp, config, fp)

    def _start_session(self, inp: BeginRunInput, config: RunConfig, fp: Fingerprint) -> BeginRunOutput:
        messages = [Message.system(config.instructions)] if config.instructions else []
        run_start = len(messages)
        messages += strip_system(inp.input)
        header = CheckpointHeader(
            session_id=inp.session_id, agent=config.agent, message_count=len(messages),
            run_config=config, fingerprint=fp, run_start_index=run_start, run_start_step=0,
        )
        self.deps.store.append(header, 0, messages)
        state = RunState(message_count=len(messages), step_index=0, run_start_index=run_start)
        return BeginRunOutput(config=config, state=state)

    def _continue_session(
        self, header: CheckpointHeader, messages: list[Message], inp: BeginRunInput,
        config: RunConfig, fp: Fingerprint,
    ) -> BeginRunOutput:
        new = new_input_after(messages, inp.input)
        start = header.message_count
        updated = header.model_copy(update={
            "message_count": start + len(new), "status": CheckpointStatus.IN_PROGRESS,
            "finish_reason": None, "approval_id": None, "run_config": config,
            "fingerprint": fp, "run_start_index": start, "run_start_step": header.step_index,
            "agent": config.agent, "updated_at": None,
        })
        self.deps.store.append(updated, start, new)
        state = RunState(
            message_count=start + len(new), step_index=header.step_index, usage=header.usage,
            run_start_step=header.step_index, run_start_index=start, run_start_usage=header.usage,
        )
        return BeginRunOutput(config=config, state=state)

    def _resume_session(
        self, header: CheckpointHeader, messages: list[Message], inp: BeginRunInput,
        config: RunConfig, fp: Fingerprint,
    ) -> BeginRunOutput:
        run_start = header.run_start_index or 0
        started_with = [m for m in messages[run_start:] if m.role == "user"][: len(inp.input)]
        new = strip_system(inp.input)
        if new and [(m.role, m.content) for m in new] == [(m.role, m.content) for m in started_with]:
            new = []  # the same request sent again after a crash: a retry
        pending, _ = pending_tool_calls(messages)
        state = RunState(
            message_count=header.message_count, step_index=header.step_index, usage=header.usage,
            run_start_step=header.run_start_step or 0, run_start_index=run_start,
            pending_tool_calls=pending,
        )
        if pending or not new:
            return BeginRunOutput(config=config, state=state, queued_input=new)
        updated = header.model_copy(update={"message_count": header.message_count + len(new),
                                            "updated_at": None})
        self.deps.store.append(updated, header.message_count, new)
        state.message_count += len(new)
        return BeginRunOutput(config=config, state=state)

    @activity.defn(name=APPEND_INPUT)
    async def append_input(self, inp: AppendInputInput) -> AppendInputOutput:
        def write() -> int:
            header = self.deps.store.load_header(inp.session_id)
            assert header is not None
            if header.message_count >= inp.position + len(inp.messages):
                return header.message_count  # written before a crash
            updated = header.model_copy(update={
                "message_count": inp.position + len(inp.messages), "updated_at": None})
            self.deps.store.append(updated, inp.position, inp.messages)
            return updated.message_count

        return AppendInputOutput(message_count=await self.deps.in_store(write))

    @activity.defn(name=FINISH_RUN)
    async def finish_run(self, inp: FinishRunInput) -> None:
        def write() -> None:
            header = self.deps.store.load_header(inp.session_id)
            assert header is not None
            status = (CheckpointStatus.IN_PROGRESS if inp.finish_reason == FinishReason.ABORTED
                      else CheckpointStatus.FINISHED)
            updated = header.model_copy(update={
                "status": status, "finish_reason": inp.finish_reason, "updated_at": None})
            self.deps.store.append(updated, header.message_count, [])

        await self.deps.in_store(write)
