"""Context policies on transcripts, without Temporal: what a request carries, and what a
plan costs (it reads the head and the tail it keeps, never the whole transcript)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from durable_agents import KeepLastTurns, SummarizeOlder, TokenBudget
from durable_agents.checkpoint.context import (
    SUMMARY_HEADING,
    estimate_tokens,
    plan_context,
    render_window,
    sent_messages,
    step_position,
    summary_request,
)
from durable_agents.checkpoint.context_policy import ContextSummary
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.checkpoint.format import Message, Role, RunConfig, ToolCall


def transcript(turns: int, *, calls: int = 2, seed: int = 0, inputs_every: int = 5) -> list[Message]:
    """System prompt, a first user message, then ``turns`` assistant turns with their results
    (and now and then more user input between turns)."""
    rnd = random.Random(seed)
    messages = [Message.system("You work."), Message.user("the task")]
    for t in range(turns):
        n = rnd.randint(0, calls)
        tool_calls = [ToolCall(id=f"call_{i}", name="work", arguments={"t": t, "i": i}) for i in range(n)]
        messages.append(
            Message(
                role=Role.ASSISTANT, content=f"turn {t} " + "w" * rnd.randint(0, 300), tool_calls=tool_calls or None
            )
        )
        messages += [Message.tool_result(c, f"result {t}.{c.id} " + "r" * rnd.randint(0, 600)) for c in tool_calls]
        if t % inputs_every == inputs_every - 1:
            messages.append(Message.user(f"more input after turn {t}"))
    return messages


def assert_valid(sent: list[Message]) -> None:
    """What every provider accepts: the system prompt first, the task next, and each tool
    result right after its call's turn (or another result of it), never alone."""
    assert sent[0].role == Role.SYSTEM and sent[0].content == "You work."
    first = next(m for m in sent if m.role != Role.SYSTEM)  # (after the system prompt: a summary, if any)
    assert first.role == Role.USER and first.content == "the task"
    for i, message in enumerate(sent):
        if message.role == Role.TOOL:
            j = i - 1
            while sent[j].role == Role.TOOL:
                j -= 1
            turn = sent[j]
            assert turn.role == Role.ASSISTANT and turn.tool_calls, f"result {i} without its call"
            assert [c.id for c in turn.tool_calls][: i - j] == [m.tool_call_id for m in sent[j + 1 : i + 1]]
    # every call of every sent turn has its result sent (the turn is whole)
    for i, message in enumerate(sent):
        if message.role == Role.ASSISTANT and message.tool_calls:
            results = sent[i + 1 : i + 1 + len(message.tool_calls)]
            assert [m.tool_call_id for m in results] == [c.id for c in message.tool_calls]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("turns", [1, 3, 10])
def test_keep_last_turns_sends_the_head_and_exactly_the_last_whole_turns(seed: int, turns: int) -> None:
    messages = transcript(60, seed=seed)
    window = plan_context(messages, len(messages), KeepLastTurns(turns), run_start=1).window
    sent = render_window(messages, window)
    assert_valid(sent)
    assert sum(1 for m in sent if m.role == Role.ASSISTANT) == turns
    # the tail is the transcript's own end, unchanged
    tail = sent[2:]
    assert messages[-len(tail) :] == tail


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget", [200, 1500, 6000])
def test_a_token_budget_sends_the_longest_tail_of_whole_turns_that_fits(seed: int, budget: int) -> None:
    messages = transcript(80, seed=seed)
    sent = render_window(messages, plan_context(messages, len(messages), TokenBudget(budget), run_start=1).window)
    assert_valid(sent)
    total = sum(estimate_tokens(m) for m in sent)
    tail = sent[2:]
    start = len(messages) - len(tail)
    assert messages[start:] == tail
    newest_turn = max(i for i, m in enumerate(messages) if m.role != Role.TOOL)
    if start < newest_turn:  # more than the newest turn: within the budget
        assert total <= budget
    # one more turn (back to the previous user or assistant message) would not fit
    previous = max(i for i in range(2, start) if messages[i].role != Role.TOOL)
    assert total + sum(estimate_tokens(m) for m in messages[previous:start]) > budget


def test_the_newest_turn_is_sent_even_when_it_alone_is_over_the_budget() -> None:
    messages = transcript(10, seed=1)
    call = ToolCall(id="big", name="work", arguments={})
    messages += [Message(role=Role.ASSISTANT, tool_calls=[call]), Message.tool_result(call, "x" * 50_000)]
    sent = render_window(messages, plan_context(messages, len(messages), TokenBudget(100), run_start=1).window)
    assert sent[2:] == messages[-2:]


def test_the_first_user_message_is_the_current_runs() -> None:
    messages = transcript(20, seed=2)
    run_start = len(messages)
    messages.append(Message.user("the second run's task"))
    for t in range(6):
        call = ToolCall(id=f"c{t}", name="work", arguments={})
        messages += [Message(role=Role.ASSISTANT, tool_calls=[call]), Message.tool_result(call, "ok")]
    sent = render_window(messages, plan_context(messages, len(messages), KeepLastTurns(2), run_start=run_start).window)
    assert [m.content for m in sent[:2]] == ["You work.", "the second run's task"]
    assert len(sent) == 2 + 4


class CountingMessages(Sequence[Message]):
    """A transcript that counts the messages read from it."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages, self.reads = messages, 0

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        self.reads += 1 if isinstance(index, int) else len(range(*index.indices(len(self.messages))))
        return self.messages[index]


@pytest.mark.parametrize(
    "policy",
    [KeepLastTurns(5), TokenBudget(3000), SummarizeOlder(max_turns=8), SummarizeOlder(max_tokens=4000)],
    ids=lambda p: p.kind,
)
def test_a_plan_reads_what_it_keeps_not_the_whole_transcript(policy) -> None:  # type: ignore[no-untyped-def]
    reads = []
    tail = transcript(40, seed=3)[2:]
    for turns in (200, 4000):
        messages = transcript(turns, seed=3) + tail  # the same end after a shorter or a longer session
        summary_at = None
        if isinstance(policy, SummarizeOlder):  # a session under this policy has a recent summary
            end = len(messages) - 12
            while messages[end].role == Role.TOOL:
                end += 1
            marker = ContextSummary(start=2, end=end)
            messages.append(Message(role=Role.SYSTEM, content="earlier: work", summary=marker))
            summary_at = len(messages) - 1
            call = ToolCall(id="last", name="work", arguments={})
            messages += [Message(role=Role.ASSISTANT, tool_calls=[call]), Message.tool_result(call, "ok")]
        counted = CountingMessages(messages)
        plan_context(counted, len(messages), policy, run_start=1, summary_at=summary_at)
        reads.append(counted.reads)
    assert reads[1] == reads[0] and reads[0] < 200, reads  # the same, whatever the length


def test_summarize_older_asks_for_a_summary_past_its_limit_then_sends_it_in_place_of_the_older_turns() -> None:
    policy = SummarizeOlder(max_turns=6, keep_turns=3)
    messages = transcript(6, seed=4)
    assert plan_context(messages, len(messages), policy, run_start=1).summarize is None  # within the limit
    messages = transcript(7, seed=4)
    plan = plan_context(messages, len(messages), policy, run_start=1)
    task = plan.summarize
    assert task is not None and task.previous is None and task.start == 1  # after the system prompt
    summarised = [m for a, b in task.ranges for m in messages[a:b]]
    assert summarised == messages[1 : task.end]  # the task too (it is sent as well: it gives context)
    assert sum(1 for m in messages[task.end :] if m.role == Role.ASSISTANT) == 3
    assert messages[task.end].role != Role.TOOL
    request = summary_request(messages, task)
    assert request[0].role == Role.SYSTEM and "turn 0" in (request[1].content or "")

    # stored where the turn goes, the summary is sent in place of what it covers
    marker = ContextSummary(start=task.start, end=task.end)
    messages.append(Message(role=Role.SYSTEM, content="S1", summary=marker))
    at = len(messages) - 1
    plan = plan_context(messages, len(messages), policy, run_start=1, summary_at=at)
    assert plan.summarize is None
    sent = render_window(messages, plan.window)
    assert_valid(sent)
    assert sent[1].role == Role.SYSTEM and sent[1].content == f"{SUMMARY_HEADING}\n\nS1"
    assert sent[2] == messages[1]  # the task
    assert sent[3:] == [m for m in messages[task.end :] if m.summary is None]
    # the next summary extends this one (its text is part of the input) and keeps its start
    for t in range(4):
        call = ToolCall(id=f"n{t}", name="work", arguments={})
        messages += [Message(role=Role.ASSISTANT, tool_calls=[call]), Message.tool_result(call, "ok")]
    nxt = plan_context(messages, len(messages), policy, run_start=1, summary_at=at).summarize
    assert nxt is not None and nxt.previous == at and nxt.start == 1 and nxt.end > task.end
    assert all(not (a <= at < b) for a, b in nxt.ranges)  # a summary is never summarised as a message
    assert "<previous-summary>\nS1\n" in (summary_request(messages, nxt)[1].content or "")


def test_the_request_of_any_step_is_rebuilt_from_the_transcript() -> None:
    messages = transcript(30, seed=5)
    windows = {}
    for position in [i for i, m in enumerate(messages) if m.role == Role.ASSISTANT][5:]:
        window = plan_context(messages, position, KeepLastTurns(2), run_start=1).window
        windows[position] = render_window(messages, window)
        messages[position] = messages[position].model_copy(update={"context": window})
    for position, sent in windows.items():
        assert sent_messages(messages, position) == sent
    first = step_position(messages, 1)
    assert first is not None and sent_messages(messages, first) == messages[:first]  # made without a policy
    assert step_position(messages, 31) is None


def test_policies_are_checked_and_recorded_in_the_run_config() -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        KeepLastTurns(0)
    with pytest.raises(ConfigurationError, match="exactly one of max_turns and max_tokens"):
        SummarizeOlder()
    with pytest.raises(ConfigurationError, match="below max_turns"):
        SummarizeOlder(max_turns=4, keep_turns=4)
    for policy in (KeepLastTurns(20), TokenBudget(8000), SummarizeOlder(max_tokens=8000, model="openai:gpt-4.1-mini")):
        config = RunConfig(agent="a", model="openai:gpt-4.1", context=policy)
        assert RunConfig.model_validate_json(config.to_json()).context == policy
    assert SummarizeOlder(max_turns=40).keep_turns == 20
