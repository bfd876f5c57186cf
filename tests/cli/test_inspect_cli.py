"""`sessions`, `show`, `history`, `diff`, `delete`, `prune`: readable text, and `--json` in the
documented format (parsed back into the checkpoint models)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.compare import TrajectoryComparison
from durable_agents.checkpoint.format import Checkpoint, CheckpointStatus, HistoryEntry, Message, SessionSummary
from tests.cli.conftest import Cli, one_line_error, session_id


@pytest.fixture(scope="module")
def runs(cli):
    """Sessions made once for this module: two bookings, one paused payment, one with tool errors."""
    ids = {
        "booked": session_id("book"),
        "again": session_id("book"),
        "paused": session_id("pay"),
        "bad": session_id("bad"),
    }
    jobs = [
        ("booker", "Book a table for 2", ids["booked"]),
        ("booker", "Book a table for 2", ids["again"]),
        ("payments", "Charge the customer", ids["paused"]),
        ("bad", "Try the tools", ids["bad"]),
    ]
    with ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(lambda job: cli.ok("run", job[0], job[1], "--session", job[2]), jobs))
    return ids


def test_sessions_table_filters_and_json(cli, runs):
    table = cli.ok("sessions")
    assert table.splitlines()[0].split() == ["SESSION", "AGENT", "STATUS", "STEP", "UPDATED", "PENDING", "APPROVAL"]
    row = next(line for line in table.splitlines() if line.startswith(runs["paused"]))
    assert "payments" in row and "awaiting-approval" in row and " ago)" in row
    summaries = [SessionSummary.model_validate(s) for s in cli.read_json("sessions", "--status", "awaiting-approval")]
    paused = next(s for s in summaries if s.session_id == runs["paused"])
    assert paused.approval_id and paused.step_index == 1 and paused.agent == "payments"
    assert {s.status for s in summaries} == {CheckpointStatus.AWAITING_APPROVAL}
    booked = {s.session_id for s in map(SessionSummary.model_validate, cli.read_json("sessions", "--agent", "booker"))}
    assert {runs["booked"], runs["again"]} <= booked and runs["paused"] not in booked
    assert cli.read("sessions", "--agent", "nobody").strip() == "no sessions matching"


def test_show_renders_turns_results_errors_and_the_pending_approval(cli, runs):
    out = cli.ok("show", runs["paused"], "--ui-url", "http://ui.test")
    assert "status    awaiting-approval" in out and "── step 1" in out
    assert '⚙ tool     charge_card({"amount":10}) [call_1_1]  ⏸ awaiting approval' in out
    assert 'charge_card({"amount":20}) [call_1_2]  … waits for the approval' in out
    assert f"approve {runs['paused']} --approval-id" in out
    assert out.rstrip().endswith(f"Temporal UI: http://ui.test/namespaces/default/workflows/{runs['paused']}")
    bad = cli.read("show", runs["bad"])
    assert "✗ error    no_such_tool" in bad and "✗ error    flaky" in bad and "Recovered from the errors." in bad


def test_show_json_is_the_checkpoint_format(cli, runs):
    text = cli.ok("show", runs["booked"], "--json")
    parsed = Checkpoint.model_validate_json(text)
    store = SqliteStore(cli.store_path)
    try:
        assert parsed == store.load(runs["booked"])
    finally:
        store.close()
    assert '"sessionId"' in text and '"stepIndex"' in text and '"toolCalls"' in text  # camelCase


def test_history_json_entries_and_limit(cli, runs):
    entries = [HistoryEntry.model_validate(e) for e in cli.json("history", runs["booked"])]
    assert entries[0].step == 3 and entries[0].status == CheckpointStatus.FINISHED  # newest first
    assert {e.step for e in entries} == {0, 1, 2, 3}
    assert all(e.checkpoint.session_id == runs["booked"] for e in entries)
    assert len(cli.read_json("history", runs["booked"], "--limit", "2")) == 2
    table = cli.read("history", runs["booked"], "--limit", "3")
    assert table.splitlines()[0].split()[:5] == ["#", "STEP", "SAVED", "STATUS", "MESSAGES"]  # numbered: fork --entry
    assert "Booked a table for 2 at Roscioli" in table and f"fork {runs['booked']} --from-step N" in table


def test_diff_of_identical_and_different_runs(cli, runs):
    same = cli.ok("diff", runs["booked"], runs["again"])
    assert "identical trajectories (3 steps)" in same and "drift: none" in same
    cmp = TrajectoryComparison.model_validate_json(cli.ok("diff", runs["booked"], runs["paused"], "--json"))
    assert cmp.diverged_at == 1 and len(cmp.a) == 3 and len(cmp.b) == 1
    assert cmp.drift.step_count.a == 3 and cmp.drift.step_count.b == 1
    text = cli.read("diff", runs["booked"], runs["paused"])
    assert "diverged at step 1" in text and ">>" in text and "step count: a 3  b 1" in text


def test_delete_refuses_a_live_run_and_keeps_history_when_asked(cli, runs):
    one_line_error(cli("delete", runs["paused"]), 1, "has a live run: cancel it first")
    sid = session_id("del")
    cli.ok("run", "booker", "Book", "--session", sid)
    assert cli.ok("delete", sid, "--keep-history").strip() == f"deleted session {sid} (history kept)"
    one_line_error(cli.inproc("show", sid), 2, f"no session '{sid}'")
    assert len(cli.read_json("history", sid)) > 0  # still forkable from its history
    assert cli.ok("delete", runs["again"]).strip() == f"deleted session {runs['again']}"
    one_line_error(cli.inproc("history", runs["again"]), 2, "no session")


def test_prune_older_than(tmp_path):
    store = SqliteStore(tmp_path / "old.db")
    now = datetime.now(UTC)
    for sid, age in (("old", timedelta(days=40)), ("new", timedelta(hours=1))):
        store.save(
            Checkpoint(
                session_id=sid, agent="booker", messages=[Message.user("hi")], status="finished", updated_at=now - age
            )
        )
    store.close()
    cli = Cli(address="127.0.0.1:1", task_queue="unused", store_path=tmp_path / "old.db")  # no Temporal needed
    out = cli.ok("prune", "--older-than", "30d")
    assert out.splitlines()[0] == "pruned 1 session, and history entries, last saved more than 30d ago"
    assert [s["sessionId"] for s in cli.read_json("sessions")] == ["new"]
    one_line_error(cli.inproc("prune", "--older-than", "3 weeks"), 2, "invalid duration '3 weeks'")
    one_line_error(cli.inproc("prune"), 2, "--older-than")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["show", "nope"], "no session 'nope'"),
        (["history", "nope"], "no session 'nope'"),
        (["diff", "nope", "nope-2"], "no session 'nope'"),
        (["delete", "nope"], "no session 'nope'"),
        (["history", "x", "--limit", "0"], "invalid count '0'"),
        (["sessions", "--status", "done"], "invalid choice: 'done'"),
    ],
)
def test_read_commands_bad_arguments_exit_2(args, needle, tmp_path):
    cli = Cli(address="127.0.0.1:1", task_queue="unused", store_path=tmp_path / "empty.db")
    one_line_error(cli.inproc(*args), 2, needle)


def test_delete_takes_a_parents_sub_agent_sessions_with_it_and_refuses_a_child_alone(cli):
    """A sub-agent session is part of its parent's record: ``delete PARENT`` deletes it (and its
    own sub-agents'); deleting it alone while its parent exists is refused without --force."""
    parent = session_id("team")
    child, grandchild = f"{parent}/3", f"{parent}/3/2"
    store = SqliteStore(cli.store_path)
    store.save(Checkpoint(session_id=parent, agent="lead", messages=[Message.user("go")], status="finished"))
    for sid, of in ((child, parent), (grandchild, child)):
        store.save(
            Checkpoint(
                session_id=sid, agent="writer", messages=[Message.user("task")], status="finished",
                parent_session_id=of, parent_tool_call_id="call_1",
            )
        )  # fmt: skip
    one_line_error(cli.inproc("delete", child), 1, f"is a sub-agent session of '{parent}'")
    assert cli.ok("delete", parent).strip() == f"deleted session {parent} and its 2 sub-agent sessions"
    assert [store.load_header(s) for s in (parent, child, grandchild)] == [None, None, None]
    store.close()
