"""The guarantee checker catches each kind of violation (no server needed)."""

from __future__ import annotations

import json

import pytest

from durable_agents.checkpoint import Checkpoint, CheckpointHeader, Message, Role, SqliteStore, ToolCall
from durable_agents.testing import FailingStore, GuaranteeViolation, StoreUnavailableError, check_guarantees
from tests import crash_agents

A = ToolCall(id="a", name="once_work", arguments={"item": 1})
B = ToolCall(id="b", name="safe_work", arguments={"item": 2})


def _result(call: ToolCall, attempt: int = 1) -> Message:
    return Message.tool_result(call, json.dumps({"tool_call_id": call.id, "attempt": attempt}))


def _turn(*calls: ToolCall) -> Message:
    return Message(role=Role.ASSISTANT, content="calling", tool_calls=list(calls))


GOOD = [
    Message.system("sys"),
    Message.user("go"),
    _turn(A, B),
    _result(A),
    _result(B),
    Message(role=Role.ASSISTANT, content="done"),
]


def _effect(call: ToolCall, attempt: int = 1, **extra) -> dict:
    return {
        "tool": call.name,
        "session": "s",
        "tool_call_id": call.id,
        "attempt": attempt,
        "event": "start",
        "safe": call.name == "safe_work",
        **extra,
    }


def _violations(messages, effects=(), provider=None, **kwargs) -> str:
    with pytest.raises(GuaranteeViolation) as e:
        check_guarantees(messages, effects, provider, session_id="s", **kwargs)
    return str(e.value)


def test_a_valid_run_passes_and_is_summarised():
    summary = check_guarantees(
        GOOD,
        [_effect(A), _effect(B)],
        [{"session": "s", "position": 2}, {"session": "s", "position": 5}],
        session_id="s",
    )
    assert (summary.tool_calls, summary.model_turns, summary.provider_calls) == (2, 2, 2)
    assert summary.executions == {"a": [1], "b": [1]} and summary.re_runs == {}


@pytest.mark.parametrize(
    "messages, needle",
    [
        ([*GOOD[:3], _result(A), _result(A), _result(B), *GOOD[5:]], "more than one result"),
        ([*GOOD[:3], _result(B), _result(A), *GOOD[5:]], "expected a"),
        ([*GOOD[:3], _result(A), Message.user("more"), _result(B), *GOOD[5:]], "comes before the results of b"),
        ([*GOOD[:2], _result(A), *GOOD[5:]], "has no preceding tool call"),
        (GOOD[:4], "calls without a result: b"),
        ([*GOOD[:3], _result(A), _result(B), _turn(A)], "used twice"),
        ([Message.system("s"), _turn(A), _result(A)], "not user input"),
    ],
)
def test_transcript_violations(messages, needle):
    assert needle in _violations(messages)


def test_an_unfinished_turn_is_allowed_when_asked():
    check_guarantees(GOOD[:4], complete=False)


def test_an_at_most_once_tool_running_twice_is_a_violation():
    assert "ran 2 times" in _violations(GOOD, [_effect(A), _effect(A, 2), _effect(B)])


def test_a_safe_tool_may_run_again_but_not_after_its_result_was_recorded():
    summary = check_guarantees(
        [*GOOD[:4], _result(B, 2), *GOOD[5:]], [_effect(A), _effect(B), _effect(B, 2)], session_id="s"
    )
    assert summary.re_runs == {"b": [1, 2]}
    assert "after its result had been recorded" in _violations(
        GOOD, [_effect(A), _effect(B), _effect(B, 2, recorded_before=True)]
    )


def test_a_result_from_an_attempt_that_never_ran_is_a_violation():
    assert "attempt 3, which never ran" in _violations([*GOOD[:4], _result(B, 3), *GOOD[5:]], [_effect(A), _effect(B)])


def test_a_safe_tool_with_a_durability_error_is_a_violation():
    durability = Message.tool_result(B, json.dumps({"kind": "tool-durability-error", "toolCallId": "b"}), is_error=True)
    checkpoint = Checkpoint(
        session_id="s", messages=[*GOOD[:4], durability, *GOOD[5:]], run_config=crash_agents.safe_agent.run_config()
    )
    with pytest.raises(GuaranteeViolation, match="instead of being re-run"):
        check_guarantees(checkpoint, [_effect(A), _effect(B)])


def test_model_turn_generated_again():
    twice = [{"session": "s", "position": 2}, {"session": "s", "position": 2}]
    assert "generated 2 times" in _violations(GOOD, [], twice)
    assert "already checkpointed" in _violations(GOOD, [], [{"session": "s", "position": 2, "stored_before": True}])
    uncommitted = [{"session": "s", "position": 2, "stored_before": False}] * 2
    assert check_guarantees(GOOD, [], uncommitted, session_id="s").regenerated_uncommitted == 1


def test_records_of_other_sessions_are_ignored():
    check_guarantees(
        GOOD, [_effect(A), _effect(A, 2, session="t")], [{"session": "t", "position": 2}] * 2, session_id="s"
    )


def test_failing_store_fails_the_nth_write_before_or_after_it_lands(tmp_path):
    inner = SqliteStore(tmp_path / "s.db")
    store = FailingStore(inner, fail_writes=[2])
    header = CheckpointHeader(session_id="s", agent="crash-safe", message_count=1)
    store.append(header, 0, [Message.user("one")])
    with pytest.raises(StoreUnavailableError, match="write #2"):
        store.append(header.model_copy(update={"message_count": 2}), 1, [Message.user("two")])
    assert inner.load_header("s").message_count == 1  # the failing write did not land
    after = FailingStore(inner, fail_writes=[1], commit_then_fail=True)
    with pytest.raises(StoreUnavailableError, match="landed"):
        after.append(header.model_copy(update={"message_count": 2}), 1, [Message.user("two")])
    assert inner.load_header("s").message_count == 2 and after.failures == [(1, "append")]


def test_a_side_effect_log_says_whether_its_result_was_recorded_before(tmp_path):
    """The check "a recorded result is never re-executed" reads this flag: it is keyed by position."""
    from durable_agents import Message, ToolCall, ToolContext
    from durable_agents.checkpoint import Checkpoint, SqliteStore
    from durable_agents.testing import SIDE_EFFECTS, configured, read_records, record_side_effect

    store = SqliteStore(tmp_path / "s.db")
    calls = [ToolCall(id="call_0", name="t", arguments={}), ToolCall(id="call_0", name="t", arguments={})]
    store.save(Checkpoint(session_id="s", messages=[Message.user("go"), Message(role="assistant", tool_calls=calls)]))
    store.record_tool_result("s", 2, Message.tool_result(calls[0], "done"), 2, 2)
    with configured(log_dir=tmp_path / "logs", store=store):
        for position in (2, 3):  # the same model id, two calls: only the first has a result
            ctx = ToolContext(tool_call_id="call_0", session_id="s", step=1, position=position)
            record_side_effect("t", ctx, "start", safe=True)
    assert [r["recorded_before"] for r in read_records(tmp_path / "logs", SIDE_EFFECTS)] == [True, False]
    store.close()
