"""`fork`: patches from the command line, through Temporal, resumed, compared."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from durable_agents.checkpoint.compare import TrajectoryComparison
from durable_agents.checkpoint.format import Checkpoint, Message, Role
from durable_agents.cli.fork import ForkMade
from tests.cli.conftest import one_line_error, session_id

SUNNY_PARIS = '{"city": "Paris", "sky": "sun", "high_c": 25}'


@pytest.fixture(scope="module")
def booked(cli) -> str:
    sid = session_id("src")
    cli.ok("run", "booker", "Book a table for 2", "--session", sid)
    return sid


async def test_fork_with_a_tool_result_resumed_goes_through_temporal_and_diverges(cli, booked, env):
    made = ForkMade.model_validate_json(
        cli.ok("fork", booked, "--from-step", "1", "--tool-result", f"call_2_0={SUNNY_PARIS}", "--resume", "--json")
    )
    assert made.source_session_id == booked and made.step == 1 and made.session_id == f"{booked}.fork-1"
    assert made.result is not None and made.result.finish_reason == "stop"
    fork = Checkpoint.model_validate_json(cli.read("show", made.session_id, "--json"))
    paris = next(m for m in fork.messages if m.role == Role.TOOL and m.tool_call_id == "call_2_0")
    assert json.loads(paris.content) == json.loads(SUNNY_PARIS)

    cmp = TrajectoryComparison.model_validate_json(cli.read("diff", booked, made.session_id, "--json"))
    assert cmp.diverged_at == 1  # the first turn's Paris result differs
    assert cmp.a[0].tool_calls[0].result["sky"] == "rain" and cmp.b[0].tool_calls[0].result["sky"] == "sun"
    assert cmp.drift.empty

    # the fork ran as a workflow + activity on the worker: it is in Temporal's history
    query = f'WorkflowType = "ForkSession" AND TaskQueue = "{cli.task_queue}"'
    deadline = time.monotonic() + 15
    while True:
        found = [w async for w in env.client.list_workflows(query) if w.id.startswith(f"fork-{booked}-")]
        if found or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.3)
    assert len(found) == 1
    history = await env.client.get_workflow_handle(found[0].id, run_id=found[0].run_id).fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "activity_task_completed_event_attributes" in kinds
    assert "workflow_execution_completed_event_attributes" in kinds


def test_fork_patches_input_state_messages_and_several_results(cli, booked, tmp_path):
    source = Checkpoint.model_validate_json(cli.read("show", booked, "--json"))
    rewritten = [m for m in source.messages[:2]] + [Message.user("Actually, somewhere warm.")]
    messages_file = tmp_path / "messages.json"
    messages_file.write_text(json.dumps([m.to_dict() for m in rewritten]))
    out = cli.ok(
        "fork",
        booked,
        "--from-step",
        "0",
        "--messages-file",
        str(messages_file),
        "--business-state",
        '{"budget": 50}',
        "--append-input",
        "And cheap.",
        "--new-session-id",
        f"{booked}-warm",
    )
    assert out.startswith(f"forked {booked} at step 0 into {booked}-warm (4 messages, status in-progress)")
    assert f"resume {booked}-warm" in out
    warm = Checkpoint.model_validate_json(cli.read("show", f"{booked}-warm", "--json"))
    assert warm.business_state == {"budget": 50}
    assert [m.content for m in warm.messages[2:]] == ["Actually, somewhere warm.", "And cheap."]

    # a whole checkpoint works as a messages file too (show --json output)
    checkpoint_file = tmp_path / "checkpoint.json"
    checkpoint_file.write_text(cli.read("show", booked, "--json"))
    cli.ok("fork", booked, "--from-step", "3", "--messages-file", str(checkpoint_file))

    both = cli.ok(
        "fork",
        booked,
        "--from-step",
        "1",
        "--tool-result",
        f"call_2_0={SUNNY_PARIS}",
        "--tool-result",
        'call_2_1="closed today"',
        "--json",
    )
    made = ForkMade.model_validate_json(both)
    fork = Checkpoint.model_validate_json(cli.read("show", made.session_id, "--json"))
    results = {m.tool_call_id: m.content for m in fork.messages if m.role == Role.TOOL}
    assert results["call_2_1"] == "closed today" and json.loads(results["call_2_0"])["sky"] == "sun"


def test_a_fork_of_a_paused_run_asks_for_approval_again(cli):
    sid = session_id("pay")
    cli.ok("run", "payments", "Charge the customer", "--session", sid)
    out = cli("fork", sid, "--from-step", "1", "--resume")
    assert out.returncode == 0, out.stderr
    assert f"forked {sid} at step 1 into {sid}.fork-1" in out.stdout
    assert f"session {sid}.fork-1: awaiting-approval" in out.stdout
    assert f"approve {sid}.fork-1 --approval-id" in out.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--from-step", "7"], "has no checkpoint for step 7: its history keeps steps 0, 1, 2, 3"),
        (["--from-step", "1", "--tool-result", "call_2_0={sky: sun"], "--tool-result call_2_0: malformed JSON"),
        (["--from-step", "1", "--tool-result", "call_2_0"], "write it as CALL_ID=JSON"),
        (["--from-step", "1", "--tool-result", "call_zz=1"], "no tool call 'call_zz'"),
        (["--from-step", "1", "--business-state", "{oops"], "--business-state: malformed JSON"),
        (["--from-step", "1", "--messages-file", "/no/such/file.json"], "cannot read it"),
        (["--from-step", "one"], "invalid step 'one'"),
        ([], "the following arguments are required: --from-step"),
    ],
)
def test_fork_bad_arguments_exit_2(cli, booked, args, needle):
    one_line_error(cli.inproc("fork", booked, *args), 2, needle)


def test_fork_of_an_unknown_session_or_into_a_taken_id_exit_2(cli, booked, tmp_path):
    one_line_error(cli("fork", "no-such-session", "--from-step", "1"), 2, "no session 'no-such-session'")
    one_line_error(
        cli.inproc("fork", booked, "--from-step", "1", "--new-session-id", booked),
        2,
        f"cannot fork into session '{booked}'",
    )
    not_messages = tmp_path / "bad.json"
    not_messages.write_text('[{"role": "wizard"}]')
    one_line_error(
        cli.inproc("fork", booked, "--from-step", "1", "--messages-file", str(not_messages)),
        2,
        "not a list of messages",
    )
