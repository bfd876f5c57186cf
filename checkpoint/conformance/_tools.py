"""Checks of the tool markers: start counts and results, keyed by transcript position.

The call ``i`` of an assistant turn at position ``p`` has its result at
``p + 1 + i``. Models and OpenAI-compatible servers reuse call ids (``call_0``
in every turn, twice in one turn), so a store never keys results by id.
"""

from __future__ import annotations

import random
from functools import partial

import pytest

from durable_agents.checkpoint.conformance._base import (
    ConformanceBase,
    StoreHandles,
    in_threads,
    latest,
    loaded,
    requires,
    two_handles,
    with_calls,
)
from durable_agents.checkpoint.errors import StoreCorruptError
from durable_agents.checkpoint.format import Message, Role, ToolCall
from durable_agents.checkpoint.stores.base import CheckpointStore, StoreCapabilities


def _result(call_id: str, content: str) -> Message:
    return Message.tool_result(ToolCall(id=call_id, name="t"), content)


def _contents(store: CheckpointStore, start: int) -> list[str | None]:
    return [m.content for m in loaded(store, "a").messages[start:]]


class ToolChecks(ConformanceBase):
    def test_tool_results_are_recorded_once_and_in_call_order(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["c1", "c2"])  # results go at 2 and 3
        r2 = _result("c2", "two")
        assert store.record_tool_result("a", 3, r2, 2, 2) == 2  # waits for position 2
        assert store.tool_result("a", 3) == r2 and store.tool_result("a", 2) is None
        r1 = _result("c1", "one")
        assert store.record_tool_result("a", 2, r1, 2, 2) == 4
        assert store.record_tool_result("a", 2, _result("c1", "one, re-run"), 2, 2) == 4
        assert _contents(store, 2) == ["one", "two"]
        assert store.tool_result("a", 2) == r1  # the first recorded result wins
        with pytest.raises(StoreCorruptError):
            store.record_tool_result("a", 5, r1, 5, 1)  # a batch the checkpoint is not inside

    def test_two_calls_with_the_same_id_in_one_turn_get_two_results(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["call_0", "call_0"])
        assert store.tool_started("a", 2) == 0 and store.tool_started("a", 3) == 0
        assert store.record_tool_result("a", 2, _result("call_0", "first"), 2, 2) == 3
        assert store.tool_result("a", 3) is None
        assert store.record_tool_result("a", 3, _result("call_0", "second"), 2, 2) == 4
        assert _contents(store, 2) == ["first", "second"]
        assert [store.tool_result("a", p).content for p in (2, 3)] == ["first", "second"]  # type: ignore[union-attr]

    def test_an_id_reused_in_a_later_turn_does_not_see_the_earlier_result(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["call_0"])
        store.tool_started("a", 2)
        assert store.record_tool_result("a", 2, _result("call_0", "turn 1"), 2, 1) == 3
        header = latest(store, "a")
        turn = Message(role=Role.ASSISTANT, tool_calls=[ToolCall(id="call_0", name="t")])
        store.append(header.model_copy(update={"message_count": 4, "updated_at": None}), 3, [turn])
        assert store.tool_result("a", 4) is None
        assert store.tool_started("a", 4) == 0  # a start of the earlier call_0 is not this call's
        assert store.record_tool_result("a", 4, _result("call_0", "turn 2"), 4, 1) == 5
        assert _contents(store, 2) == ["turn 1", None, "turn 2"]

    def test_out_of_order_results_append_in_position_order(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["x", "y", "z"])  # results at 2, 3, 4
        assert store.record_tool_result("a", 4, _result("z", "z"), 2, 3) == 2
        assert store.record_tool_result("a", 2, _result("x", "x"), 2, 3) == 3  # 3 is still missing
        assert store.record_tool_result("a", 3, _result("y", "y"), 2, 3) == 5
        assert _contents(store, 2) == ["x", "y", "z"]

    def test_a_re_run_past_a_fully_appended_batch_writes_nothing(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["c1", "c2"])
        for position in (2, 3):
            store.record_tool_result("a", position, _result(f"c{position - 1}", str(position)), 2, 2)
        header = latest(store, "a")
        store.append(header.model_copy(update={"message_count": 5, "updated_at": None}), 4, [Message.user("next")])
        before = loaded(store, "a")
        # a step re-run after a crash, the run having moved on: the count right after its batch
        assert store.record_tool_result("a", 3, _result("c2", "late"), 2, 2) == 4
        assert loaded(store, "a").to_json() == before.to_json()

    def test_a_position_outside_the_batch_is_refused(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["c1", "c2"])
        for position in (1, 4):
            with pytest.raises(ValueError, match="position"):
                store.record_tool_result("a", position, _result("c1", "x"), 2, 2)
        assert store.tool_result("a", 1) is None and store.tool_result("a", 4) is None

    def test_tool_started_counts_previous_starts(self, stores: StoreHandles) -> None:
        store = stores()
        assert store.tool_started("a", 2) == 0
        assert store.tool_started("a", 2) == 1
        assert store.tool_started("a", 3) == 0
        assert store.tool_started("b", 2) == 0  # per session

    def test_a_save_that_shortens_the_transcript_drops_the_markers_past_its_end(self, stores: StoreHandles) -> None:
        store = stores()
        with_calls(store, ["c1", "c2"])
        store.tool_started("a", 2)
        store.record_tool_result("a", 2, _result("c1", "one"), 2, 2)
        store.tool_started("a", 3)
        cp = loaded(store, "a")
        store.save(cp.model_copy(update={"messages": cp.messages[:2], "updated_at": None}))  # a rewind
        assert store.tool_result("a", 2) is None
        assert store.tool_started("a", 3) == 0  # what ran before the rewind is not this call's start
        assert store.record_tool_result("a", 2, _result("c1", "again"), 2, 2) == 3
        assert _contents(store, 2) == ["again"]

    @requires("concurrent")
    def test_concurrent_tool_results_from_two_workers_land_once_in_order(
        self, stores: StoreHandles, store_capabilities: StoreCapabilities
    ) -> None:
        first, second = two_handles(stores, store_capabilities)
        ids = ["call_0"] * 6 + [f"c{i}" for i in range(6)]  # ids repeat, as some servers send them
        with_calls(first, ids)
        jobs = [
            partial(s.record_tool_result, "a", 2 + i, _result(call_id, f"{i}/{n}"), 2, len(ids))
            for i, call_id in enumerate(ids)
            for n, s in enumerate((first, second))
        ]
        random.Random(7).shuffle(jobs)
        in_threads(jobs)
        messages = loaded(first, "a").messages[2:]
        assert [m.tool_call_id for m in messages] == ids
        assert [(m.content or "").split("/")[0] for m in messages] == [str(i) for i in range(len(ids))]
        assert all(m == first.tool_result("a", 2 + i) for i, m in enumerate(messages))
