"""The model activity: read the transcript by reference, store the new turn.

A retried activity that finds its turn already stored returns it without
calling the provider, so a checkpointed model turn is never generated (or
paid for) twice, even when the crash fell between the store write and
Temporal's record of the activity's completion.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.contracts import MODEL_TURN, ModelTurnInput, ModelTurnOutput, call_ref
from durable_agents.activities.deps import ActivityDeps, heartbeating
from durable_agents.activities.providers.base import ModelRequest, ModelResponse
from durable_agents.activities.providers.registry import split_model_string
from durable_agents.activities.transcript import repaired_turn
from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import (
    CheckpointHeader,
    CheckpointStatus,
    FinishReason,
    Message,
    Role,
)


class ModelActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps

    @activity.defn(name=MODEL_TURN)
    async def model_turn(self, inp: ModelTurnInput) -> ModelTurnOutput:
        store = self.deps.store
        header = await self.deps.in_store(store.load_header, inp.session_id)
        if header is None or header.run_config is None or header.message_count < inp.position:
            raise ApplicationError(
                f"session {inp.session_id!r} has no checkpoint at message {inp.position}; "
                "the store was changed under a live run",
                type=FailureType.CHECKPOINT_NOT_FOUND,
                non_retryable=True,
            )
        if header.message_count > inp.position:
            stored = await self.deps.in_store(store.load_messages, inp.session_id, inp.position, inp.position + 1)
            if stored[0].role == Role.ASSISTANT:
                return ModelTurnOutput(
                    tool_calls=[call_ref(c) for c in stored[0].tool_calls or []],
                    arguments_in_store=True,
                    usage=header.usage,
                    replayed=True,
                )
        messages = await self.deps.in_store(store.load_messages, inp.session_id, 0, inp.position)
        async with heartbeating(max(header.run_config.model_heartbeat_seconds / 4, 0.25)):
            response = await self._generate(header, messages, inp)
        turn = repaired_turn(response.message)  # stored once, valid: never a retry (or a second paid call)
        usage = header.usage + response.usage
        grown = {"message_count": inp.position + 1, "step_index": inp.step, "usage": usage}
        if not turn.tool_calls and inp.finish_if_no_tools:
            updated = header.finished(FinishReason.STOP, **grown)
        else:
            updated = header.model_copy(
                update={**grown, "status": CheckpointStatus.IN_PROGRESS, "finish_reason": None, "updated_at": None}
            )
        await self.deps.in_store(store.append, updated, inp.position, [turn])
        return ModelTurnOutput(
            tool_calls=[call_ref(c) for c in turn.tool_calls or []], arguments_in_store=True, usage=usage
        )

    async def _generate(self, header: CheckpointHeader, messages: list[Message], inp: ModelTurnInput) -> ModelResponse:
        config = header.run_config
        assert config is not None
        provider_name, model = split_model_string(config.model)
        provider = self.deps.providers.get(provider_name)
        response = await provider.generate(
            ModelRequest(
                model=model,
                messages=messages,
                tools=config.tools,
                max_tokens=config.max_tokens,
                session_id=inp.session_id,
                step=inp.step,
            )
        )
        if response.message.role != Role.ASSISTANT:
            raise ApplicationError(
                f"{provider_name} returned a {response.message.role} turn, not an assistant turn",
                type=FailureType.MODEL_PROVIDER_MALFORMED_REPLY,
                non_retryable=True,
            )
        return response
