"""A run's context policy inside the model activity: the window to send, and the summary
to make (and store) first when a ``SummarizeOlder`` policy asks for one.

The cutting is :mod:`durable_agents.checkpoint.context` (pure, shared with
``durable-agents show --as-sent``). A summary is one model call whose answer is
stored at the turn's position as a ``system`` message marked ``summary``, before
the turn's own call: a retried or resumed activity finds it there and reuses it
(the turn then goes after it), so a summary is never generated (or paid for) twice.

Instructions: when the run's instructions (``runConfig.instructions``: the agent's, as the run
recorded it at its start, e.g. after a ``migrate`` to another build) differ from those the
session is sent, the change is stored first, the same way, as a ``system`` message marked
``instructionsChange`` (the checkpoint's ``instructionsAt`` points at it), and this request and
every later one send it in place of the session's first instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from durable_agents.activities import metrics
from durable_agents.activities.deps import ActivityDeps
from durable_agents.activities.transcript import repair_text
from durable_agents.agent.hooks import run_hook
from durable_agents.checkpoint.context import (
    SummaryTask,
    TurnContext,
    context_after_summary,
    summary_request,
)
from durable_agents.checkpoint.context_policy import ContextSummary, ContextWindow, SummarizeOlder
from durable_agents.checkpoint.format import (
    FORMAT_VERSION,
    CheckpointHeader,
    Message,
    ModelSettings,
    Role,
    Usage,
)
from durable_agents.providers.base import ModelRequest
from durable_agents.providers.registry import split_model_string


@dataclass
class Context:
    """What the turn at ``position`` is sent (``messages``, cut as ``window`` says; None: no
    policy), and the header to store it with (its usage counts a summary made first)."""

    header: CheckpointHeader
    position: int
    messages: list[Message]
    window: ContextWindow | None


async def build_context(deps: ActivityDeps, header: CheckpointHeader, turn: TurnContext, step: int) -> Context:
    """Carry out what :func:`~durable_agents.checkpoint.context.turn_context` decided: store the
    instructions change, make and store the summary, each before the turn's own call."""
    config = header.run_config
    assert config is not None
    position = turn.position
    if turn.change is not None:
        header = header.model_copy(
            update={
                "message_count": position,
                "instructions_at": position - 1,
                "format_version": FORMAT_VERSION,
                "updated_at": None,
            }
        )
        await deps.in_store(deps.store.append, header, position - 1, [turn.change])
    if turn.summarize is None:
        return Context(header, position, turn.messages, turn.window)
    policy = config.context
    assert isinstance(policy, SummarizeOlder)
    summary = await _summarize(deps, header, turn.transcript, position, step, policy, turn.summarize)
    header = header.model_copy(
        update={
            "message_count": position + 1,
            "usage": header.usage + summary.usage,
            "context_summary": position,
            "format_version": FORMAT_VERSION,
            "updated_at": None,
        }
    )
    await deps.in_store(deps.store.append, header, position, [summary.message])
    messages, window = context_after_summary(
        turn, summary.message, policy, run_start=header.run_start_index, instructions_at=header.instructions_at
    )
    return Context(header, position + 1, messages, window)


@dataclass
class _Summary:
    message: Message
    usage: Usage


async def _summarize(
    deps: ActivityDeps,
    header: CheckpointHeader,
    transcript: Sequence[Message],
    position: int,
    step: int,
    policy: SummarizeOlder,
    task: SummaryTask,
) -> _Summary:
    assert header.run_config is not None
    config = header.run_config
    model_string = policy.model or config.model
    provider_name, model = split_model_string(model_string)
    run_settings = config.model_settings or ModelSettings()
    settings = ModelSettings(max_tokens_param=run_settings.max_tokens_param, anthropic_cache=False)
    request = ModelRequest(
        model=model,
        messages=summary_request(transcript, task, policy.instructions),
        max_tokens=policy.summary_max_tokens,
        settings=settings,
        session_id=header.session_id,
        step=step,
        position=position,
        purpose="summary",
    )
    hooks = deps.agent(config.agent).hooks if config.agent in deps.agents else None
    if hooks is not None and hooks.before_model is not None:  # e.g. a redaction hook sees what is summarised
        changed = await run_hook("before_model", hooks.before_model, request)
        request = changed if isinstance(changed, ModelRequest) else request
    response = await deps.providers.get(provider_name).generate(request)
    metrics.model_turn(config.agent, model_string, response.usage)
    answer = response.message
    if hooks is not None and hooks.after_model is not None:  # before the summary is stored: once per summary
        changed = await run_hook("after_model", hooks.after_model, answer)
        answer = changed if isinstance(changed, Message) else answer
    text = repair_text((answer.content or "").strip()) or "(the summariser returned no text)"
    marker = ContextSummary(start=task.start, end=task.end, previous=task.previous, model=model_string)
    return _Summary(Message(role=Role.SYSTEM, content=text, summary=marker), response.usage)
