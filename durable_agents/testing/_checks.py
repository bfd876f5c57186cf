"""The guarantee checker (docs/design.md §5): after any crashes, aborts, pauses and resumes,

1. every tool call has exactly one result, in call order, right after its turn;
2. a recorded result is never re-executed (and an at-most-once tool never runs twice);
3. a checkpointed model turn is never generated again;
4. the transcript is valid for both providers (Anthropic Messages, OpenAI Chat).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_agents.checkpoint.context import newest_instructions_change, sent_messages, sent_without_policy
from durable_agents.checkpoint.format import Checkpoint, Message, Role
from durable_agents.testing._core import PROVIDER_CALLS, SIDE_EFFECTS, read_records

Records = Iterable[Mapping[str, Any]] | str | Path


class GuaranteeViolation(AssertionError):
    """A durability guarantee does not hold; the message lists every violation."""

    def __init__(self, session_id: str | None, problems: Sequence[str]) -> None:
        self.session_id, self.problems = session_id, list(problems)
        head = f"session {session_id!r}: " if session_id else ""
        super().__init__(head + f"{len(problems)} guarantee violation(s):\n- " + "\n- ".join(problems))


@dataclass
class GuaranteeSummary:
    session_id: str | None
    messages: int
    model_turns: int
    tool_calls: int
    durability_errors: list[str] = field(default_factory=list)
    """Call ids whose result is a ``tool-durability-error``."""
    cancelled: list[str] = field(default_factory=list)
    executions: dict[str, list[int]] = field(default_factory=dict)
    """Call id -> attempts of every execution start seen in the side-effect log."""
    provider_calls: int = 0
    regenerated_uncommitted: int = 0
    """Model calls repeated for a turn that had not been checkpointed yet (allowed)."""

    @property
    def re_runs(self) -> dict[str, list[int]]:
        return {cid: a for cid, a in self.executions.items() if len(a) > 1}


def _records(source: Records | None, name: str) -> list[dict[str, Any]]:
    if source is None:
        return []
    if isinstance(source, (str, Path)):
        path = Path(source)
        return read_records(path, name) if path.is_dir() else read_records(path.parent, path.name)
    return [dict(r) for r in source]


def _json(content: str | None) -> Any:
    try:
        return json.loads(content or "")
    except ValueError:
        return None


def check_guarantees(
    checkpoint_or_messages: Checkpoint | Any | Sequence[Message],
    side_effects: Records = (),
    provider_calls: Records | None = None,
    *,
    session_id: str | None = None,
    complete: bool = True,
) -> GuaranteeSummary:
    """Check a session's transcript against the side-effect and provider-call logs.

    ``checkpoint_or_messages``: a ``Checkpoint``, a ``RunResult`` or a message list.
    ``side_effects`` / ``provider_calls``: records, or the log directory (or file).
    Records of other sessions are ignored. ``complete=False`` allows the last
    turn's calls to be still pending. Raises :class:`GuaranteeViolation`.
    """
    cp = checkpoint_or_messages
    safe: dict[str, bool] = {}
    if isinstance(cp, Checkpoint) and cp.run_config is not None:
        safe = {t.name: t.safe_to_retry for t in cp.run_config.tools}
    messages: list[Message] = list(cp.messages if hasattr(cp, "messages") else cp)
    session_id = session_id or getattr(cp, "session_id", None)
    problems: list[str] = []
    calls, results = _check_transcript(messages, complete, problems)
    end = len(messages)  # what the next request without a policy would carry
    _check_wire(sent_without_policy(messages, end, newest_instructions_change(messages, end)), complete, problems)
    for position, m in enumerate(messages):  # what each turn made under a context policy was sent
        if m.role == Role.ASSISTANT and m.context is not None:
            sent: list[str] = []
            _check_wire(sent_messages(messages, position), True, sent)
            problems += [f"the request of the turn at {position}: {p}" for p in sent]
    summary = GuaranteeSummary(session_id, len(messages), sum(m.role == Role.ASSISTANT for m in messages), len(calls))
    for call_id, result in results.items():
        body = _json(result.content)
        if isinstance(body, dict) and body.get("kind") == "tool-durability-error":
            summary.durability_errors.append(call_id)
            if safe.get(calls[call_id].name):
                problems.append(
                    f"safe_to_retry tool {calls[call_id].name} ({call_id}) got a durability error "
                    "instead of being re-run"
                )
        elif isinstance(body, dict) and body.get("error") == "cancelled":
            summary.cancelled.append(call_id)
        elif isinstance(body, dict) and body.get("tool_call_id") not in (None, call_id):
            problems.append(f"result of {call_id} names another call: {body.get('tool_call_id')}")
    _check_side_effects(_records(side_effects, SIDE_EFFECTS), session_id, calls, results, safe, summary, problems)
    if provider_calls is not None:
        _check_provider(_records(provider_calls, PROVIDER_CALLS), session_id, summary, problems)
    if problems:
        raise GuaranteeViolation(session_id, problems)
    return summary


def _check_transcript(messages: list[Message], complete: bool, problems: list[str]):
    calls: dict[str, Any] = {}
    results: dict[str, Message] = {}
    open_calls: list[Any] = []  # calls of the last assistant turn still without a result, in order
    turn_at, seen_other = -1, False
    for pos, m in enumerate(messages):
        if m.role == Role.SYSTEM:
            # (a context summary or an instructions change is stored where its turn went)
            if seen_other and m.summary is None and m.instructions_change is None:
                problems.append(f"system message at {pos} after the conversation started")
            continue
        if not seen_other and m.role != Role.USER:
            problems.append(f"the first non-system message (at {pos}) is {m.role}, not user input")
        seen_other = True
        if m.role == Role.TOOL:
            if not open_calls:
                known = m.tool_call_id in calls
                problems.append(
                    f"tool result at {pos} for {m.tool_call_id} "
                    + ("is a second result (or comes after other input)" if known else "has no preceding tool call")
                )
            elif m.tool_call_id != open_calls[0].id:
                problems.append(
                    f"tool result at {pos} is for {m.tool_call_id}, expected {open_calls[0].id} "
                    f"(call order of the turn at {turn_at})"
                )
                open_calls = [c for c in open_calls if c.id != m.tool_call_id]
            else:
                call = open_calls.pop(0)
                if m.tool_name and m.tool_name != call.name:
                    problems.append(f"tool result at {pos} names tool {m.tool_name}, its call is {call.name}")
            if m.tool_call_id in results:
                problems.append(f"call {m.tool_call_id} has more than one result (again at {pos})")
            results.setdefault(m.tool_call_id or "", m)
            continue
        if open_calls:
            problems.append(
                f"{m.role} message at {pos} comes before the results of "
                f"{', '.join(c.id for c in open_calls)} (turn at {turn_at})"
            )
        open_calls = []
        if m.role == Role.ASSISTANT:
            turn_at = pos
            for c in m.tool_calls or []:
                if c.id in calls:
                    problems.append(f"tool call id {c.id} is used twice (again at {pos})")
                calls[c.id] = c
                open_calls.append(c)
    if open_calls and complete:
        problems.append(f"calls without a result: {', '.join(c.id for c in open_calls)} (turn at {turn_at})")
    return calls, results


def _check_wire(messages: list[Message], complete: bool, problems: list[str]) -> None:
    """What each provider adapter would send must satisfy that API's rules."""
    from durable_agents.providers.anthropic_messages import to_anthropic_messages
    from durable_agents.providers.base import ModelRequest
    from durable_agents.providers.openai_chat import to_openai_params

    turns = to_anthropic_messages(messages)
    for i, turn in enumerate(turns):
        if (i == 0 and turn["role"] != "user") or (i and turn["role"] == turns[i - 1]["role"]):
            problems.append(f"anthropic: turn {i} ({turn['role']}) breaks user/assistant alternation")
        blocks = turn["content"] if isinstance(turn["content"], list) else []
        asked = [
            b["id"]
            for b in (turns[i - 1]["content"] if i and turn["role"] == "user" else [])
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        given = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if not complete and i == len(turns) - 1:  # the last turn's results may still be coming
            asked = asked[: len(given)]
        lead = [b["tool_use_id"] for b in blocks[: len(asked)] if b.get("type") == "tool_result"]
        if turn["role"] == "user" and (given != asked or lead != asked):
            problems.append(f"anthropic: user turn {i} carries tool_results {given} first, its assistant asked {asked}")
    wire = to_openai_params(ModelRequest(model="m", messages=messages))["messages"]
    expected: list[str] = []
    for i, msg in enumerate(wire):
        if msg["role"] == "tool":
            if not expected or msg["tool_call_id"] != expected[0]:
                problems.append(
                    f"openai: tool message {i} ({msg['tool_call_id']}) does not answer the pending calls {expected}"
                )
            expected = expected[1:]
            continue
        if expected:
            problems.append(f"openai: {msg['role']} message {i} while calls {expected} have no tool message")
        expected = [c["id"] for c in msg.get("tool_calls") or []]


def _check_side_effects(
    records: list[dict[str, Any]],
    session_id: str | None,
    calls: dict[str, Any],
    results: dict[str, Message],
    safe: dict[str, bool],
    summary: GuaranteeSummary,
    problems: list[str],
) -> None:
    starts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if (session_id is not None and r.get("session") != session_id) or r.get("event", "start") != "start":
            continue
        starts[r["tool_call_id"]].append(r)
        if r.get("recorded_before"):
            problems.append(
                f"{r['tool']} ({r['tool_call_id']}) was executed again (attempt {r.get('attempt')}, "
                f"pid {r.get('pid')}) after its result had been recorded"
            )
    for call_id, runs in starts.items():
        tool = runs[0]["tool"]
        summary.executions[call_id] = [int(r.get("attempt") or 0) for r in runs]
        if call_id not in calls:
            problems.append(f"{tool} ran for call {call_id}, which no stored turn asked for")
        at_most_once = not safe.get(tool, bool(runs[0].get("safe")))
        if at_most_once and len(runs) > 1:
            problems.append(
                f"at-most-once tool {tool} ({call_id}) ran {len(runs)} times (attempts {summary.executions[call_id]})"
            )
        body = _json(results[call_id].content) if call_id in results else None
        if isinstance(body, dict) and "attempt" in body and body["attempt"] not in summary.executions[call_id]:
            problems.append(f"the result of {call_id} comes from attempt {body['attempt']}, which never ran")


def _check_provider(
    records: list[dict[str, Any]], session_id: str | None, summary: GuaranteeSummary, problems: list[str]
) -> None:
    mine = [r for r in records if session_id is None or r.get("session") == session_id]
    summary.provider_calls = len(mine)
    for r in mine:
        if r.get("stored_before"):
            problems.append(
                f"the model was called again for position {r['position']} (pid {r.get('pid')}), "
                "whose turn was already checkpointed"
            )
    counts = Counter((r.get("session"), r["position"]) for r in mine)
    for (sid, position), n in counts.items():
        if n < 2:
            continue
        if all(r.get("stored_before") is False for r in mine if (r.get("session"), r["position"]) == (sid, position)):
            summary.regenerated_uncommitted += n - 1  # the earlier calls' turns never reached the store
        else:
            problems.append(f"the turn at position {position} was generated {n} times")
