"""`history` numbers its entries; `fork --entry N` forks that one (of several kept for a step)."""

from __future__ import annotations

import pytest

from durable_agents.checkpoint.format import Checkpoint, HistoryEntry, Role
from durable_agents.cli.fork import ForkMade
from tests.cli.conftest import one_line_error, session_id


@pytest.fixture(scope="module")
def booked(cli) -> str:
    sid = session_id("entries")
    cli.ok("run", "booker", "Book a table for 2", "--session", sid)
    return sid


def test_history_numbers_its_entries_newest_first(cli, booked):
    listed = cli.read_json("history", booked)
    assert [e["entry"] for e in listed] == list(range(1, len(listed) + 1))
    entries = [HistoryEntry.model_validate(e) for e in listed]
    table = cli.read("history", booked).splitlines()
    assert table[0].split()[:5] == ["#", "STEP", "SAVED", "STATUS", "MESSAGES"]
    for number, (line, entry) in enumerate(zip(table[1 : len(entries) + 1], entries, strict=True), 1):
        assert line.split()[:2] == [str(number), str(entry.step)]
    assert f"fork {booked} --from-step N --entry #" in cli.read("history", booked)


def test_fork_entry_picks_one_of_the_kept_checkpoints_of_a_step(cli, booked):
    entries = [HistoryEntry.model_validate(e) for e in cli.read_json("history", booked)]
    number = next(n for n, e in enumerate(entries, 1) if e.step == 1 and len(e.checkpoint.messages) == 3)
    out = cli.ok("fork", booked, "--from-step", "1", "--entry", str(number))
    assert out.startswith(f"forked {booked} at step 1 (history entry {number}) into {booked}.fork-1 (3 messages")
    fork = Checkpoint.model_validate_json(cli.read("show", f"{booked}.fork-1", "--json"))
    assert [m.role for m in fork.messages][-1] == Role.ASSISTANT  # both weather calls without a result

    made = ForkMade.model_validate_json(cli.ok("fork", booked, "--from-step", "1", "--json"))
    newest = next(n for n, e in enumerate(entries, 1) if e.step == 1)
    assert made.entry == newest and made.message_count == 5  # without --entry: the step's newest


def test_fork_entry_of_another_step_and_bad_entries_exit_2(cli, booked):
    one_line_error(
        cli("fork", booked, "--from-step", "1", "--entry", "1"), 2, "entry 1 is a checkpoint of step 3, not step 1"
    )
    one_line_error(cli.inproc("fork", booked, "--from-step", "1", "--entry", "0"), 2, "invalid entry '0'")
    one_line_error(cli.inproc("fork", booked, "--from-step", "1", "--entry", "x"), 2, "invalid entry 'x'")


def test_a_result_for_the_second_pending_call_is_shown_as_recorded(cli, booked):
    entries = [HistoryEntry.model_validate(e) for e in cli.read_json("history", booked)]
    number = next(n for n, e in enumerate(entries, 1) if e.step == 1 and len(e.checkpoint.messages) == 3)
    made = ForkMade.model_validate_json(
        cli.ok(
            "fork", booked, "--from-step", "1", "--entry", str(number), "--tool-result", 'call_2_1="closed"', "--json"
        )
    )
    assert made.message_count == 3  # Rome's result waits for Paris's, which the resumed fork runs first
    lines = cli.read("show", made.session_id).splitlines()
    assert any("[call_2_0]" in line and "… no result yet" in line for line in lines)
    assert any(
        "[call_2_1]" in line and "… result recorded, appended once the calls before it have theirs" in line
        for line in lines
    )
