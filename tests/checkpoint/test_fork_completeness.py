"""fork(): pick one of several kept checkpoints of a step (entry), patch any pending call's
result, and the function form of the messages patch."""

from __future__ import annotations

import json

import pytest

from durable_agents.checkpoint import CheckpointNotFoundError, ConfigurationError, Message
from durable_agents.checkpoint.fork import Patch, ToolResultPatch, fork
from durable_agents.checkpoint.format import Role
from tests.checkpoint.test_fork import _build, _pending_entry


def _numbered(store, sid: str = "trip") -> list[tuple[int, int, int]]:
    """(entry number, step, message count) as `durable-agents history` numbers them: 1 is the newest."""
    return [(n, e.step, len(e.checkpoint.messages)) for n, e in enumerate(store.history(sid), 1)]


# -- (a) one entry among several of a step -----------------------------------------------------
def test_entry_picks_one_of_several_kept_checkpoints_of_a_step(store):
    _build(store)
    assert _numbered(store) == [(1, 3, 8), (2, 2, 6), (3, 1, 5), (4, 1, 4), (5, 1, 3), (6, 0, 2)]
    nothing_ran = fork(store, "trip", 1, entry=5)
    assert nothing_ran.entry == 5 and len(nothing_ran.checkpoint.messages) == 3  # a and b pending
    one_ran = fork(store, "trip", 1, entry=4).checkpoint
    assert [m.tool_call_id for m in one_ran.messages if m.role == Role.TOOL] == ["a"]
    newest = fork(store, "trip", 1)  # without an entry: the newest of the step, as before
    assert newest.entry == 3 and len(newest.checkpoint.messages) == 5


def test_an_entry_of_another_step_or_past_the_history_is_refused(store):
    _build(store)
    with pytest.raises(CheckpointNotFoundError, match="entry 1 is a checkpoint of step 3, not step 1") as err:
        fork(store, "trip", 1, entry=1)
    assert "step 1's entries are 3, 4, 5" in str(err.value) and err.value.kept_steps == [0, 1, 2, 3]
    with pytest.raises(CheckpointNotFoundError, match="no entry 9: its history has entries 1-6"):
        fork(store, "trip", 1, entry=9)
    with pytest.raises(ConfigurationError, match="entries count from 1"):
        fork(store, "trip", 1, entry=0)
    assert store.load("trip.fork-1") is None  # refused forks save nothing


# -- (b) a result for any call of the turn without one ------------------------------------------
def test_a_result_for_a_later_pending_call_is_recorded_for_it(store):
    _build(store)
    _pending_entry(store)  # a and b pending
    made = fork(store, "pending", 1, Patch(tool_result=ToolResultPatch(tool_call_id="b", result={"late": True})))
    cp = made.checkpoint
    assert [m.role for m in cp.messages] == [Role.SYSTEM, Role.USER, Role.ASSISTANT]  # a still runs first
    recorded = store.tool_result(made.session_id, 4)  # b's result goes at 4, after a's at 3
    assert recorded.tool_call_id == "b" and recorded.tool_name == "tool_b"
    assert json.loads(recorded.content) == {"late": True}
    assert store.load(made.session_id).messages == cp.messages
    assert made.recorded_results == [4]


def test_results_for_pending_calls_in_any_order_end_up_in_call_order(store):
    _build(store)
    _pending_entry(store)
    patch = Patch(
        tool_results=[ToolResultPatch(tool_call_id="b", result="B"), ToolResultPatch(tool_call_id="a", result="A")]
    )
    cp = fork(store, "pending", 1, patch).checkpoint
    assert [(m.tool_call_id, m.content) for m in cp.messages[3:]] == [("a", "A"), ("b", "B")]
    assert store.load(cp.session_id).messages == cp.messages


def test_input_after_a_later_pending_result_waits_for_the_earlier_call(store):
    _build(store)
    _pending_entry(store)
    patch = Patch(tool_result=ToolResultPatch(tool_call_id="b", result="B"), append_input="then this")
    cp = fork(store, "pending", 1, patch).checkpoint
    assert len(cp.messages) == 3 and cp.pending_input == [Message.user("then this")]


def test_unknown_calls_and_calls_of_earlier_turns_without_a_place_are_refused(store):
    _build(store)
    _pending_entry(store)
    with pytest.raises(ConfigurationError, match="no tool call 'zzz'"):
        fork(store, "pending", 1, Patch(tool_result=ToolResultPatch(tool_call_id="zzz", result=1)))
    assert store.load("pending.fork-1") is None


# -- (c) the messages patch as a function ------------------------------------------------------------
def test_patch_messages_may_be_a_function_of_the_transcript(store):
    _build(store)
    cp = fork(store, "trip", 1, Patch(messages=lambda ms: [*ms[:2], Message.user("instead")])).checkpoint
    assert [m.content for m in cp.messages] == ["sys", "plan", "instead"]
    with pytest.raises(ConfigurationError, match="Patch.messages function must return a list of Message"):
        fork(store, "trip", 1, Patch(messages=lambda ms: "nope"))


async def test_a_function_patch_cannot_cross_temporal():
    from durable_agents.client import AgentClient

    class NoTemporal:
        def __getattr__(self, name):
            raise AssertionError("nothing may reach Temporal")

    client = AgentClient(NoTemporal(), store=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"checkpoint\.fork\.fork\(store"):
        await client.fork("trip", 1, Patch(messages=lambda ms: ms))
