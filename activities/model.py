"""The model activity: read the transcript by reference, store the new turn.

A retried activity that finds its turn already stored returns it without
calling the provider, so a checkpointed model turn is never generated (or
paid for) twice, even when the crash fell between the store write and
Temporal's record of the activity's completion.
"""

from __future__ import annotations

import asyncio
import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities import metrics, tracing
from durable_agents.activities.approval_policy import decide_in_turn, store_turn
from durable_agents.activities.budget_wait import within_budget
from durable_agents.activities.context import build_context
from durable_agents.activities.contracts import (
    MODEL_TURN,
    ModelTurnInput,
    ModelTurnOutput,
    bounded,
    bounded_text,
    call_ref,
    call_views,
)
from durable_agents.activities.deps import ActivityDeps, asked_at, heartbeating
from durable_agents.activities.events import TurnStream, generate, turn_stream
from durable_agents.activities.tools import ToolActivities, run_in_turn, runs_in_turn
from durable_agents.activities.transcript import repaired_turn
from durable_agents.agent.hooks import run_hook
from durable_agents.agent.output import OUTPUT_TOOL, OutputCheck, check_turn, output_tool_spec
from durable_agents.checkpoint.context import turn_context
from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import (
    FORMAT_VERSION,
    CheckpointHeader,
    CheckpointStatus,
    FinishReason,
    Message,
    ModelSettings,
    Role,
    Usage,
)
from durable_agents.providers.base import ModelRequest, ModelResponse
from durable_agents.providers.registry import split_model_string


class ModelActivities:
    def __init__(self, deps: ActivityDeps) -> None:
        self.deps = deps
        self.tools = ToolActivities(deps)  # a local step's calls run in its model turn (run_in_turn)

    @activity.defn(name=MODEL_TURN)
    async def model_turn(self, inp: ModelTurnInput) -> ModelTurnOutput:
        with asked_at(inp.asked_at):  # (the time a gated call's grants are judged at)
            output = await self._model_turn(inp)
        if output.turn_position is not None:  # after a context summary: it was stored too
            output.appended += output.turn_position - inp.position
        return output

    async def _model_turn(self, inp: ModelTurnInput, *, raced: bool = False) -> ModelTurnOutput:
        store, asked = self.deps.store, inp
        # one read: the header and the messages this worker has not cached (O(1) per step)
        header, transcript = await self.deps.in_store(self.deps.transcript, inp.session_id)
        if header is None or header.run_config is None or header.message_count < inp.position:
            raise ApplicationError(
                f"session {inp.session_id!r} has no checkpoint at message {inp.position}; "
                "the store was changed under a live run",
                type=FailureType.CHECKPOINT_NOT_FOUND,
                non_retryable=True,
            )
        tracing.model_of(header.run_config)  # the turn's span: agent and model (when the worker traces)
        events = await turn_stream(self.deps, header, inp.session_id, inp.step)  # None unless the run streams
        config = header.run_config
        # every decision the stored transcript settles, in one call: where the turn goes, whether an
        # earlier attempt stored it, what to store first, what the request sends (docs/design.md §1)
        turn_at = turn_context(
            transcript,
            header.message_count,
            inp.position,
            instructions=config.instructions,
            policy=config.context,
            run_start=header.run_start_index,
            summary_at=header.context_summary,
            instructions_at=header.instructions_at,
        )
        if turn_at.stored is not None:
            stored = turn_at.stored
            moved = {"turn_position": turn_at.position} if turn_at.position != inp.position else {}
            inp = inp.model_copy(update={"position": turn_at.position})
            if events is not None and not events.turn_recorded:
                await events.stored(stored, Usage(), header.usage, replayed=True)
            check = self._check_output(header, stored)
            if check is not None:  # stored with what followed it, in one write
                return self._output_turn(check, header.usage, header, inp, replayed=True).model_copy(update=moved)
            output = _turn_output(stored, header.usage, replayed=True, **moved)
            return await self._run_calls(output, header, stored, inp)
        # (sealed messages without --store-encryption were refused as they were read: deps.transcript)
        started = time.perf_counter()
        async with heartbeating(max(header.run_config.model_heartbeat_seconds / 4, 0.25)):
            # an instructions change or a summary the context asks for is made and stored first
            context = await build_context(self.deps, header, turn_at, inp.step)
            header = context.header
            moved = {"turn_position": context.position} if context.position != inp.position else {}
            inp = inp.model_copy(update={"position": context.position})
            deadline = asyncio.timeout(_model_share(inp))  # a local step's attempt holds its calls' time too
            try:
                async with deadline:
                    response = await self._generate(header, context.messages, inp, events)
            except TimeoutError as e:
                if not deadline.expired():  # the provider's own TimeoutError
                    raise
                raise ApplicationError(  # retried, as the activity's own timeout would be
                    f"session {inp.session_id!r} step {inp.step}: the model did not answer within the model "
                    f"timeout ({config.model_timeout_seconds:g} s)",
                    type=FailureType.MODEL_PROVIDER_RETRYABLE,
                ) from e
        assert header.run_config is not None
        tracing.model_generated(response.usage, started)
        metrics.model_turn(header.run_config.agent, header.run_config.model, response.usage)
        turn = repaired_turn(response.message)  # stored once, valid: never a retry (or a second paid call)
        if context.window is not None:  # what it was sent, so the request can be rebuilt (show --as-sent)
            turn = turn.model_copy(update={"context": context.window})
        usage = header.usage + response.usage
        check = self._check_output(header, turn)
        if check is not None:
            written = self._output_header(header, inp, check, usage)
            if not await self.deps.in_store(store.append_new, written, inp.position, [turn, *check.extra]):
                return await self._stored_first(asked, raced)
            if events is not None:
                await events.stored(turn, response.usage, usage)
            return self._output_turn(check, usage, header, inp).model_copy(update=moved)
        grown = {
            "message_count": inp.position + 1,
            "step_index": inp.step,
            "usage": usage,
            "format_version": FORMAT_VERSION,  # the turn may carry parts, which format 1 has not
        }
        if not turn.tool_calls and inp.finish_if_no_tools:
            updated = header.finished(FinishReason.STOP, **grown)
        else:
            updated = header.model_copy(
                update={**grown, "status": CheckpointStatus.IN_PROGRESS, "finish_reason": None, "updated_at": None}
            )
        # the approval policy's approvals of the turn's gated calls are stored with it (one store call)
        decide = inp.decide_gated and bool(turn.tool_calls)
        approvals = await self.deps.in_store(store_turn, self.deps, updated, inp.position, turn, decide)
        if approvals is None:
            return await self._stored_first(asked, raced)
        if events is not None:
            await events.stored(turn, response.usage, usage)
        output = _turn_output(turn, usage, **moved)
        if approvals:
            output = output.model_copy(update={"policy_approved": approvals})
        return await self._run_calls(output, updated, turn, inp, decided=decide)

    async def _run_calls(
        self,
        output: ModelTurnOutput,
        header: CheckpointHeader,
        turn: Message,
        inp: ModelTurnInput,
        *,
        decided: bool = False,
    ) -> ModelTurnOutput:
        """A local step runs its turn's calls here, when it may (:func:`runs_in_turn`); first the
        approval policy approves its gated calls it may (``decided``: they were, with the turn)."""
        config, calls = header.run_config, turn.tool_calls or []
        assert config is not None
        approved = output.policy_approved
        if inp.decide_gated and calls and not decided:  # a turn stored before: its approvals, before any call runs
            approved = await self.deps.in_store(decide_in_turn, self.deps, config, inp.session_id, inp.position, calls)
            output = output.model_copy(update={"policy_approved": approved})
        agent = self.deps.agent(config.agent)
        if not inp.tools_seconds or not calls or not runs_in_turn(config, agent, calls, approved=set(approved)):
            return output
        recorded = await run_in_turn(self.tools, config, inp.session_id, inp.step, inp.position, calls)
        return output.model_copy(update={"tools_recorded_through": recorded})

    async def _stored_first(self, inp: ModelTurnInput, raced: bool) -> ModelTurnOutput:
        """Another attempt of this step stored its turn while this one waited on the model (an
        attempt Temporal gave up on, still running, or its retry): that turn stands and this
        one is dropped, so the run acts on one turn only. It is returned as a stored turn is."""
        if raced:
            raise ApplicationError(
                f"session {inp.session_id!r}: message {inp.position} was written by another writer "
                "while this model turn was made, and it is not a model turn",
                type=FailureType.CHECKPOINT_NOT_FOUND,
                non_retryable=True,
            )
        activity.logger.warning(
            "session %s step %s: another attempt stored its turn first; this attempt's turn is dropped",
            inp.session_id, inp.step,
        )  # fmt: skip
        return await self._model_turn(inp, raced=True)

    # -- structured output ---------------------------------------------------------------
    def _check_output(self, header: CheckpointHeader, turn: Message) -> OutputCheck | None:
        config = header.run_config
        if config is None or config.output_schema is None:
            return None
        output_type = self.deps.agent(config.agent).output_type
        if output_type is None:
            raise ApplicationError(
                f"the run of agent {config.agent!r} asks for structured output, but this worker's agent "
                "has no output_type: deploy the agent the run started with",
                type=FailureType.CONFIGURATION,
                non_retryable=True,
            )
        return check_turn(turn, config, output_type)

    @staticmethod
    def _output_header(
        header: CheckpointHeader, inp: ModelTurnInput, check: OutputCheck, usage: Usage
    ) -> CheckpointHeader:
        grown = {
            "message_count": inp.position + 1 + len(check.extra),
            "step_index": inp.step,
            "usage": usage,
            "format_version": FORMAT_VERSION,
        }
        if check.done:
            return header.finished(FinishReason.STOP, output=check.output, **grown)
        return header.model_copy(
            update={**grown, "status": CheckpointStatus.IN_PROGRESS, "finish_reason": None, "updated_at": None}
        )

    @staticmethod
    def _output_turn(
        check: OutputCheck, usage: Usage, header: CheckpointHeader, inp: ModelTurnInput, replayed: bool = False
    ) -> ModelTurnOutput:
        config = header.run_config
        assert config is not None
        if check.invalid and inp.output_retries_used >= config.output_retries:
            raise ApplicationError(
                f"the model's answer does not match {config.output_name} after "
                f"{inp.output_retries_used + 1} attempts: {check.error}. The last error was sent back to "
                "the model: resume the session to let it try again, or raise output_retries",
                type=FailureType.OUTPUT_INVALID,
                non_retryable=True,
            )
        return ModelTurnOutput(
            usage=usage,
            replayed=replayed,
            appended=1 + len(check.extra),
            output_retry=check.invalid,
            output=bounded(check.output) if check.done else None,
        )

    async def _generate(
        self, header: CheckpointHeader, messages: list[Message], inp: ModelTurnInput, events: TurnStream | None = None
    ) -> ModelResponse:
        config = header.run_config
        assert config is not None
        provider_name, model = split_model_string(config.model)
        provider = self.deps.providers.get(provider_name)
        settings = config.model_settings or ModelSettings()
        tools, native = list(config.tools), config.output_schema is not None and config.output_mode == "native"
        if config.output_schema is not None and config.output_mode == "tool":
            tools.append(output_tool_spec(config))
            # forced when it is the only tool (Anthropic refuses a forced tool with thinking on)
            if settings.tool_choice is None and not config.tools and settings.thinking_budget_tokens is None:
                settings = settings.model_copy(update={"tool_choice": OUTPUT_TOOL})
        request = ModelRequest(
            model=model,
            messages=[],
            tools=tools,
            max_tokens=config.max_tokens,
            settings=settings,
            output_schema=config.output_schema if native else None,
            output_name=config.output_name if native else None,
            session_id=inp.session_id,
            step=inp.step,
            position=inp.position,
        )
        request.messages = messages  # as stored, validated once: not checked again (O(session) per step)
        hooks = self.deps.agent(config.agent).hooks if config.agent in self.deps.agents else None
        if hooks is not None and hooks.before_model is not None:
            changed = await run_hook("before_model", hooks.before_model, request)
            request = changed if isinstance(changed, ModelRequest) else request
        # -- rate-limit budgets (issue 33): the call waits its fair turn in its model's budget, when the worker has one
        response = await within_budget(  # its text streamed as deltas when the run streams
            self.deps.providers.budgets, config, request, lambda: generate(provider, request, events)
        )
        if response.message.role != Role.ASSISTANT:
            raise ApplicationError(
                f"{provider_name} returned a {response.message.role} turn, not an assistant turn",
                type=FailureType.MODEL_PROVIDER_MALFORMED_REPLY,
                non_retryable=True,
            )
        if hooks is not None and hooks.after_model is not None:  # before the turn is stored: runs once per turn
            changed = await run_hook("after_model", hooks.after_model, response.message)
            if isinstance(changed, Message):
                response = response.model_copy(update={"message": changed})
        return response


def _model_share(inp: ModelTurnInput) -> float | None:
    """What the model call may take of this attempt (None: all of it): the attempt's time less
    what the workflow added for the turn's calls, so a hung call is given up as early as in a
    step that runs its calls as their own activities."""
    info = activity.info()
    if not inp.tools_seconds or info.start_to_close_timeout is None:
        return None
    spent = time.time() - info.started_time.timestamp()
    return max(info.start_to_close_timeout.total_seconds() - inp.tools_seconds - spent, 0.001)


def _turn_output(turn: Message, usage: Usage, **fields: object) -> ModelTurnOutput:
    """A stored turn as the workflow gets it: its calls as references, with what a query
    shows of their arguments beside them; a final turn's text (bounded) for the run's result."""
    calls = turn.tool_calls or []
    text, cut = bounded_text(turn.content) if not calls else (None, False)
    return ModelTurnOutput(
        tool_calls=[call_ref(c) for c in calls],
        tool_call_arguments=call_views(calls),
        arguments_in_store=True,
        usage=usage,
        text=text,
        text_truncated=cut,
        **fields,
    )
