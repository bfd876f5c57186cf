"""The model turn's decisions as pure functions of what is stored (no Temporal, no store):
where a turn goes and what it is sent (``turn_context``), and what a streamed run's log says
once the turn is stored (``turn_stored_events``). The model activity acts on these; the
crash and streaming suites run them through real workers."""

from __future__ import annotations

from datetime import UTC, datetime

from durable_agents import KeepLastTurns, SummarizeOlder
from durable_agents.checkpoint.context import context_after_summary, turn_context
from durable_agents.checkpoint.context_policy import ContextSummary
from durable_agents.checkpoint.events import StepRetried, TextDelta, TurnStored, step_text, turn_stored_events
from durable_agents.checkpoint.format import InstructionsChange, Message, Role, Usage

AT = datetime(2026, 12, 3, tzinfo=UTC)


def session(turns: int) -> list[Message]:
    messages = [Message.system("You work."), Message.user("the task")]
    for t in range(turns):
        messages += [Message(role=Role.ASSISTANT, content=f"turn {t}"), Message.user(f"more {t}")]
    return messages


def test_a_turn_an_earlier_attempt_stored_is_returned_after_what_was_stored_for_it():
    messages = session(1)
    change = Message(role=Role.SYSTEM, content="New.", instructions_change=InstructionsChange())
    turn = Message(role=Role.ASSISTANT, content="the stored turn")
    stored = [*messages, change, turn]
    plan = turn_context(stored, len(stored), len(messages), instructions="New.", policy=None, instructions_at=4)
    assert plan.position == len(messages) + 1 and plan.stored is turn
    assert plan.change is None and plan.messages == []


def test_instructions_the_session_is_not_sent_are_stored_first_and_sent_in_place_of_the_old():
    messages = session(2)
    plan = turn_context(messages, len(messages), len(messages), instructions="New.", policy=None)
    assert plan.stored is None and plan.position == len(messages) + 1
    assert plan.change is not None and plan.change.content == "New."
    assert plan.change.instructions_change == InstructionsChange(previous=None)
    assert [m.content for m in plan.messages][:2] == ["New.", "the task"]
    assert "You work." not in [m.content for m in plan.messages]
    same = turn_context(messages, len(messages), len(messages), instructions="You work.", policy=None)
    assert same.change is None and same.position == len(messages)
    assert [m.content for m in same.messages] == [m.content for m in messages]


def test_a_policy_cuts_what_is_sent_and_says_how():
    messages = session(6)
    plan = turn_context(messages, len(messages), len(messages), instructions="You work.", policy=KeepLastTurns(2))
    assert plan.window is not None and plan.summarize is None
    assert [m.content for m in plan.messages] == [
        "You work.",
        "the task",
        "more 3",
        "turn 4",
        "more 4",
        "turn 5",
        "more 5",
    ]
    assert plan.window.ranges[-1] == (len(messages) - 5, len(messages))


def test_a_summary_asked_for_is_made_first_and_the_window_then_holds_it():
    messages = session(8)
    policy = SummarizeOlder(max_turns=4)
    plan = turn_context(messages, len(messages), len(messages), instructions="You work.", policy=policy)
    assert plan.summarize is not None and plan.messages == []
    marker = ContextSummary(start=plan.summarize.start, end=plan.summarize.end)
    summary = Message(role=Role.SYSTEM, content="they worked", summary=marker)
    sent, window = context_after_summary(plan, summary, policy)
    texts = [m.content or "" for m in sent]
    assert any("they worked" in t for t in texts) and texts[-2:] == ["turn 7", "more 7"]
    assert any(start <= plan.position < end for start, end in window.ranges)  # the summary is sent


def test_a_turn_whose_deltas_add_up_is_said_stored_once():
    turn = Message(role=Role.ASSISTANT, content="Hello there")
    events = turn_stored_events(
        [], turn, session_id="s", step=1, attempt=1, sent=["Hello", " there"], lost=False,
        usage=Usage(), total=Usage(), replayed=False, at=AT,
    )  # fmt: skip
    assert [(key, type(e)) for key, e in events] == [("turn:1", TurnStored)]


def test_a_turn_rewritten_after_it_streamed_voids_what_streamed_and_sends_its_text():
    turn = Message(role=Role.ASSISTANT, content="Hello, redacted")
    events = turn_stored_events(
        [], turn, session_id="s", step=2, attempt=1, sent=["Hello, secret"], lost=False,
        usage=Usage(), total=Usage(), replayed=False, at=AT,
    )  # fmt: skip
    retried, delta, stored = (e for _, e in events)
    assert isinstance(retried, StepRetried) and retried.discarded_attempts == [1] and retried.attempt == 2
    assert isinstance(delta, TextDelta) and isinstance(stored, TurnStored) and stored.attempt == 2
    log = [TextDelta(session_id="s", step=2, attempt=1, text="Hello, secret"), retried, delta]
    assert step_text(log, 2) == turn.content


def test_a_replayed_turn_keeps_the_deltas_its_attempt_streamed_when_they_add_up():
    seen = [TextDelta(session_id="s", step=3, attempt=2, text="All done")]
    turn = Message(role=Role.ASSISTANT, content="All done")
    events = turn_stored_events(
        seen, turn, session_id="s", step=3, attempt=1, sent=[], lost=False,
        usage=Usage(), total=Usage(), replayed=True, at=AT,
    )  # fmt: skip
    [(key, stored)] = events
    assert key == "turn:3" and isinstance(stored, TurnStored) and stored.attempt == 2 and stored.replayed
