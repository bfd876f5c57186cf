"""Pending tool calls are decided by position: results follow their turn in call order."""

from __future__ import annotations

from durable_agents.checkpoint.format import Message, Role, ToolCall
from durable_agents.checkpoint.transcript import pending_tool_calls


def _turn(*ids: str) -> Message:
    return Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id=i, name="t") for i in ids])


def _result(call_id: str) -> Message:
    return Message.tool_result(ToolCall(id=call_id, name="t"), "ok")


def test_a_call_whose_id_repeats_in_its_turn_is_pending_until_its_own_result():
    turn = _turn("call_0", "call_0", "call_1")
    pending, index = pending_tool_calls([Message.user("go"), turn, _result("call_0")])
    assert index == 1 and pending == turn.tool_calls[1:]  # the second call_0 has no result yet


def test_an_id_reused_by_a_later_turn_is_pending_in_that_turn():
    later = _turn("call_0")
    messages = [Message.user("go"), _turn("call_0"), _result("call_0"), later]
    assert pending_tool_calls(messages) == (later.tool_calls, 3)
    assert pending_tool_calls([*messages, _result("call_0")]) == ([], 3)


def test_no_pending_calls_after_new_input_or_without_a_turn():
    assert pending_tool_calls([Message.user("go"), _turn("a"), Message.user("more")]) == ([], -1)
    assert pending_tool_calls([Message.user("go")]) == ([], -1)
    assert pending_tool_calls([]) == ([], -1)
    turn = _turn("a", "b")
    assert pending_tool_calls([turn, _result("b")]) == (turn.tool_calls[1:], 0)  # by position, not by id
