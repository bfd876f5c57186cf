"""Structured output: a run's final answer validated against the agent's ``output_type``.

Two ways to ask for it (``Agent(output_mode=…)``; the default depends on the provider):

- ``native``: the provider's own structured output (OpenAI Chat Completions'
  ``response_format`` with the JSON schema, which compatible servers such as
  llama.cpp's also honour; the ``scripted:`` model's text): the answer is the
  final turn's text, parsed as JSON.
- ``tool``: an extra tool, ``final_result``, whose arguments are the answer
  (Anthropic, your own providers): the run ends when the model calls it.

An invalid answer is sent back to the model with the validation error (a user
message in ``native`` mode, the ``final_result`` call's error result in ``tool``
mode), at most ``output_retries`` times; then the run fails with
``OutputValidationError`` and stays resumable. The check is a pure function of
the stored turn, so a retried model activity that finds its turn stored
reaches the same decision without calling the model again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from durable_agents.checkpoint.format import Message, Role, RunConfig, ToolCall, ToolSpec

OutputMode = Literal["native", "tool"]
OUTPUT_TOOL = "final_result"
NATIVE_PROVIDERS = ("openai", "openai-responses", "scripted")


def default_output_mode(model: str) -> OutputMode:
    return "native" if model.partition(":")[0] in NATIVE_PROVIDERS else "tool"


def output_tool_spec(config: RunConfig) -> ToolSpec:
    return ToolSpec(
        name=OUTPUT_TOOL,
        description="Give your final answer by calling this tool with it; the run ends when you do.",
        input_schema=config.output_schema or {},
    )


@dataclass
class OutputCheck:
    """What the agent loop does with a model turn of an agent that has an ``output_type``."""

    extra: list[Message] = field(default_factory=list)
    """Messages stored right after the turn (results for its calls, or the error fed back)."""
    output: Any = None
    """The valid answer (JSON), when the turn gave one: the run ends."""
    invalid: bool = False
    """The turn tried to answer and failed validation: the model is asked again."""
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.output is not None


def check_turn(turn: Message, config: RunConfig, output_type: type[BaseModel]) -> OutputCheck | None:
    """None when the turn is an ordinary step (it calls the agent's own tools)."""
    calls = turn.tool_calls or []
    if config.output_mode != "tool":  # native: the answer is the final turn's text
        if calls:
            return None
        try:
            value = output_type.model_validate_json(_json_text(turn.content or ""))
        except ValidationError as e:
            return _invalid_text(turn, _describe(e))
        return OutputCheck(output=value.model_dump(mode="json"))
    final = next((c for c in calls if c.name == OUTPUT_TOOL), None)
    if final is None:
        if calls:
            return None
        return _invalid_text(turn, "you answered in text; call the final_result tool with your answer")
    return _check_tool_answer(final, calls, output_type)


def _check_tool_answer(final: ToolCall, calls: list[ToolCall], output_type: type[BaseModel]) -> OutputCheck:
    try:
        value = output_type.model_validate(final.arguments)
    except ValidationError as e:
        error = _describe(e)
        results = [
            Message.tool_result(c, json.dumps({"error": f"invalid final answer: {error}"}), is_error=True)
            if c is final
            else Message.tool_result(c, json.dumps({"error": "not run: a final answer was attempted"}), is_error=True)
            for c in calls
        ]
        return OutputCheck(extra=results, invalid=True, error=error)
    results = [
        Message.tool_result(c, json.dumps({"ok": "final answer recorded"}))
        if c is final
        else Message.tool_result(c, json.dumps({"error": "not run: the final answer was given"}), is_error=True)
        for c in calls
    ]
    return OutputCheck(extra=results, output=value.model_dump(mode="json"))


def _invalid_text(turn: Message, error: str) -> OutputCheck:
    del turn
    feedback = Message.user(
        f"Your answer does not match the required output: {error}. Answer again, with only the corrected answer."
    )
    return OutputCheck(extra=[feedback], invalid=True, error=error)


def _json_text(text: str) -> str:
    """The JSON of an answer, without the Markdown fence models like to add."""
    stripped = text.strip()
    if stripped.startswith("```"):
        body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = body.rsplit("```", 1)[0].strip()
    return stripped


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "the answer"
        problems.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def is_output_feedback(message: Message) -> bool:
    return message.role == Role.USER and (message.content or "").startswith(
        "Your answer does not match the required output:"
    )
