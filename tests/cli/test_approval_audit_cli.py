"""`approve --by/--note/--arguments` and `reject`: recorded in the checkpoint, rendered by `show`."""

from __future__ import annotations

from durable_agents.checkpoint.format import Checkpoint
from durable_agents.client.result import RunResult
from tests.cli.conftest import Cli, session_id


def _paused(cli: Cli) -> str:
    sid = session_id("audit")
    result = RunResult.model_validate_json(cli.ok("run", "payments", "Charge the customer", "--session", sid, "--json"))
    assert result.finish_reason == "awaiting-approval"
    return sid


def test_approve_records_by_note_and_edited_arguments_and_show_renders_them(cli):
    sid = _paused(cli)
    out = cli.ok("approve", sid, "--by", "alice", "--note", "smaller, please", "--arguments", '{"amount": 9}')
    assert out.splitlines()[0].endswith("by alice with note 'smaller, please' and arguments {\"amount\": 9}")
    out = cli.ok("reject", sid, "--by", "bob", "--note", "once is enough")
    assert "by bob with note 'once is enough'" in out.splitlines()[0]

    saved = Checkpoint.model_validate_json(cli.read("show", sid, "--json"))
    approved, rejected = saved.decisions
    assert (approved.tool_call_id, approved.approved, approved.decided_by) == ("call_1_1", True, "alice")
    assert (approved.note, approved.arguments) == ("smaller, please", {"amount": 9})
    assert (rejected.tool_call_id, rejected.approved, rejected.decided_by) == ("call_1_2", False, "bob")
    assert rejected.note == "once is enough" and rejected.decided_at >= approved.decided_at

    text = cli.read("show", sid)
    lines = text.splitlines()
    result_line = next(i for i, line in enumerate(lines) if "→ result   charge_card [call_1_1]" in line)
    decided = lines[result_line + 1]
    assert "✓ approved by alice" in decided and "note 'smaller, please'" in decided
    assert 'ran with {"amount":9}' in decided  # not the model's {"amount":10} shown on the call above
    rejected_line = next(i for i, line in enumerate(lines) if "✗ error    charge_card [call_1_2]" in line)
    assert "✗ rejected by bob" in lines[rejected_line + 1] and "note 'once is enough'" in lines[rejected_line + 1]


def test_the_decider_defaults_to_the_os_user(cli):
    sid = _paused(cli)
    me = {"LOGNAME": "zed-reviewer", "USER": "zed-reviewer", "LNAME": "zed-reviewer", "USERNAME": "zed-reviewer"}
    out = cli("approve", sid, env=me)
    assert out.returncode == 0, out.stderr
    assert "by zed-reviewer" in out.stdout.splitlines()[0]
    saved = Checkpoint.model_validate_json(cli.read("show", sid, "--json"))
    assert saved.decisions[0].decided_by == "zed-reviewer"


def test_help_says_who_decides_and_that_the_model_sees_the_note(cli):
    text = cli.read("approve", "--help")
    assert "--by" in text and "default: your OS user name" in " ".join(text.split())
