"""compare_trajectories(): steps, divergence, drift, and the text summary."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agents.checkpoint import (
    Checkpoint,
    CheckpointStatus,
    ConfigurationError,
    FinishReason,
    Message,
    SqliteStore,
    ToolCall,
)
from durable_agents.checkpoint.compare import (
    TrajectoryComparison,
    compare_trajectories,
    format_comparison,
    trajectory_steps,
)
from durable_agents.checkpoint.fork import Patch, ToolResultPatch, fork
from durable_agents.checkpoint.format import Role


def _call(cid: str, name: str, **args) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=args)


def _turn(text: str | None, *calls: ToolCall) -> Message:
    return Message(role=Role.ASSISTANT, content=text, tool_calls=list(calls) or None)


def _res(call: ToolCall, content: str, error: bool = False) -> Message:
    return Message.tool_result(call, content, is_error=error)


def _run(prefix: str = "") -> list[Message]:
    """Three steps: weather(Paris) -> forecast, then book + pay, then a final answer."""
    w, b, p = (
        _call(prefix + "1", "weather", city="Paris"),
        _call(prefix + "2", "book"),
        _call(prefix + "3", "pay", eur=10),
    )
    return [
        Message.system("sys"),
        Message.user("plan"),
        _turn("checking", w),
        _res(w, '{"forecast": "sun"}'),
        _turn(None, b, p),
        _res(b, "booked"),
        _res(p, "nope", error=True),
        _turn("done"),
    ]


def test_steps_one_per_assistant_turn_with_results_by_id():
    steps = trajectory_steps(_run())
    assert [s.index for s in steps] == [1, 2, 3]  # numbered like stepIndex
    assert steps[0].text == "checking" and steps[0].tool_calls[0].result == {"forecast": "sun"}
    book, pay = steps[1].tool_calls
    assert book.result == "booked" and not book.is_error
    assert pay.result == "nope" and pay.is_error and pay.arguments == {"eur": 10}
    assert steps[2].tool_calls == []


def test_identical_runs_ignore_call_ids():
    cmp = compare_trajectories(_run("x"), _run("y"))
    assert cmp.diverged_at is None and cmp.drift.empty
    assert "identical trajectories (3 steps)" in format_comparison(cmp)


def test_changed_tool_result_diverges_without_tool_drift():
    a, b = _run(), _run()
    b[3] = b[3].model_copy(update={"content": '{"forecast": "rain"}'})
    cmp = compare_trajectories(a, b)
    assert cmp.diverged_at == 1 and cmp.drift.empty
    assert cmp.b[0].tool_calls[0].result == {"forecast": "rain"}


def test_changed_arguments():
    a, b = _run(), _run()
    b[2] = _turn("checking", _call("1", "weather", city="Lyon"))
    cmp = compare_trajectories(a, b)
    assert cmp.diverged_at == 1
    d = cmp.drift.arguments[0]
    assert (d.step, d.tool, d.a, d.b) == (1, "weather", {"city": "Paris"}, {"city": "Lyon"})
    assert cmp.drift.tool_order == []


def test_changed_tool_order():
    a, b = _run(), _run()
    book, pay = b[4].tool_calls
    b[4] = _turn(None, pay, book)
    b[5], b[6] = b[6], b[5]
    cmp = compare_trajectories(a, b)
    assert cmp.diverged_at == 2
    order = cmp.drift.tool_order[0]
    assert (order.step, order.a, order.b) == (2, ["book", "pay"], ["pay", "book"])
    assert cmp.drift.arguments == []


def test_extra_step_diverges_at_shorter_length_both_ways():
    a, b = _run(), [*_run(), Message.user("more"), _turn("again")]
    for x, y in ((a, b), (b, a)):
        cmp = compare_trajectories(x, y)
        assert cmp.diverged_at == 4
        assert (cmp.drift.step_count.a, cmp.drift.step_count.b) == (len(cmp.a), len(cmp.b))
    assert "(no step)" in format_comparison(compare_trajectories(a, b))


def test_finish_reason_from_checkpoints_only():
    a = Checkpoint(session_id="a", messages=_run(), finish_reason=FinishReason.STOP)
    b = Checkpoint(session_id="b", messages=_run(), finish_reason=FinishReason.MAX_STEPS)
    cmp = compare_trajectories(a, b)
    assert cmp.diverged_at is None
    assert (cmp.drift.finish_reason.a, cmp.drift.finish_reason.b) == (FinishReason.STOP, FinishReason.MAX_STEPS)
    assert compare_trajectories(a, b.messages).drift.finish_reason is None
    assert "finish reason: a stop  b max-steps" in format_comparison(cmp)


def test_json_is_camel_case():
    a, b = _run(), _run()[:-1]
    data = json.loads(compare_trajectories(a, b).to_json())
    assert data["divergedAt"] == 3 and data["drift"]["stepCount"] == {"a": 3, "b": 2}
    assert data["a"][1]["toolCalls"][1]["isError"] is True
    assert TrajectoryComparison.model_validate(data) == compare_trajectories(a, b)


def test_rejects_other_inputs():
    with pytest.raises(ConfigurationError):
        compare_trajectories("text", _run())
    with pytest.raises(ConfigurationError):
        compare_trajectories([{"role": "user"}], _run())


def test_format_marks_divergence_side_by_side():
    a, b = _run(), _run()
    b[2] = _turn("checking", _call("1", "weather", city="Lyon"))
    text = format_comparison(compare_trajectories(a, b))
    lines = text.splitlines()
    assert lines[0] == "diverged at step 1 (a: 3 steps, b: 3 steps)"
    diverged = next(line for line in lines if line.startswith(">>"))
    assert "text: checking" in diverged
    assert any("Paris" in line and "Lyon" in line for line in lines)
    assert any("(same)" in line for line in lines)
    assert "arguments of weather at step 1" in text


def test_fork_with_patched_result_then_compare(tmp_path):
    store = SqliteStore(tmp_path / "c.db")
    msgs = _run()
    store.save(Checkpoint(session_id="trip", messages=msgs[:4], step_index=1))
    store.save(
        Checkpoint(
            session_id="trip",
            messages=msgs,
            step_index=3,
            status=CheckpointStatus.FINISHED,
            finish_reason=FinishReason.STOP,
        )
    )
    forked = fork(store, "trip", 1, Patch(tool_result=ToolResultPatch(tool_call_id="1", result="rain")))
    cmp = compare_trajectories(store.load("trip"), forked.checkpoint)
    assert cmp.diverged_at == 1 and cmp.drift.step_count.b == 1
    assert cmp.drift.finish_reason.a == FinishReason.STOP and cmp.drift.finish_reason.b is None
    store.close()


# -- properties ------------------------------------------------------------------------
_names = st.sampled_from(["search", "read", "write", "pay"])
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=5,
)


@st.composite
def transcripts(draw) -> list[Message]:
    messages = [Message.user(draw(st.text(max_size=10)))]
    for turn in range(draw(st.integers(0, 5))):
        calls = [
            ToolCall(
                id=f"c{turn}_{i}",
                name=draw(_names),
                arguments=draw(st.dictionaries(st.text(max_size=3), _json, max_size=2)),
            )
            for i in range(draw(st.integers(0, 3)))
        ]
        messages.append(_turn(draw(st.none() | st.text(max_size=12)), *calls))
        answered = draw(st.integers(0, len(calls)))
        for call in calls[:answered]:
            content = draw(st.text(max_size=8) | _json.map(json.dumps))
            messages.append(_res(call, content, error=draw(st.booleans())))
        if draw(st.booleans()):
            messages.append(Message.user(draw(st.text(max_size=6))))
    return messages


@settings(max_examples=150, deadline=None)
@given(transcripts())
def test_property_self_comparison_is_identical(x):
    cmp = compare_trajectories(x, x)
    assert cmp.diverged_at is None and cmp.drift.empty
    format_comparison(cmp)


@settings(max_examples=150, deadline=None)
@given(transcripts(), transcripts())
def test_property_diverged_at_is_symmetric(x, y):
    ab, ba = compare_trajectories(x, y), compare_trajectories(y, x)
    assert ab.diverged_at == ba.diverged_at
    if ab.diverged_at is None:
        assert ab.a == ab.b
    else:
        assert ab.a[: ab.diverged_at - 1] == ab.b[: ab.diverged_at - 1]
    format_comparison(ab)
