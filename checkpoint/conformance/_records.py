"""Checks of the stored record: the format, writes, and where the data lives."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from durable_agents.checkpoint.conformance._base import (
    T0,
    ConformanceBase,
    StoreHandles,
    assistant,
    full_checkpoint,
    grow,
    latest,
    loaded,
    requires,
)
from durable_agents.checkpoint.format import FORMAT_VERSION, Checkpoint, CheckpointStatus
from durable_agents.checkpoint.stores.base import StoreCapabilities


class RecordChecks(ConformanceBase):
    # -- format -----------------------------------------------------------------
    def test_round_trip_keeps_the_exact_camel_case_format(self, stores: StoreHandles) -> None:
        store = stores()
        cp = full_checkpoint()
        store.save(cp)
        data = json.loads(loaded(store, "a").to_json())
        assert loaded(store, "a").to_json() == cp.to_json()
        assert data["stepIndex"] == 3 and data["approvalId"] == "ap-1" and data["formatVersion"] == FORMAT_VERSION
        assert data["messages"][2]["toolCalls"][0] == {"id": "call_1", "name": "t", "arguments": {"i": 1}}
        assert data["messages"][3]["toolCallId"] == "call_1" and data["messages"][3]["isError"] is True
        assert data["remainingToolCalls"][0]["id"] == "c2" and data["fingerprint"]["digest"] == "d"
        assert [p["type"] for p in data["messages"][1]["parts"]] == ["text", "image", "opaque"]
        assert data["usage"]["cacheReadTokens"] == 2 and data["usage"]["cacheWriteTokens"] == 1
        assert store.load_messages("a", 1, 2) == [cp.messages[1]]
        assert latest(store, "a").message_count == 4
        assert store.load("missing") is None and store.load_header("missing") is None
        assert store.load_messages("missing") == []

    def test_every_status_round_trips_and_filters(self, stores: StoreHandles) -> None:
        store = stores()
        for i, status in enumerate(CheckpointStatus):
            store.save(
                full_checkpoint(
                    f"s-{status.value}",
                    status=status,
                    updated_at=T0 + timedelta(minutes=i),
                    approval_id="ap" if status == CheckpointStatus.AWAITING_APPROVAL else None,
                )
            )
        for status in CheckpointStatus:
            assert loaded(store, f"s-{status.value}").status == status
            assert [s.session_id for s in store.list_sessions(status=status)] == [f"s-{status.value}"]
            assert [s.session_id for s in store.list_sessions(status=status.value)] == [f"s-{status.value}"]  # type: ignore[arg-type]

    def test_a_record_from_an_older_format_version_loads_as_in_progress(self, stores: StoreHandles) -> None:
        store = stores()
        store.save(Checkpoint.model_validate_json(OLD_FORMAT))
        old = loaded(store, "old")
        assert old.status == CheckpointStatus.IN_PROGRESS and old.fingerprint is None
        assert old.format_version == 1 and old.step_index == 2 and old.business_state == {"x": 1}
        assert [m.content for m in old.messages] == ["hi", "hello"]
        assert store.list_sessions(status=CheckpointStatus.IN_PROGRESS)[0].session_id == "old"

    @requires("history")
    def test_an_older_format_record_reads_back_from_history(self, stores: StoreHandles) -> None:
        store = stores()
        store.save(Checkpoint.model_validate_json(OLD_FORMAT))
        assert store.history("old")[0].status == CheckpointStatus.IN_PROGRESS

    # -- writes ----------------------------------------------------------------------
    def test_rewriting_the_same_positions_is_idempotent(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 2)
        header = latest(store, "a")
        last = store.load_messages("a", header.message_count - 1)
        before = loaded(store, "a")
        for _ in range(2):  # a retried activity writes the same message at the same position again
            store.append(header.model_copy(update={"updated_at": None}), header.message_count - 1, last)
            store.save(loaded(store, "a").model_copy(update={"updated_at": None}))
        assert loaded(store, "a").messages == before.messages
        with pytest.raises(ValueError):
            store.append(header, header.message_count + 1, [])  # count mismatch
        with pytest.raises(ValueError):
            store.append(
                header.model_copy(update={"message_count": header.message_count + 2}),
                header.message_count + 1,
                [assistant(9)],
            )  # a gap

    def test_append_new_writes_only_where_the_session_holds_no_message_yet(self, stores: StoreHandles) -> None:
        """What a model turn is stored with: a second writer at the same position (an attempt
        Temporal gave up on, still running) neither replaces nor repeats the first one's turn."""
        store = stores()
        grow(store, "a", 1)
        header = latest(store, "a")
        at = header.message_count
        grown = header.model_copy(update={"message_count": at + 1, "step_index": 2, "updated_at": None})
        assert store.append_new(grown, at, [assistant(7)]) is True
        first = loaded(store, "a")
        assert store.append_new(grown, at, [assistant(8)]) is False  # the other attempt's turn: refused
        assert store.append_new(grown, at, [assistant(7)]) is False  # even the same one writes nothing
        assert loaded(store, "a").messages == first.messages and first.messages[at] == assistant(7)
        assert store.append_new(Checkpoint(session_id="new", messages=[]).header(), 0, []) is True
        assert store.load_header("new") is not None

    @requires("history")
    def test_a_retried_write_adds_no_history_entry(self, stores: StoreHandles) -> None:
        store = stores()
        grow(store, "a", 2)
        header = latest(store, "a")
        last = store.load_messages("a", header.message_count - 1)
        before = store.history("a")
        for _ in range(2):
            store.append(header.model_copy(update={"updated_at": None}), header.message_count - 1, last)
            store.save(loaded(store, "a").model_copy(update={"updated_at": None}))
        assert loaded(store, "a").messages == before[0].checkpoint.messages
        assert len(store.history("a")) == len(before)

    # -- where the data lives ------------------------------------------------------------
    def test_the_durable_flag_matches_the_claims(self, stores: StoreHandles, store_capabilities: StoreCapabilities):
        assert isinstance(store_capabilities, StoreCapabilities)
        assert stores().durable == store_capabilities.durable  # the worker refuses a store that is not durable

    @requires("durable")
    def test_a_save_outlives_the_handle_that_wrote_it(self, stores: StoreHandles) -> None:
        first = stores()
        first.save(full_checkpoint())
        grow(first, "b", 2)
        stores.close(first)
        again = stores()
        assert loaded(again, "a").to_json() == full_checkpoint().to_json()
        assert len(loaded(again, "b").messages) == 4

    @requires("shared_across_processes")
    def test_a_second_handle_sees_the_first_ones_writes(self, stores: StoreHandles) -> None:
        first, second = stores(), stores()
        grow(first, "a", 2)
        assert second.load("a") == first.load("a")
        grow(second, "b", 1)
        assert {s.session_id for s in first.list_sessions()} == {"a", "b"}
        second.delete("a")
        assert first.load("a") is None

    # -- run input ----------------------------------------------------------------
    def test_run_input_is_kept_by_token_until_dropped(self, stores: StoreHandles) -> None:
        from durable_agents.checkpoint.format import Message

        store = stores()
        try:
            store.put_run_input("a", "t1", [Message.user("x" * 100_000), Message.user("two")])
        except NotImplementedError:
            pytest.skip("the store keeps no run input (runs get their input inline)")
        store.put_run_input("a", "t2", [Message.user("other")])
        assert [m.content for m in store.run_input("a", "t1") or []] == ["x" * 100_000, "two"]
        assert store.run_input("a", "missing") is None and store.run_input("b", "t1") is None
        store.put_run_input("a", "t1", [Message.user("again")])  # a retried write replaces
        assert [m.content for m in store.run_input("a", "t1") or []] == ["again"]
        store.drop_run_input("a", "t1")
        store.drop_run_input("a", "t1")  # idempotent
        assert store.run_input("a", "t1") is None
        store.delete("a")
        assert store.run_input("a", "t2") is None

    def test_prune_keeps_waiting_sessions_and_the_ones_named(self, stores: StoreHandles) -> None:
        store = stores()
        for sid, status in (
            ("done", CheckpointStatus.FINISHED),
            ("waits", CheckpointStatus.AWAITING_APPROVAL),
            ("live", CheckpointStatus.IN_PROGRESS),
        ):
            store.save(full_checkpoint().model_copy(update={"session_id": sid, "status": status, "updated_at": T0}))
        assert store.prune(timedelta(seconds=1), keep={"live"}) == 1
        assert {s.session_id for s in store.list_sessions()} == {"waits", "live"}
        assert store.prune(timedelta(seconds=1), include_waiting=True) == 2
        assert store.list_sessions() == []


OLD_FORMAT = json.dumps(
    {
        "sessionId": "old",
        "stepIndex": 2,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        "usage": {"inputTokens": 1, "outputTokens": 2, "requests": 1},
        "businessState": {"x": 1},
    }
)
"""A record as the first release wrote it (no formatVersion, status or fingerprint)."""
