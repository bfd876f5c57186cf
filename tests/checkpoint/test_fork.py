"""fork(): patches in order, ids, missing steps, the source left alone."""

from __future__ import annotations

import json

import pytest

from durable_agents.checkpoint import (
    Checkpoint,
    CheckpointNotFoundError,
    CheckpointStatus,
    ConfigurationError,
    FinishReason,
    Message,
    SqliteStore,
    ToolCall,
    Usage,
)
from durable_agents.checkpoint.fork import ForkResult, Patch, ToolResultPatch, fork
from durable_agents.checkpoint.format import Role


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "fork.db")
    yield s
    s.close()


def _turn(i: int, *calls: str) -> Message:
    return Message(
        role=Role.ASSISTANT,
        content=f"turn {i}",
        tool_calls=[ToolCall(id=c, name=f"tool_{c}", arguments={"i": i}) for c in calls],
    )


def _result(call_id: str, content: str) -> Message:
    return Message(role=Role.TOOL, content=content, tool_call_id=call_id, tool_name=f"tool_{call_id}")


def _save(store, sid: str, messages: list[Message], step: int, **extra) -> None:
    store.save(
        Checkpoint(
            session_id=sid,
            messages=list(messages),
            step_index=step,
            usage=Usage(input_tokens=10 * step, output_tokens=step, requests=step),
            **extra,
        )
    )


def _build(store, sid: str = "trip") -> None:
    """Steps 0..3, saved as the agent loop saves them (several saves at step 1)."""
    msgs = [Message.system("sys"), Message.user("plan")]
    _save(store, sid, msgs, 0)
    msgs.append(_turn(1, "a", "b"))
    _save(store, sid, msgs, 1)  # tools asked, none ran: a, b pending
    msgs.append(_result("a", '{"forecast": "sun"}'))
    _save(store, sid, msgs, 1)  # a recorded, b pending
    msgs.append(_result("b", "ok"))
    _save(store, sid, msgs, 1)  # newest entry of step 1: both recorded
    msgs.append(_turn(2, "c"))
    _save(
        store,
        sid,
        msgs,
        2,
        status=CheckpointStatus.AWAITING_APPROVAL,
        approval_id="ap-1",
        remaining_tool_calls=[ToolCall(id="c", name="tool_c")],
    )
    msgs += [_result("c", "done"), Message(role=Role.ASSISTANT, content="all set")]
    _save(store, sid, msgs, 3, status=CheckpointStatus.FINISHED, finish_reason=FinishReason.STOP)


def _pending_entry(store, sid: str = "trip") -> None:
    """Copy the step-1 entry with both calls pending into session 'pending'."""
    entry = next(e for e in store.history(sid) if e.step == 1 and len(e.checkpoint.messages) == 3)
    store.save(entry.checkpoint.model_copy(update={"session_id": "pending"}))


def _snapshot(store, sid: str):
    return store.load(sid).to_json(), [e.to_json() for e in store.history(sid)]


def test_plain_fork_copies_newest_entry_of_step_keeping_step_and_usage(store):
    _build(store)
    before = _snapshot(store, "trip")
    result = fork(store, "trip", 1)
    assert isinstance(result, ForkResult)
    assert result.session_id == "trip.fork-1" and result.step == 1
    cp = store.load("trip.fork-1")
    assert [m.content for m in cp.messages][-2:] == ['{"forecast": "sun"}', "ok"]
    assert cp.step_index == 1 and cp.usage == Usage(input_tokens=10, output_tokens=1, requests=1)
    assert cp.status == CheckpointStatus.IN_PROGRESS and cp.finish_reason is None
    # the source run's budget goes on: its run started at step 0, so max_steps counts from there
    assert cp.run_start_index == len(cp.messages) and cp.run_start_step == 0
    assert _snapshot(store, "trip") == before
    assert result.checkpoint.messages == cp.messages


def test_fork_of_awaiting_approval_entry_drops_approval(store):
    _build(store)
    cp = fork(store, "trip", 2).checkpoint
    assert cp.status == CheckpointStatus.IN_PROGRESS
    assert cp.approval_id is None and cp.remaining_tool_calls is None
    assert store.load(cp.session_id).approval_id is None


def test_default_ids_count_up_and_existing_id_is_refused(store):
    _build(store)
    assert fork(store, "trip", 1).session_id == "trip.fork-1"
    assert fork(store, "trip", 3).session_id == "trip.fork-2"
    assert fork(store, "trip", 0, new_session_id="mine").session_id == "mine"
    with pytest.raises(ConfigurationError, match="delete it first or pick another"):
        fork(store, "trip", 1, new_session_id="trip.fork-1")
    with pytest.raises(ConfigurationError, match="already has a checkpoint"):
        fork(store, "trip", 1, new_session_id="trip")


def test_missing_step_lists_kept_steps(store):
    _build(store)
    with pytest.raises(CheckpointNotFoundError, match="keeps steps 0, 1, 2, 3") as err:
        fork(store, "trip", 7)
    assert err.value.kept_steps == [0, 1, 2, 3] and err.value.session_id == "trip"
    with pytest.raises(CheckpointNotFoundError, match="no history") as err:
        fork(store, "nobody", 0)
    assert err.value.kept_steps == []


def test_store_without_history_is_a_configuration_error():
    class Bare:
        def load(self, session_id):
            return None

        def save(self, checkpoint):
            raise AssertionError("must not save")

    with pytest.raises(ConfigurationError, match="keeps no checkpoint history"):
        fork(Bare(), "trip", 1)


def test_messages_patch_and_messages_fn(store):
    _build(store)
    new = [Message.system("other"), Message.user("plan b")]
    cp = fork(store, "trip", 1, Patch(messages=new)).checkpoint
    assert cp.messages == new
    cp = fork(store, "trip", 1, messages_fn=lambda ms: ms[:2]).checkpoint
    assert [m.content for m in cp.messages] == ["sys", "plan"]
    with pytest.raises(ConfigurationError, match="list of Message"):
        fork(store, "trip", 1, messages_fn=lambda ms: "nope")


def test_business_state_set_unset_and_none(store):
    _build(store)
    _save(store, "s", [Message.user("x")], 0, business_state={"cart": [1]})
    assert fork(store, "s", 0).checkpoint.business_state == {"cart": [1]}
    assert fork(store, "s", 0, Patch(business_state={"cart": []})).checkpoint.business_state == {"cart": []}
    assert fork(store, "s", 0, Patch(business_state=None)).checkpoint.business_state is None
    parsed = Patch.model_validate_json('{"businessState": null}')
    assert parsed.sets_business_state and not Patch().sets_business_state
    assert store.load("s.fork-3").business_state is None


def test_tool_result_replaced_in_place(store):
    _build(store)
    before = _snapshot(store, "trip")
    patch = Patch(tool_result=ToolResultPatch(tool_call_id="a", result={"forecast": "rain"}))
    cp = fork(store, "trip", 1, patch).checkpoint
    assert len(cp.messages) == 5
    replaced = cp.messages[3]
    assert replaced.tool_call_id == "a" and replaced.tool_name == "tool_a" and replaced.is_error is None
    assert json.loads(replaced.content) == {"forecast": "rain"}
    text = fork(store, "trip", 1, Patch(tool_result=ToolResultPatch(tool_call_id="b", result="plain")))
    assert text.checkpoint.messages[4].content == "plain"
    assert _snapshot(store, "trip") == before


def test_tool_result_clears_error_flag(store):
    msgs = [
        Message.user("go"),
        _turn(1, "x"),
        Message(role=Role.TOOL, content="boom", tool_call_id="x", tool_name="tool_x", is_error=True),
    ]
    _save(store, "err", msgs, 1)
    cp = fork(store, "err", 1, Patch(tool_result=ToolResultPatch(tool_call_id="x", result=3))).checkpoint
    assert cp.messages[2].is_error is None and cp.messages[2].content == "3"


def test_tool_result_records_the_next_pending_call(store):
    """(A later pending call's result is recorded too: see test_fork_completeness.py.)"""
    _build(store)
    _pending_entry(store)
    first = Patch(tool_result=ToolResultPatch(tool_call_id="a", result=[1, 2]))
    cp = fork(store, "pending", 1, first).checkpoint
    assert cp.messages[-1].role == Role.TOOL and cp.messages[-1].tool_call_id == "a"
    assert cp.messages[-1].tool_name == "tool_a" and cp.messages[-1].content == "[1, 2]"
    with pytest.raises(ConfigurationError, match="'zzz'"):
        fork(store, "pending", 1, Patch(tool_result=ToolResultPatch(tool_call_id="zzz", result=1)))
    assert store.load("pending.fork-2") is None  # refused forks save nothing


def test_append_input(store):
    _build(store)
    cp = fork(store, "trip", 3, Patch(append_input="and a hotel")).checkpoint
    assert cp.messages[-1] == Message.user("and a hotel")
    assert cp.run_start_index == len(cp.messages) - 1 and cp.run_start_step == 0
    cp = fork(store, "trip", 3, Patch(append_input=["one", "two"])).checkpoint
    assert [m.content for m in cp.messages[cp.run_start_index :]] == ["one", "two"]


def test_append_input_behind_pending_calls_is_queued_after_their_results(store):
    _build(store)
    _pending_entry(store)
    source = store.load("pending")
    cp = fork(store, "pending", 1, Patch(append_input="more")).checkpoint
    assert cp.messages == source.messages  # never between a tool-call turn and its results
    assert cp.pending_input == [Message.user("more")]
    assert store.load("pending.fork-1").pending_input == [Message.user("more")]


def test_patch_order_messages_then_state_then_tool_result_then_input(store):
    _build(store)
    rewritten = [Message.user("go"), _turn(1, "p")]  # p is pending only after the rewrite
    patch = Patch(
        messages=rewritten,
        business_state={"v": 2},
        tool_result=ToolResultPatch(tool_call_id="p", result="R"),
        append_input="next",
    )
    cp = fork(store, "trip", 3, patch).checkpoint
    assert [(m.role, m.content) for m in cp.messages] == [
        (Role.USER, "go"),
        (Role.ASSISTANT, "turn 1"),
        (Role.TOOL, "R"),
        (Role.USER, "next"),
    ]
    assert cp.business_state == {"v": 2} and cp.run_start_index == 3


def test_patch_round_trips_camel_case():
    patch = Patch(tool_result=ToolResultPatch(tool_call_id="a", result={"x": 1}), append_input="y")
    data = json.loads(patch.to_json())
    assert data == {"toolResult": {"toolCallId": "a", "result": {"x": 1}}, "appendInput": "y"}
    assert Patch.model_validate(data) == patch
