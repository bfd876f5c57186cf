"""Agent hooks: code of yours around each tool call and model turn, run inside activities.

``Agent(hooks=Hooks(before_tool=…, after_tool=…, before_model=…, after_model=…))``;
each hook may be ``def`` or ``async def``:

- ``before_tool(call, ctx)`` returns None (run the call as the model asked),
  ``Veto(result)`` (record ``result`` as the call's result; the tool does not run) or
  ``Rewrite(arguments)`` (run the tool with these arguments instead; they are
  validated like the model's).
- ``after_tool(call, result, ctx)`` returns None (keep) or ``Rewrite(result=…)``
  (record that instead). It sees what the tool returned as JSON (an error result too).
- ``before_model(request)`` returns None or a changed ``ModelRequest`` (what is sent;
  the stored transcript is unchanged).
- ``after_model(turn)`` returns None or a changed assistant ``Message`` (what is stored).

Hooks never run in workflow code. What they decide is recorded with the step (the
call's result, the stored turn), and a recorded step is never run again, so a hook
never runs twice for it; a crash before the record runs it again with the step. A
hook that raises fails the run (its checkpoint stays ``in-progress``, resumable).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import ConfigurationError, FailureType


@dataclass(frozen=True)
class Veto:
    """``before_tool``: record ``result`` for the call instead of running the tool."""

    result: Any
    is_error: bool = True


@dataclass(frozen=True)
class Rewrite:
    """``before_tool``: run with ``arguments``; ``after_tool``: record ``result``."""

    arguments: dict[str, Any] | None = None
    result: Any = None


HOOK_NAMES = ("before_tool", "after_tool", "before_model", "after_model")


@dataclass(frozen=True)
class Hooks:
    before_tool: Callable[..., Any] | None = None
    after_tool: Callable[..., Any] | None = None
    before_model: Callable[..., Any] | None = None
    after_model: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        for name in HOOK_NAMES:
            hook = getattr(self, name)
            if hook is not None and not callable(hook):
                raise ConfigurationError(f"hook {name} must be a function, not {type(hook).__name__}")


async def run_hook(name: str, hook: Callable[..., Any], *args: Any) -> Any:
    """Run a hook, ``def`` or ``async def``. A hook's failure fails the run (resumable), as the
    reference says: a non-retryable ``HookError`` failure, never a retry of the activity."""
    try:
        out = hook(*args)
        return await out if inspect.isawaitable(out) else out
    except Exception as e:  # noqa: BLE001 - reported as the run's failure
        raise ApplicationError(
            f"hook {name} raised {type(e).__name__}: {e}", type=FailureType.HOOK_FAILED, non_retryable=True
        ) from None
