"""`approve`, `reject`, `approvals`: decisions from separate processes, mid-batch pauses."""

from __future__ import annotations

import getpass
import json
import signal
import uuid

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Checkpoint, Role
from durable_agents.cli.approvals import ApprovalView
from durable_agents.client.result import RunResult
from tests.cli.conftest import Cli, one_line_error, session_id, stop


def _paused(cli: Cli) -> tuple[str, str]:
    sid = session_id("pay")
    result = RunResult.model_validate_json(cli.ok("run", "payments", "Charge the customer", "--session", sid, "--json"))
    assert result.finish_reason == "awaiting-approval" and result.approval_id
    return sid, result.approval_id


def _one_result_per_call_in_order(checkpoint: Checkpoint) -> None:
    calls = [c.id for m in checkpoint.messages if m.role == Role.ASSISTANT for c in m.tool_calls or []]
    results = [m.tool_call_id for m in checkpoint.messages if m.role == Role.TOOL]
    assert results == calls


def test_approvals_lists_what_waits_then_approve_and_reject_mid_batch(cli):
    sid, first = _paused(cli)
    waiting = [ApprovalView.model_validate(v) for v in cli.read_json("approvals")]
    mine = next(v for v in waiting if v.session_id == sid)
    assert (mine.agent, mine.tool_name, mine.arguments, mine.approval_id) == (
        "payments",
        "charge_card",
        {"amount": 10},
        first,
    )
    assert [c.arguments for c in mine.remaining_tool_calls] == [{"amount": 20}]
    table = cli.read("approvals")
    assert "SESSION" in table and "ARGUMENTS" in table and "SINCE" in table
    assert any(sid in line and first in line and '{"amount":10}' in line for line in table.splitlines())

    approved = RunResult.model_validate_json(cli.ok("approve", sid, "--note", "ok", "--json"))
    assert approved.finish_reason == "awaiting-approval" and approved.approval_id not in (None, first)
    # the model sees the reviewer's note next to the result
    assert json.loads(approved.messages[-1].content) == {
        "result": {"charged": 10, "idempotency_key": "call_1_1"},
        "approvalNote": "ok",
    }

    out = cli("reject", sid, "--approval-id", approved.approval_id, "--note", "too much")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        f"rejected charge_card [call_1_2] (approval {approved.approval_id}) by {getpass.getuser()} with note 'too much'"
    )
    assert lines[2].strip().startswith("assistant  Looking up, then charging twice.")  # the turn's tail
    assert '✗ error    charge_card [call_1_2] {"error": "rejected' in out.stdout
    assert "All calls have results." in out.stdout and f"session {sid}: stop" in out.stdout

    assert sid not in [v["sessionId"] for v in cli.read_json("approvals")]
    _one_result_per_call_in_order(Checkpoint.model_validate_json(cli.read("show", sid, "--json")))


def test_approve_with_other_arguments(cli):
    sid, _ = _paused(cli)
    out = cli.ok("approve", sid, "--arguments", '{"amount": 11}')
    assert 'and arguments {"amount": 11}' in out.splitlines()[0]
    assert '"charged": 11' in out


def test_refused_decisions_are_one_clear_line(cli):
    sid, first = _paused(cli)
    one_line_error(cli("approve", sid, "--approval-id", "not-this-one"), 1, first)  # names the pending one
    one_line_error(cli.inproc("approve", "no-such-session"), 2, "no session 'no-such-session'")
    one_line_error(cli("approve", sid, "--arguments", "{amount: 11"), 2, "--arguments: malformed JSON")
    one_line_error(cli.inproc("approve", sid, "--arguments", "[11]"), 2, "--arguments: expected a JSON object")
    one_line_error(cli.inproc("approve", sid, "--reject", "--arguments", "{}"), 2, "cannot go with --reject")
    one_line_error(cli.inproc("reject", sid, "--bogus"), 2, "unrecognized arguments: --bogus")
    cli.ok("reject", sid, "--approval-id", first)
    out = cli("approve", sid, "--approval-id", first)  # already decided
    assert out.returncode == 1 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_approval_from_another_process_after_the_worker_was_replaced(cli, tmp_path):
    """The worker that started the run is stopped (SIGTERM); a new one takes over the waiting run."""
    own = Cli(address=cli.address, task_queue=f"swap-{uuid.uuid4().hex[:8]}", store_path=tmp_path / "s.db")
    agents = ["tests.agents:payments_agent"]
    first_worker = own.start_worker(agents, tmp_path / "worker-1.log")
    sid, first = _paused(own)
    stop(first_worker, signal.SIGTERM)
    assert first_worker.returncode is not None
    second_worker = own.start_worker(agents, tmp_path / "worker-2.log")
    try:
        out = own("approve", sid, "--approval-id", first)  # a separate process, as every CLI call
        assert out.returncode == 0, out.stderr
        assert '→ result   charge_card [call_1_1] {"charged": 10' in out.stdout
        assert f"session {sid}: awaiting-approval" in out.stdout
        out = own("reject", sid, "--note", "no")
        assert out.returncode == 0, out.stderr
        assert f"session {sid}: stop" in out.stdout
    finally:
        stop(second_worker)
    store = SqliteStore(own.store_path)
    try:
        checkpoint = store.load(sid)
    finally:
        store.close()
    _one_result_per_call_in_order(checkpoint)
    assert checkpoint.messages[-1].content == "All calls have results."


def test_prune_and_delete_keep_a_session_that_waits_for_approval(cli):
    """`prune` during a wait used to delete the session; `approve` then hung forever."""
    import time

    sid = session_id("wait")
    paused = cli.ok("run", "payments", "Charge me", "--session", sid, "--json")
    assert json.loads(paused)["approvalId"]
    time.sleep(1.5)
    out = cli.ok("prune", "--older-than", "1s")
    assert out.startswith("pruned ") and "waiting for approval" in out
    assert sid in [s["sessionId"] for s in cli.read_json("sessions")]
    one_line_error(cli("delete", sid), 1, "--force")  # its run is live, waiting for the decision
    decided = cli.ok("approve", sid, "--json")
    assert json.loads(decided)["finishReason"] in ("awaiting-approval", "stop")
    cli.ok("cancel", sid)
