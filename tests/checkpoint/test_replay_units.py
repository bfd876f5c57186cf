"""The pure parts of a replay: which recorded call answers which, what a replay sends, the
report's verdicts and its JUnit XML (no server)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, FinishReason, Message, Role, ToolCall
from durable_agents.checkpoint.replay import (
    input_groups,
    match_call,
    recorded_calls,
    replay_calls,
    replay_plan,
    replay_session_id,
    source_of,
)
from durable_agents.checkpoint.replay_report import ReplayPair, build_report, parse_threshold


def turn(*calls: tuple[str, dict], text: str | None = None) -> Message:
    return Message(
        role=Role.ASSISTANT,
        content=text,
        tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)] or None,
    )


def result(call_id: str, name: str, content: str) -> Message:
    return Message(role=Role.TOOL, content=content, tool_call_id=call_id, tool_name=name)


def run(text: str = "done", order: int = 1, finish: FinishReason | None = FinishReason.STOP) -> Checkpoint:
    messages = [
        Message(role=Role.SYSTEM, content="Help."),
        Message.user(f"order {order}"),
        turn(("lookup", {"order": order}), ("lookup", {"order": 2})),
        result("c0", "lookup", '{"status": "late"}'),
        result("c1", "lookup", '{"status": "shipped"}'),
        turn(("lookup", {"order": order})),
        result("c0", "lookup", '{"status": "still late"}'),
        turn(text=text),
    ]
    return Checkpoint(session_id=f"s{order}", messages=messages, status=CheckpointStatus.FINISHED, finish_reason=finish)


def test_calls_are_matched_by_arguments_in_order_by_position_or_by_a_function():
    recorded = recorded_calls(run().messages)
    assert [(c.index, c.step, c.result) for c in recorded] == [
        (0, 1, {"status": "late"}),
        (1, 1, {"status": "shipped"}),
        (2, 2, {"status": "still late"}),
    ]
    messages = run().messages
    earlier, third = replay_calls(messages, 6)  # the result position of step 2's call
    assert [c.index for c in earlier] == [0, 1] and third.index == 2
    # the second call with the same arguments gets the second recorded one
    assert match_call("arguments", third, recorded, earlier).content == '{"status": "still late"}'
    first = replay_calls(messages, 3)[1]
    assert match_call("arguments", first, recorded, []).index == 0
    moved = third.model_copy(update={"arguments": {"order": 9}})
    assert match_call("arguments", moved, recorded, earlier) is None
    assert match_call("position", moved, recorded, earlier).index == 2  # same place, same tool
    assert match_call("position", moved.model_copy(update={"name": "refund"}), recorded, earlier) is None
    assert match_call(lambda call, rec, before: rec[0], moved, recorded, earlier).index == 0
    with pytest.raises(ConfigurationError):
        replay_calls(messages, 7)


def test_a_replay_sends_each_recorded_input_or_starts_from_a_seeded_step():
    messages = [*run().messages, Message.user("and order 2?"), Message.user("thanks"), turn(text="ok")]
    source = run().model_copy(update={"messages": messages})
    assert [len(g) for _, g in input_groups(messages)] == [1, 2]
    plan = replay_plan(source, "s1.replay-t")
    assert plan.seed is None and [[m.content for m in r] for r in plan.runs] == [
        ["order 1"],
        ["and order 2?", "thanks"],
    ]
    later = replay_plan(source, "s1.replay-t", from_step=1)
    assert later.seed is not None and later.seed.session_id == "s1.replay-t" and later.seed.step_index == 1
    assert later.seed.messages == messages[:5] and later.seed.status == CheckpointStatus.IN_PROGRESS
    assert [len(r) for r in later.runs] == [0, 2]
    with pytest.raises(ConfigurationError, match="has 4 steps"):
        replay_plan(source, "x", from_step=5)
    assert source_of(replay_session_id("a.replay-b", "t1")) == "a.replay-b" and source_of("plain") is None
    with pytest.raises(ConfigurationError):
        replay_session_id("a", "bad tag")


def test_the_report_ranks_the_worst_first_and_thresholds_count_or_share():
    same = ReplayPair(source=run(order=1), replay=run(order=1), replay_session_id="r1")
    answer = ReplayPair(source=run(order=2), replay=run("other", order=2), replay_session_id="r2")
    fewer = run(order=3)
    fewer = fewer.model_copy(update={"messages": [*fewer.messages[:5], turn(text="done")]})
    steps = ReplayPair(source=run(order=3), replay=fewer, replay_session_id="r3")
    broken = ReplayPair(source=run(order=4), replay=None, replay_session_id="r4", error="boom")
    report = build_report("t", [same, answer, steps, broken], {"one": lambda a, b: 1.0})
    assert [s.source_session_id for s in report.sessions] == ["s4", "s3", "s2", "s1"]
    assert [(s.status, s.diverged_at) for s in report.sessions] == [
        ("missing", None), ("diverged", 2), ("diverged", 3), ("identical", None),
    ]  # fmt: skip
    assert (report.identical, report.diverged, report.failed, report.same_tools) == (1, 2, 1, 2)
    assert report.sessions[1].drift.step_count.b == 2 and report.sessions[2].answer_changed
    assert report.score_means == {"one": 1.0}
    assert report.over(3) is None and report.over(2) is not None
    assert report.over("75%") is None and report.over("50%") == "3 of 4 replayed sessions changed (allowed: 50%)"
    for bad in ("x", "1.5", "150%", "-1"):
        with pytest.raises(ConfigurationError):
            parse_threshold(bad)
    suite = ET.fromstring(report.junit_xml()).find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "2" and suite.get("errors") == "1"
    assert "s3" in report.table() and "s1" not in report.table(changed_only=True)
